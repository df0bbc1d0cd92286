"""Picking a winner over seeds end to end: a tiny search over three learning rates, its two best
re-trained over two seeds in RUN_DIR/select/, the winner chosen by its mean."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

LEARNING_RATES = [3e-3, 1e-3, 1e-4]


def test_the_two_best_configurations_are_retrained_over_seeds_and_the_best_mean_wins(tmp_path, cache_dir):
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        f"search_space.training.learning_rate.values={LEARNING_RATES}",
        "select.top_k=2",
        "select.seeds=[1,2]",
        "training.max_steps=30",  # three checkpoints a run: the checkpoint budget frees one at least
        # the recipe's own value: the defaults trial, re-trained beside the top 2
        "training.learning_rate=1e-4",
        "search_alg.defaults_trial=true",
        "cluster.price_per_cpu_hour=0.04",
        "budget.usd=100",  # a budget the selection draws on, never spent
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    searched = pd.read_csv(run_dir / "results.csv")["cost_usd"].sum()
    retrained = pd.read_csv(run_dir / "select" / "results.csv")
    selected = retrained["cost_usd"].sum()
    assert len(retrained) in (4, 6)  # the top 2 and, unless it is one of them, the defaults, over 2 seeds
    assert f"${searched:.4g} for the search + ${selected:.4g} for the selection's {len(retrained)} runs" in proc.stdout
    spent = re.search(r"budget: +\$([0-9.e-]+) of \$100 used, the selection included", proc.stdout)
    assert spent and float(spent.group(1)) > searched * 1.5  # the four re-trainings were counted too

    search = pd.read_csv(run_dir / "results.csv")
    assert len(search) == 3, "the grid holds the defaults point and runs it once"
    assert search.loc[search["defaults"], "training.learning_rate"].tolist() == [1e-4]
    top = search.sort_values("best_eval_loss")["training.learning_rate"].head(2).tolist()
    retrained = [*top, *([1e-4] if 1e-4 not in top else [])]
    beside = " and the defaults trial's" if 1e-4 not in top else ""
    assert f"hfsweep: select: re-training the 2 best configurations{beside} over seeds [1, 2]" in proc.stdout
    reruns = pd.read_csv(run_dir / "select" / "results.csv")
    assert len(reruns) == 2 * len(retrained) and set(reruns["ended"]) == {"completed"}
    ran = sorted(zip(reruns["training.learning_rate"], reruns["seed"]))
    assert ran == sorted((lr, s) for lr in retrained for s in (1, 2))
    selection = pd.read_csv(run_dir / "select" / "selection.csv")
    assert selection.loc[selection["defaults"], "training.learning_rate"].tolist() == [1e-4]
    assert "defaults trial:  eval_loss = " in proc.stdout

    by_config = reruns.groupby("training.learning_rate")["last_eval_loss"]  # select.model=final ranks
    means = by_config.mean()
    winner = means.idxmin()
    best = json.loads((run_dir / "best.json").read_text())
    assert best["hyperparameters"] == {"training.learning_rate": winner}
    scores = reruns[reruns["training.learning_rate"] == winner].set_index("seed")["last_eval_loss"]
    assert best["seed"] == scores.idxmin()  # of two seeds the median is the better one
    assert best["value"] == pytest.approx(scores.min())
    assert best["selection"]["mean"] == pytest.approx(means[winner])
    low, high = stats.t.interval(0.95, 1, loc=scores.mean(), scale=stats.sem(scores))
    assert best["selection"]["interval"] == pytest.approx([low, high])
    ranked = reruns.groupby("training.learning_rate")["last_eval_loss"].mean().sort_values()
    assert ranked.index[0] == winner
    loser = reruns[reruns["training.learning_rate"] == ranked.index[1]].set_index("seed")["last_eval_loss"]
    p_value = stats.ttest_rel(scores.loc[[1, 2]], loser.loc[[1, 2]]).pvalue
    assert best["selection"]["p_value"] == pytest.approx(p_value, nan_ok=True)
    if winner != 1e-4:
        assert "against the defaults (training.learning_rate=0.0001: " in proc.stdout
    assert (run_dir / "best" / "config.json").is_file()
    assert best["checkpoint_path"].startswith(str(run_dir / "select"))
    # each re-run keeps its best checkpoint by validation and its final model, no more (checkpoints.keep_per_trial=1)
    runs = (run_dir / "select").glob("*/train_runs/*")
    kept = {run.name: sorted(c.name for c in run.glob("hf_checkpoints/checkpoint-*")) for run in runs}
    assert len(kept) == len(reruns), kept
    assert all(1 <= len(names) <= 2 and "checkpoint-30" in names for names in kept.values()), kept
    assert (run_dir / "select" / "checkpoints.json").is_file()

    results_md = (run_dir / "results.md").read_text()
    assert "## Selection over seeds" in results_md and "95% CI" in results_md and "paired t-test" in results_md
    assert f"the winner's median seed {best['seed']}" in proc.stdout

    # resuming the finished sweep runs its finish again (Tune's restore): the selection is not run
    # again, and best.json stays its winner, not the search's best trial
    again = subprocess.run([sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "holds a finished selection: it is not run again, and best/ stays its winner" in again.stdout
    assert json.loads((run_dir / "best.json").read_text()) == best


def test_a_search_that_spent_its_budget_skips_the_selection_in_one_line(tmp_path, cache_dir):
    """The budget bounds everything one command launches: `select.top_k` after a spent budget
    trains nothing more (it trained six unbudgeted runs before)."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_space.training.learning_rate.values=[1e-3,1e-4]",
        "select.top_k=2",
        "cluster.price_per_cpu_hour=0.04",
        "budget.usd=0.000001",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the sweep ended on its USD budget" in proc.stdout
    assert "hfsweep: select: skipped: the search spent the sweep's budget" in proc.stdout
    assert not (run_dir / "select").exists()


def test_a_budget_that_prices_the_search_alone_leaves_the_selection_to_run(tmp_path, cache_dir):
    """`select.within_budget=false` (the fair test's: a search of N defaults runs in samples, then
    its winner measured over seeds): the spent budget stops the search, and the selection runs to the end."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        "debug=tiny",
        "search_space.training.learning_rate.values=[1e-3,1e-4]",
        "select.top_k=1",
        "select.seeds=[1,2]",
        "select.within_budget=false",
        "budget.train_samples=1",
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the sweep ended on its training-samples budget" in proc.stdout
    reruns = pd.read_csv(run_dir / "select" / "results.csv")
    assert len(reruns) == 2 and set(reruns["ended"]) == {"completed"}
    assert (run_dir / "select" / "selection.csv").is_file()


# Two learning rates, one trial at a time, the winner re-trained over seeds 1 and 2; a trial holds
# after its checkpoint at step 10 (which one: the test's `+callbacks.hold.*`) until the test releases it.
HELD_SWEEP = [
    "debug=tiny",
    "search_space.training.learning_rate.values=[3e-3,1e-3]",
    "cluster.max_concurrent_trials=1",
    "select.top_k=1",
    "select.seeds=[1,2]",
    "+callbacks.hold._target_=tests.faults.HoldAfterStep",
    "+callbacks.hold.step=10",
]

# The selection drops the sweep's callbacks (nothing ends a seed early); this driver keeps the hold.
SELECTING_KEEPS_CALLBACKS = (
    "import runpy; from hfsweep.driver.results import select; "
    "select.RUN_TO_THE_END = {k: v for k, v in select.RUN_TO_THE_END.items() if k != 'callbacks'}; "
    "runpy.run_module('hfsweep', run_name='__main__', alter_sys=True)"
)


def test_a_selection_cut_short_is_continued_by_resume_keeping_its_finished_runs(tmp_path, cache_dir):
    """A session stopped during the selection (the driver and its Ray killed) left select/ without
    selection.csv; resume used to skip a selection whose folder existed. Now Tune restores it: the
    finished seed is kept, the held one continues from its checkpoint, and the selection is written."""
    import glob
    import json
    import os
    import time

    from tests.faults import kill_driver

    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-c",
        SELECTING_KEEPS_CALLBACKS,
        *HELD_SWEEP,
        "+callbacks.hold.seed=2",  # the selection's seed-2 run holds: the driver is killed there
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    selection = run_dir / "select" / "sweep"
    holding = selection / "train_runs" / "holding"
    deadline = time.time() + 400
    while not holding.exists() and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert holding.exists(), "the selection's seed-2 run never held at step 10"
    time.sleep(4)  # Tune saves its experiment state every second
    kill_driver(driver)
    assert not (run_dir / "select" / "selection.csv").exists()
    done_before = {}
    for result_file in glob.glob(str(selection / "run_trial_*" / "result.json")):
        rows = [json.loads(line) for line in open(result_file) if line.strip()]
        if rows and rows[-1].get("done"):
            done_before[result_file] = open(result_file).read()
    assert len(done_before) == 1, "seed 1 finished before seed 2 held"
    (holding.parent / "released").touch()

    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "continuing the selection" in resumed.stdout
    table = pd.read_csv(run_dir / "select" / "selection.csv")
    assert len(table) == 1 and table["n"].iloc[0] == 2 and {"final_seed_1", "final_seed_2"} <= set(table.columns), table
    for path, before in done_before.items():
        assert open(path).read() == before, "the finished seed was run again"


def test_a_search_stopped_by_ctrl_c_selects_nothing_until_resume_finishes_it(tmp_path, cache_dir):
    """Tune's fit returns after a Ctrl-C, so the selection used to start on the half-run search
    (and a later resume then skipped it as done). Now it is not run, in one line; resume finishes
    the search and selects."""
    import os
    import signal
    import time

    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "hfsweep",
        *HELD_SWEEP,
        "+callbacks.hold.learning_rate=1e-3",  # the search's 1e-3 trial holds: the driver gets a Ctrl-C there
        f"cache_dir={cache_dir}",
        f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
    with open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        holding = run_dir / "sweep" / "train_runs" / "holding"
        deadline = time.time() + 400
        while not holding.exists() and time.time() < deadline and driver.poll() is None:
            time.sleep(0.2)
        assert holding.exists(), "the search's 1e-3 trial never held at step 10"
        time.sleep(3)
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=300)
    printed = (tmp_path / "driver.log").read_text()
    assert (
        "hfsweep: select: not run: the search was interrupted with 1 trials unfinished; "
        f"python -m hfsweep.resume {run_dir} finishes it, then selects"
    ) in printed, printed[-3000:]
    assert not (run_dir / "select").exists()
    (holding.parent / "released").touch()

    resumed = subprocess.run(
        [sys.executable, "-m", "hfsweep.resume", str(run_dir)], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = pd.read_csv(run_dir / "select" / "selection.csv")
    assert table["n"].iloc[0] == 2
