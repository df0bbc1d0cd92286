"""hfsweep as a framework: a user's own configs (--config-dir, hydra.searchpath, a primary config
of their own) and code (`_target_`) from their own folder; the installed wheel from anywhere."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "score_regression"


def hfsweep(*args: str, cwd: Path, timeout: int = 120, executable: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run(
        [executable, "-m", "hfsweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def write_primary_config(folder: Path) -> Path:
    """A user's primary config that pulls in hfsweep's defaults (the documented `defaults:` line)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "myproject.yaml").write_text(
        "defaults:\n  - config   # hfsweep's defaults, from pkg://hfsweep.conf\n  - _self_\n"
        "hydra:\n  searchpath:\n    - pkg://hfsweep.conf\n    - file://" + str(EXAMPLE / "conf") + "\n"
        "name: myproject\nseed: 7\n"
    )
    return folder


@pytest.mark.parametrize(
    "how",
    [
        ["--config-dir", "conf"],
        [f"hydra.searchpath=[file://{EXAMPLE / 'conf'}]"],
    ],
    ids=["config-dir", "searchpath"],
)
def test_a_user_config_folder_adds_experiments_models_and_search_spaces(how, tmp_path):
    proc = hfsweep(*how, "+experiment=score_regression", "--cfg", "job", cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "_target_: score_project.task.ScoreRegression" in proc.stdout  # conf/model/bert_regressor.yaml
    assert "weight_decay:" in proc.stdout.split("search_space:")[1]  # conf/search_space/score_lr.yaml
    refused = hfsweep(*how, "+experiment=score_regresion", f"hydra.run.dir={tmp_path / 'run'}", cwd=EXAMPLE)
    assert refused.returncode == 2 and not (tmp_path / "run").exists()
    options = sorted(
        [p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml")] + ["score_regression"]
    )  # hfsweep's and the user's
    assert refused.stderr.strip().splitlines() == [
        "hfsweep: error: experiment=score_regresion: no such option (did you mean 'score_regression'?); choose one of "
        f"{', '.join(options)}."
    ]


def test_a_user_primary_config_pulls_in_hfsweeps_defaults(tmp_path):
    folder = write_primary_config(tmp_path / "myconf")
    proc = hfsweep("--config-path", str(folder), "--config-name", "myproject", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "name: myproject" in proc.stdout and "seed: 7" in proc.stdout and "ASHAScheduler" in proc.stdout
    refused = hfsweep("--config-path", str(folder), "--config-name", "myproject", "model=bert_regresor", cwd=tmp_path)
    assert refused.returncode == 2
    assert "model=bert_regresor: no such option (did you mean 'bert_regressor'?)" in refused.stderr


@pytest.mark.slow
def test_the_example_project_sweeps_its_own_task_metric_and_loss_from_its_folder(tmp_path, cache_dir):
    data = subprocess.run(
        [sys.executable, "-m", "score_project.data", str(tmp_path / "data")],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
    )
    assert data.returncode == 0, data.stderr[-2000:]
    run_dir = tmp_path / "run"
    proc = hfsweep(
        "--config-dir",
        "conf",
        "+experiment=score_regression",
        f"data.path={tmp_path / 'data'}",
        "training.max_steps=20",
        "scheduler.grace_period=20",
        "search_space.training.learning_rate.values=[3e-3]",
        "search_space.training.weight_decay.values=[0.0]",
        "search_alg.defaults_trial=false",  # one trial: the project's own task, metric and loss are what is tested
        "trainer.delta=0.001",  # the Huber loss is at most delta * |error|: far below the MSE's
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
        cwd=EXAMPLE,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [20]
    progress = pd.read_csv(next((run_dir / "score_regression").glob("run_trial_*/progress.csv")))
    assert progress["eval_pearson"].between(-1, 1).all() and (progress["eval_mae"] > 0).all()
    assert (progress["loss"] < 0.01).all(), "the project's HuberTrainer computed the loss"
    from transformers import AutoModelForSequenceClassification

    best = AutoModelForSequenceClassification.from_pretrained(run_dir / "best")
    assert best.config.num_labels == 1 and best.config.problem_type == "regression"


def venv_on_this_pythons_packages(venv: Path) -> str:
    """A fresh virtual environment that sees, after its own site-packages, those of the Python
    running the tests (where the dependencies are), whether that Python is a plain interpreter or
    itself a virtual environment, whose packages `venv --system-site-packages` would not see."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    own = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    )
    ours = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    added = "; ".join(f"site.addsitedir({folder!r})" for folder in ours)
    (Path(own.stdout.strip()) / "tests_parent_site_packages.pth").write_text(f"import site; {added}\n")
    return python


@pytest.mark.slow
def test_the_wheel_installs_and_runs_from_any_folder(tmp_path, cache_dir):
    """Built and installed non-editable into a fresh virtual environment (its dependencies come
    from this Python's site-packages, whether or not this Python is itself a virtual environment),
    then run from a folder that is not the checkout."""
    repo = EXAMPLE.parents[1]
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(repo)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    venv = tmp_path / "venv"
    python = venv_on_this_pythons_packages(venv)
    (wheel,) = wheels.glob("hfsweep-*.whl")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "-q", str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [python, "-c", "import hfsweep; print(hfsweep.__file__)"], cwd=elsewhere, capture_output=True, text=True
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
    shown = subprocess.run(
        [str(venv / "bin" / "hfsweep"), "--cfg", "job"], cwd=elsewhere, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0 and "ASHAScheduler" in shown.stdout, shown.stderr[-2000:]
    run_dir = tmp_path / "run"
    swept = hfsweep(
        "debug=tiny",
        "training.max_steps=10",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
        cwd=elsewhere,
        timeout=600,
        executable=python,
    )
    assert swept.returncode == 0, swept.stderr[-3000:]
    assert list(pd.read_csv(run_dir / "results.csv")["ended"]) == ["completed"]
