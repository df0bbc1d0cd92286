"""A trial restored from its own checkpoint continues exactly: at every later step it reaches the
losses of the uninterrupted run of the same config and seed, whether Tune restores it after a
crash or PBT pauses and resumes it. The train split is a few batches in several shards, so the
restores land passes into the data, where each pass reads the shards in another order. (Grouped
by length, each pass also groups with its own seed: experiments/glue/rte_restore.sh checks that on
RTE, where a causal LM's equal-length blocks have nothing to group.)"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import run_sweep

# 23 blocks of 128 tokens in 3 shards: three batches of 8 per pass, ten passes in 30 steps; a
# report (and a PBT perturbation point) every 5 steps, at the end of every other pass
SHORT_PASSES = [
    "debug=tiny",
    "data.max_train_tokens=3000",
    "data.chunk_rows=40",
    "training.max_steps=30",
    "training.eval_steps=5",
    "training.save_steps=5",
    "training.logging_steps=5",
]


def losses(history: pd.DataFrame) -> pd.DataFrame:
    assert len(history), "the trial reported nothing"
    return history.drop_duplicates("step", keep="last").set_index("step")[["loss", "eval_loss"]]


@pytest.fixture(scope="module")
def uninterrupted(ray_cluster, tmp_path_factory, cache_dir):
    """The uninterrupted run's losses for a sweep's overrides (each run once per module)."""
    runs: dict = {}

    def losses_for(*overrides: str) -> pd.DataFrame:
        if overrides not in runs:
            storage = tmp_path_factory.mktemp("uninterrupted")
            (result,) = run_sweep(list(overrides), storage, cache_dir)[1]
            assert "resumed_from" not in result.metrics_dataframe
            runs[overrides] = losses(result.metrics_dataframe)
            assert list(runs[overrides].index) == [5, 10, 15, 20, 25, 30]
        return runs[overrides]

    return losses_for


def test_a_trial_tune_restores_after_a_crash_continues_exactly(uninterrupted, tmp_path, cache_dir):
    crash = [
        "cluster.max_failures=1",
        "+callbacks.crash._target_=tests.faults.CrashAfterSave",
        "+callbacks.crash.step=15",
    ]
    (result,) = run_sweep([*SHORT_PASSES, *crash], tmp_path, cache_dir)[1]
    resumed = result.metrics_dataframe["resumed_from"].dropna()
    assert list(resumed.str.rsplit("/", n=1).str[-1]) == ["checkpoint-15"], "Tune did not restore the trial"
    pd.testing.assert_frame_equal(losses(result.metrics_dataframe), uninterrupted(*SHORT_PASSES), check_exact=True)


@pytest.mark.parametrize(
    "overrides",
    [(*SHORT_PASSES, "loop=hf_trainer"), (*SHORT_PASSES, "loop=accelerate")],
    ids=["hf_trainer", "accelerate"],
)
def test_a_trial_pbt_pauses_and_resumes_continues_exactly(overrides, uninterrupted, tmp_path, cache_dir):
    """Two learning rates far apart: the 1e-3 trial leads at every perturbation point, so
    synchronous PBT pauses it there and resumes it from its own checkpoint, with its own values."""
    pbt = [
        "scheduler=pbt",
        "scheduler.quantile_fraction=0.5",
        "+scheduler.synch=true",
        "search_space.training.learning_rate.values=[1e-5,1e-3]",
    ]
    results = run_sweep([*overrides, *pbt], tmp_path, cache_dir)[1]
    leaders = [
        result.metrics_dataframe
        for result in results
        if result.config["training"]["learning_rate"] == 1e-3
        and "resumed_from" in result.metrics_dataframe
        and result.metrics_dataframe["resumed_from"]
        .dropna()
        .str.contains(result.metrics_dataframe["trial_id"][0])
        .all()
    ]
    assert len(leaders) == 1, "no trial kept 1e-3 and resumed only from its own checkpoints"
    (history,) = leaders
    assert history["resumed_from"].notna().sum() >= 2, "PBT did not pause and resume the leading trial"
    pd.testing.assert_frame_equal(losses(history), uninterrupted(*overrides), check_exact=True)
