"""hfsweep as a framework, end to end: the example project's own sweep from its folder, and the
wheel installed into a fresh virtual environment and run from anywhere."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.unit.test_user_project import EXAMPLE, hfsweep


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
