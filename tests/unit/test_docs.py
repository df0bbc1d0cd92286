"""The documentation cannot drift from the code: its commands run, its reference pages are what the
code gives, the site builds strictly, the README's links land, and `--help` is hfsweep's own.

Runnable blocks: a fenced ```bash block right after a `<!-- runnable -->` line, in README.md,
docs/*.md or an experiment's README. Each command in it (backslash continuations joined, comments dropped, `VAR=value`
prefixes taken as its environment) runs as follows, in one temporary folder per block:
- `python -m hfsweep ARGS`: run through hfsweep's own command line up to the end of its preflight
  (every override, group option and sweep value composed and checked, as the real command does
  before Ray starts; the hardware's check left out: `tests/cli_in_process.py --preflight`), or
  with its own `--cfg`, composed and printed; a command whose data folder is the reader's own
  passes at its refusal of that folder;
- `python -m hfsweep.datasets_offline DIR`: run for real (offline, seconds); a later command's
  `data.path` under DIR must then exist;
- `python -m hfsweep.{report,resume,replay,simulate,glue} ...`: its own argument parser must take
  the command line (the run directory does not exist here, so it refuses that, not its flags);
- `pip install ...`: skipped (it needs the package index);
- anything else (`optuna-dashboard`, `mlflow ui`) fails the test: keep such lines out of runnable blocks.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import run_all

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "experiments").glob("*/README.md")),
]
MARKER = "<!-- runnable -->"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}
COMPANIONS = {"report", "resume", "replay", "simulate", "glue"}
# The one refusal a documented command may get here: its data folder is the reader's (/data/glue/RTE).
ELSEWHERE = re.compile(r"^hfsweep: error: data\.path: '[^']*' does not exist; ", re.M)


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, body) of each ```bash block that follows the marker line."""
    return [
        (text[: m.start()].count("\n") + 2, m.group(1))
        for m in re.finditer(re.escape(MARKER) + r"\n```bash\n(.*?)\n```", text, re.S)
    ]


def commands(block: str) -> list[tuple[dict, list[str]]]:
    """(environment, argv) of each command of a block."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        if words:
            out.append((env, words))
    return out


ALL_BLOCKS = [(page, line, body) for page in PAGES for line, body in runnable_blocks(page.read_text())]


def block_id(case) -> str:
    page, line, _ = case
    return f"{page.relative_to(ROOT)}:{line}"


def test_the_docs_have_runnable_blocks():
    assert len(ALL_BLOCKS) >= 15, [block_id(c) for c in ALL_BLOCKS]
    pages = {page.name for page, _, _ in ALL_BLOCKS}
    assert {"README.md", "getting-started.md", "searching.md", "tasks.md", "results.md"} <= pages


def companion_refusal(module: str, argv: list[str]) -> str:
    """What `python -m hfsweep.MODULE ARGV` writes to stderr when its parser refuses the command
    line; empty when the parser took it (whatever the command then made of the missing run dir)."""
    main = importlib.import_module(f"hfsweep.cli.{module}").main
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
        except Exception:  # noqa: BLE001  (the run directory is missing: past the parser, which is all this checks)
            pass
    text = captured.getvalue()
    return text if "usage:" in text else ""


def single_runs(args: list[str]) -> list[list[str]]:
    """A multirun's command lines as single runs (Hydra prints no `--cfg` of a multirun): every
    value of each swept key once, the others at their first value."""
    if "-m" not in args and "--multirun" not in args:
        return [args]
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in args if a not in ("-m", "--multirun")]
    parser = OverridesParser.create()
    values = []
    for arg in args:
        override = parser.parse_override(arg) if "=" in arg and not arg.startswith("-") else None
        if override is not None and override.is_sweep_override():
            key = arg.split("=", 1)[0]
            values.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            values.append([arg])
    first = [v[0] for v in values]
    runs = [first]
    for i, options in enumerate(values):
        runs += [[*first[:i], option, *first[i + 1 :]] for option in options[1:]]
    return runs


def compose_all(cases: list[list[str]], env: dict, cwd: Path) -> list:
    """Every case through `hfsweep.__main__.cli()` up to the end of its preflight, half the cases in
    each of two Python processes (tests/cli_in_process.py)."""
    return run_all(cases, cwd, "--preflight", cwd=cwd, env={**os.environ, **OFFLINE_ENV, **env})


@pytest.mark.process
def test_every_runnable_command_runs(tmp_path):
    """All blocks' compositions run in one process; the offline data writers for real."""
    cases, where, env, offline_data = [], [], {}, {}
    for case in ALL_BLOCKS:
        page, line, body = case
        folder = tmp_path / block_id(case).replace("/", "_").replace(":", "_")
        folder.mkdir()
        written = []  # the folders a datasets_offline command of this block wrote
        for cmd_env, argv in commands(body):
            env.update(cmd_env)
            if argv[:2] == ["pip", "install"]:
                continue
            assert argv[:2] == ["python", "-m"], f"{block_id(case)}: not a python -m command: {argv}"
            module = argv[2]
            args = argv[3:]
            if module == "hfsweep":
                paths = [a.split("=", 1)[1] for a in args if a.startswith("data.path=")]
                for path in paths:
                    if Path(path).parts[0] in written:
                        assert (folder / path).exists(), f"{block_id(case)}: data.path={path} was not written"
                for one in single_runs(args):
                    cases.append(one)
                    where.append(f"{block_id(case)}: python -m hfsweep {shlex.join(one)}")
            elif module == "hfsweep.datasets_offline":
                out = folder / args[0]
                if args[0] in offline_data:  # the same command in an earlier block: its files, copied
                    shutil.copytree(offline_data[args[0]], out)
                else:
                    ran = subprocess.run(
                        [sys.executable, "-m", module, *args],
                        cwd=folder,
                        capture_output=True,
                        text=True,
                        env={**os.environ, **OFFLINE_ENV},
                        timeout=120,
                    )
                    assert ran.returncode == 0, f"{block_id(case)}: {ran.stderr[-2000:]}"
                    offline_data[args[0]] = out
                written.append(Path(args[0]).parts[0])
            elif module.split(".", 1)[-1] in COMPANIONS and module.startswith("hfsweep."):
                refused = companion_refusal(module.split(".", 1)[1], args)
                assert not refused, f"{block_id(case)}: {shlex.join(argv)}\n{refused}"
            else:
                pytest.fail(f"{block_id(case)}: no way to run {shlex.join(argv)}")
    assert cases
    results = compose_all(cases, env, tmp_path)
    failed = [
        f"{w}\n  exit {code}: {output.strip()[-600:]}"
        for w, (output, code, _) in zip(where, results)
        if code != 0 and not (code == 2 and ELSEWHERE.search(output))
    ]
    assert not failed, "\n".join(failed)
    assert not any(ray for _, _, ray in results), "composing a command started Ray"


@pytest.mark.process
def test_a_broken_command_fails_the_check(tmp_path):
    """The check above is not vacuous: a misspelt key, an unknown option and a config the preflight
    refuses (the recipe's learning rate outside the space a model-based searcher models) fail it."""
    results = compose_all(
        [["training.learning_rat=0.1"], ["scheduler=ashaa"], ["search_space=finetune", "search_alg=optuna"]],
        {},
        tmp_path,
    )
    assert [code for _, code, _ in results] == [2, 2, 2]
    assert "did you mean 'learning_rate'" in results[0][0]
    assert "search_space.training.learning_rate: the defaults trial" in results[2][0]
    assert companion_refusal("replay", ["outputs/DATE/TIME", "--sedes", "1"])  # --seeds, misspelt


@pytest.mark.process
def test_the_reference_pages_are_up_to_date():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr + "\n(run python docs/gen_reference.py)"


def test_the_reference_lists_every_option_and_field():
    sys.path.insert(0, str(ROOT / "docs"))
    import dataclasses

    import gen_reference

    from hfsweep.config import schema
    from hfsweep.tasks import get_task, task_names

    config = (ROOT / "docs" / "reference" / "config.md").read_text()
    for group in (p for p in (ROOT / "conf").iterdir() if p.is_dir() and not p.name.startswith("_")):
        for option in group.glob("*.yaml"):
            assert f"#### `{group.name}={option.stem}`" in config, (group.name, option.stem)
    for f in dataclasses.fields(schema.DataConfig):
        assert f"`data.{f.name}`" in config
    tasks = (ROOT / "docs" / "reference" / "tasks.md").read_text()
    for name in task_names():
        task = get_task(name)
        for f in dataclasses.fields(task) if dataclasses.is_dataclass(task) else []:
            assert f"`task_options.{f.name}`" in tasks, (name, f.name)
    assert gen_reference.field_comment  # the module imports


def test_the_readme_is_short_and_its_links_land():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#]*?)(#[^)]*)?\)", text):
        path, anchor = target
        if path.startswith("http") or not path:
            continue
        assert (ROOT / path).exists(), path
        if anchor and path.endswith(".md"):
            assert anchor[1:] in anchors(ROOT / path), f"{path}{anchor}"
    for needed in ("resume", "budgets", "which-settings-mattered"):
        assert re.search(rf"\(docs/[\w/.-]+\.md#[\w-]*{needed}[\w-]*\)", text), needed


def anchors(page: Path) -> set[str]:
    """The ids of a page's headings, as the site's toc extension makes them (GitHub's agree for these)."""
    out = set()
    for line in page.read_text().splitlines():
        m = re.match(r"#{1,6} (.*?)(?: \{ #([\w-]+) \})?$", line)
        if m:
            out.add(m.group(2) or re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", m.group(1)).strip().lower()))
    return out


@pytest.mark.process
def test_help_is_hfsweeps_own_and_hydras_stays_reachable(tmp_path):
    """`python -m hfsweep --help`: what it does, every group of conf/ with every option, the
    companion commands and the docs' place; `--hydra-help` is Hydra's."""
    env = {**os.environ, **OFFLINE_ENV}
    shown = subprocess.run(
        [sys.executable, "-m", "hfsweep", "--help"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert out.startswith("hfsweep: Hydra-configured Ray Tune sweeps"), out[:300]
    for group in (p for p in (ROOT / "conf").iterdir() if p.is_dir() and not p.name.startswith("_")):
        options = ", ".join(sorted(o.stem for o in group.glob("*.yaml")))
        assert f"{group.name}: {options}" in out, group.name
    for command in COMPANIONS | {"datasets_offline"}:
        assert f"python -m hfsweep.{command}" in out, command
    assert "docs/" in out and "--hydra-help" in out
    assert "is powered by Hydra" not in out  # not Hydra's default app help
    assert not (tmp_path / "outputs").exists()
    hydra = subprocess.run(
        [sys.executable, "-m", "hfsweep", "--hydra-help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert hydra.returncode == 0, hydra.stderr
    assert "Hydra (" in hydra.stdout and "--hydra-help" in hydra.stdout


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed (pip install -e '.[docs]')",
)
@pytest.mark.process
def test_the_site_builds_strictly(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "site" / "experiments" / "glue" / "index.html").exists()
    assert (tmp_path / "site" / "reference" / "config" / "index.html").exists()
