"""Many `python -m hfsweep ARGS` command lines in one Python process: what each one prints on file
descriptors 1 and 2 (Python's and any library's, native code's included), its exit code, and
whether it started Ray, without paying the interpreter's start and the imports for each (the
refusal tests run about 80 of them; `tests/unit/test_config.py` also runs one real process per section).

    python -m tests.cli_in_process CASES.json RESULTS.json [--preflight]   # CASES: a list of argument lists

`run_all` runs a test's cases so, split over two such processes (this machine's two cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

# What a Python process ignores by default, wherever it is not raised in __main__ (as here: none is).
PYTHON_IGNORES = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def run(argv: list[str]) -> tuple[str, int, bool]:
    """`hfsweep.__main__.cli()` on `argv`, from a clean Hydra, with warnings shown anew and filtered
    as in a new process (a warning prints once per process, and each case is a process of its own
    to the user): everything written to fds 1 and 2, the exit code, and whether Ray is initialised
    after it. The first case imports hfsweep inside the capture."""
    warnings.resetwarnings()
    warnings.simplefilter("default")  # a changed filter also forgets which warnings were shown
    for category in PYTHON_IGNORES:
        warnings.simplefilter("ignore", category)
    sys.argv = ["hfsweep", *argv]
    code = 0
    with tempfile.TemporaryFile(mode="w+b") as captured:
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        try:
            from hydra.core.global_hydra import GlobalHydra

            from hfsweep.__main__ import cli

            GlobalHydra.instance().clear()
            cli()
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        captured.seek(0)
        output = captured.read().decode(errors="replace")
    ray = sys.modules.get("ray")
    return output, code, bool(ray is not None and ray.is_initialized())


def preflight_only() -> None:
    """Each case stops after the preflight `python -m hfsweep` runs before Ray (`--preflight`) and
    the lookup of a local folder's files (`files_found`): the sweep is not run, and the hardware's
    check is left out, so the docs' GPU commands are checked on a machine without one."""
    from hfsweep.driver import preflight, sweep

    sweep.run = files_found
    preflight.check_hardware = lambda cfg: None


def files_found(checked) -> None:
    """What a real run's data preparation checks of a local folder before Ray starts (a data file for
    every split the config reads, found as `load_raw` finds them: `source_identity`), so that a runnable command
    whose data lacks a split fails here as it would in a real run (a ConfigError: one line, exit 2).
    Data read on the cluster's nodes (`data.prepare_on=cluster`) is not on this machine to check."""
    from hfsweep.config.schema import DataSource, PrepareOn
    from hfsweep.data.sources import source_identity

    data = checked.sweep.data
    if data.source is DataSource.local and data.prepare_on is not PrepareOn.cluster:
        source_identity(data, checked.sweep.cache_dir)
    print("hfsweep: preflight passed")


def run_all(cases: list[list[str]], folder: Path, *flags: str, cwd: Path | None = None, env: dict | None = None):
    """Every case's (output, exit code, Ray started), in order: half the cases in each of two
    processes of this module, at once, in `cwd` (the cases and results are written to `folder`)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")]))
    halves = [list(range(len(cases)))[k::2] for k in range(2)]
    processes = []
    for k, half in enumerate(halves):
        (folder / f"cases-{k}.json").write_text(json.dumps([cases[i] for i in half]))
        files = [str(folder / f"cases-{k}.json"), str(folder / f"results-{k}.json")]
        command = [sys.executable, "-m", "tests.cli_in_process", *files, *flags]
        processes.append(subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True))
    errors = [process.communicate(timeout=600)[1] for process in processes]
    assert all(process.returncode == 0 for process in processes), "\n".join(error[-3000:] for error in errors)
    results: list = [None] * len(cases)
    for k, half in enumerate(halves):
        for i, result in zip(half, json.loads((folder / f"results-{k}.json").read_text())):
            results[i] = result
    return results


if __name__ == "__main__":
    cases_path, results_path = sys.argv[1:3]
    if "--preflight" in sys.argv[3:]:
        preflight_only()
    with open(cases_path) as f:
        cases = json.load(f)
    results = [run(argv) for argv in cases]
    with open(results_path, "w") as f:
        json.dump(results, f)
