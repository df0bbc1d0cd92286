"""Importance, plots and the Optuna export of a real random-search sweep, served by optuna-dashboard, end to end."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import optuna
import pandas as pd
import pytest

from hfsweep.driver.results.insight import study_name
from tests.conftest import run_sweep
from tests.unit.test_insight import assert_png

# A real random search over three keys under ASHA, reported by the command line


SWEEP = [
    "search_alg=random",
    "search_space=learning_rate_loguniform",
    "search_space.training.learning_rate.low=1e-5",
    "+search_space.training.warmup_steps={sampler:choice,values:[0,5]}",
    "num_samples=4",
    "search_alg.defaults_trial=false",  # four draws are enough to rank three keys
    "training.max_steps=15",
    "training.eval_steps=5",
    "training.save_steps=5",
    "training.logging_steps=5",
    "training.warmup_steps=0",
    "scheduler.grace_period=5",
    "cluster.num_workers=1",
    "cluster.max_concurrent_trials=1",  # one at a time, so ASHA stops the worse ones at its rungs
]


@pytest.fixture(scope="module")
def reported_sweep(ray_cluster, tmp_path_factory, cache_dir):
    """The sweep's run directory and the storage `python -m hfsweep.report RUN_DIR --optuna-storage` wrote."""
    storage = tmp_path_factory.mktemp("insight")
    cfg, _ = run_sweep(SWEEP, storage, cache_dir)
    url = f"sqlite:///{storage}/sweep.db"
    proc = subprocess.run(
        [sys.executable, "-m", "hfsweep.report", str(storage), "--optuna-storage", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"Wrote the Optuna study '{study_name(cfg, str(storage))}' (4 trials) into {url}" in proc.stdout
    return cfg, storage, url


def test_storage_holds_every_trial_as_results_csv_and_tune_have_it(reported_sweep):
    cfg, storage, url = reported_sweep
    table = pd.read_csv(storage / "results.csv").set_index("trial_id")
    assert set(table["ended"]) == {"completed", "stopped by scheduler/stopper"}, "ASHA should stop some trials"
    progress = {}
    for path in glob.glob(str(storage / cfg["name"] / "*" / "progress.csv")):
        history = pd.read_csv(path)
        progress[history["trial_id"].iloc[0]] = dict(zip(history["step"], history["eval_loss"]))
    study = optuna.load_study(study_name=study_name(cfg, str(storage)), storage=url)
    assert len(study.trials) == len(table) == 4
    for trial in study.trials:
        row = table.loc[trial.user_attrs["tune_trial_id"]]
        assert trial.params == {
            "training.learning_rate": pytest.approx(row["training.learning_rate"]),
            "training.warmup_steps": row["training.warmup_steps"],
        }
        assert trial.state.name == {"completed": "COMPLETE", "stopped by scheduler/stopper": "PRUNED"}[row["ended"]]
        assert trial.values == [pytest.approx(row["last_eval_loss"])]
        assert trial.intermediate_values == pytest.approx(progress[row.name])
        assert max(trial.intermediate_values) == row["step"]
    assert trial.distributions["training.learning_rate"].log
    assert trial.distributions["training.warmup_steps"].choices == (0, 5)


def test_results_md_ranks_the_searched_keys_and_both_plots_are_images(reported_sweep):
    _, storage, _ = reported_sweep
    text = (storage / "results.md").read_text()
    section = text.split("## Importance", 1)[1]
    shares = {
        line.split("|")[1].strip(): float(line.split("|")[2])
        for line in section.splitlines()
        if line.startswith("| training.")
    }
    assert set(shares) == {"training.learning_rate", "training.warmup_steps"}
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
    assert_png(storage / "importance.png")
    assert_png(storage / "parallel.png")


def test_report_adds_nothing_to_the_console(reported_sweep):
    """The sweep's own report prints nothing (the summary is the sweep's last output); in a fresh
    process, as in test_importance_prints_nothing."""
    _, storage, _ = reported_sweep
    code = f"from hfsweep.driver.results.report import write_report; write_report({str(storage)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert (storage / "importance.png").is_file() and (storage / "parallel.png").is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_optuna_dashboard_serves_the_studys_trials(reported_sweep, tmp_path):
    pytest.importorskip("optuna_dashboard")
    cfg, storage, url = reported_sweep
    port = free_port()
    command = os.path.join(os.path.dirname(sys.executable), "optuna-dashboard")  # the console script beside this Python
    server = subprocess.Popen(
        [command, url, "--host", "127.0.0.1", "--port", str(port), "--server", "wsgiref"],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "dashboard.log", "w"),
    )
    try:
        studies = None
        for _ in range(120):
            try:
                studies = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5))
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "dashboard.log").read_text()
                time.sleep(0.5)
        assert studies, (tmp_path / "dashboard.log").read_text()
        [summary] = [s for s in studies["study_summaries"] if s["study_name"] == study_name(cfg, str(storage))]
        api = f"http://127.0.0.1:{port}/api/studies/{summary['study_id']}"
        detail = json.load(urllib.request.urlopen(api, timeout=30))
        table = pd.read_csv(storage / "results.csv")
        served = {next(a["value"] for a in t["user_attrs"] if a["key"] == "tune_trial_id"): t for t in detail["trials"]}
        assert set(served) == set(table["trial_id"])
        for row in table.itertuples():
            state = {"completed": "Complete", "stopped by scheduler/stopper": "Pruned"}[row.ended]
            assert served[row.trial_id]["state"] == state
            assert served[row.trial_id]["values"] == [pytest.approx(row.last_eval_loss)]
    finally:
        server.kill()
        server.wait(timeout=30)
