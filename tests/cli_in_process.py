"""Many `python -m hfsweep ARGS` command lines in one Python process: each one's stderr and exit
code as the command gives them, without paying the interpreter's start and the imports for each
(the refusal tests run about 75 of them).

    python -m tests.cli_in_process CASES.json RESULTS.json    # CASES: a list of argument lists
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run(argv: list[str]) -> tuple[str, int]:
    """`hfsweep.__main__.cli()` on `argv`, from a clean Hydra: its stderr and exit code."""
    from hydra.core.global_hydra import GlobalHydra

    from hfsweep.__main__ import cli

    GlobalHydra.instance().clear()
    sys.argv = ["hfsweep", *argv]
    stderr, code = io.StringIO(), 0
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli()
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
    return stderr.getvalue(), code


if __name__ == "__main__":
    cases_path, results_path = sys.argv[1:3]
    with open(cases_path) as f:
        cases = json.load(f)
    results = [run(argv) for argv in cases]
    with open(results_path, "w") as f:
        json.dump(results, f)
