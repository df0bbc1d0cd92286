"""PBT over real trials: an exploited trial continues from the donor's checkpoint, with the
donor's weights and its own perturbed learning rate and weight decay in effect, in both training loops."""

from __future__ import annotations

import glob

import pytest
from transformers import AutoModelForCausalLM

from hfsweep.driver import sweep
from hfsweep.models import weights_digest
from tests.conftest import resolved_config
from hfsweep.driver.preflight import preflight

pytestmark = pytest.mark.slow

EVAL_STEPS = 10


@pytest.fixture(scope="module", params=["hf_trainer", "accelerate"])
def pbt_sweep(request, ray_cluster, tmp_path_factory, cache_dir):
    overrides = [
        f"loop={request.param}",
        "scheduler=pbt",
        "scheduler.quantile_fraction=0.5",
        "scheduler.resample_probability=0.0",  # always perturb: x0.8 or x1.2 of the donor's value
        "+scheduler.synch=true",  # every trial reaches each perturbation point before PBT ranks them: the worse one is always exploited
        "search_space=learning_rate_loguniform",
        "search_space.training.learning_rate.low=1e-5",
        "+search_space.training.weight_decay={sampler:loguniform,low:0.001,high:0.1}",
        "num_samples=2",
        "training.max_steps=30",
        "training.lr_scheduler_type=constant",
        "cluster.num_workers=1",
    ]
    cfg = resolved_config(overrides, tmp_path_factory.mktemp("pbt"), cache_dir)
    results = sweep.run(preflight(cfg))
    rows = [row for result in results for _, row in result.metrics_dataframe.iterrows()]
    return results, rows


def checkpoint_row(rows, path):
    (row,) = [r for r in rows if r["checkpoint_path"] == path]
    return row


def resumed_rows(rows, exploited: bool):
    """First reports after a restore: from another trial's checkpoint (a PBT exploit), or from the
    trial's own (PBT pauses the top trial while the exploited one restarts)."""
    resumed = [row for row in rows if isinstance(row.get("resumed_from"), str)]
    return [r for r in resumed if (checkpoint_row(rows, r["resumed_from"])["trial_id"] != r["trial_id"]) == exploited]


def exploited_rows(rows):
    return resumed_rows(rows, exploited=True)


def test_pbt_sweep_finishes_with_at_least_one_exploit(pbt_sweep):
    results, rows = pbt_sweep
    assert results.errors == []
    assert exploited_rows(rows), "PBT never exploited: no report came from a restored trial"


def test_restored_trials_continue_from_the_checkpoint_step(pbt_sweep):
    _, rows = pbt_sweep
    restored = resumed_rows(rows, exploited=True) + resumed_rows(rows, exploited=False)
    assert restored
    for row in restored:
        donor_step = int(row["resumed_from"].rsplit("checkpoint-", 1)[1])
        assert donor_step > 0
        assert row["step"] == donor_step + EVAL_STEPS


def test_restored_weights_equal_the_donor_checkpoint(pbt_sweep):
    _, rows = pbt_sweep
    assert exploited_rows(rows)
    for row in exploited_rows(rows):
        donor = AutoModelForCausalLM.from_pretrained(row["resumed_from"])
        assert row["resumed_weights_digest"] == weights_digest(donor)


@pytest.mark.parametrize("key, in_effect", [("learning_rate", "lr_in_effect"), ("weight_decay", "weight_decay_in_effect")])
def test_the_perturbed_hyperparameters_are_the_ones_the_optimizer_steps_with(pbt_sweep, key, in_effect):
    """Read from the optimizer's param groups at the first optimizer step after the exploit: the
    restored optimizer state holds the donor's values, which must not be the ones in effect."""
    _, rows = pbt_sweep
    assert exploited_rows(rows)
    for row in exploited_rows(rows):
        donor_row = checkpoint_row(rows, row["resumed_from"])
        donor_value, perturbed = donor_row[f"config/training/{key}"], row[f"config/training/{key}"]
        assert perturbed in (pytest.approx(donor_value * 0.8), pytest.approx(donor_value * 1.2))
        assert row[in_effect] == pytest.approx(perturbed), f"the restored optimizer's {key} is still in effect"


def test_a_trial_restored_from_its_own_checkpoint_keeps_its_hyperparameters(pbt_sweep):
    _, rows = pbt_sweep
    own_restores = resumed_rows(rows, exploited=False)
    if not own_restores:
        pytest.skip("PBT restored no trial from its own checkpoint in this sweep")
    for row in own_restores:
        own = checkpoint_row(rows, row["resumed_from"])
        assert row["config/training/learning_rate"] == own["config/training/learning_rate"]
        assert row["lr_in_effect"] == pytest.approx(own["config/training/learning_rate"])


def lineage(rows, checkpoint: str) -> list:
    """The reports that led to `checkpoint`, first to last: back through the trial's own earlier
    reports and, at a restore, into the trial whose checkpoint it restored (PBT's exploits)."""
    chain, row = [], checkpoint_row(rows, checkpoint)
    while row is not None:
        chain.append(row)
        if isinstance(row.get("resumed_from"), str):
            row = checkpoint_row(rows, row["resumed_from"])
            continue
        earlier = [r for r in rows if r["trial_id"] == row["trial_id"] and r["step"] < row["step"]]
        row = max(earlier, key=lambda r: r["step"]) if earlier else None
    return chain[::-1]


def test_replay_retrains_the_schedule_that_led_to_the_best_checkpoint(pbt_sweep):
    """`hfsweep.replay` of a PBT sweep trains each seed through Tune's PopulationBasedTrainingReplay
    on the best trial's policy (when PBT changed that trial): report by report up to the best
    checkpoint, its values are those of the checkpoints PBT chained into the best one."""
    import json
    import os

    from hfsweep.cli import replay
    from hfsweep.config.errors import ConfigError
    from hfsweep.run_dir import read_config

    results, rows = pbt_sweep
    run_dir = os.path.dirname(results.experiment_path)
    best = json.load(open(os.path.join(run_dir, "best.json")))
    chain = lineage(rows, best["checkpoint_path"])
    changed = replay.pbt_policy(run_dir) is not None
    if changed and read_config(run_dir)["loop"]["name"] == "accelerate":  # refused: see hfsweep/cli/replay.py
        with pytest.raises(ConfigError, match=r"replay: the best trial of .* is a PBT schedule, which replays under "
                                              r"loop=hf_trainer only"):
            replay.replay(run_dir, [1])
        return

    out = replay.replay(run_dir, [1])
    assert os.path.isdir(os.path.join(out, "seed_1")) == changed, "a schedule replays one seed per sweep"
    (result_file,) = glob.glob(os.path.join(out, "**", "run_trial_*", "result.json"), recursive=True)
    replayed = [json.loads(line) for line in open(result_file) if line.strip()]
    assert [r["step"] for r in replayed] == [10, 20, 30], "the replay trains to training.max_steps"
    for ran, planned in zip(replayed, chain):
        assert ran["step"] == planned["step"]
        for key, in_effect in (("learning_rate", "lr_in_effect"), ("weight_decay", "weight_decay_in_effect")):
            # a schedule's values are the trial's config; else the best trial's own, fixed in the replay's config
            value = ran["config"]["training"][key] if changed else best["hyperparameters"][f"training.{key}"]
            assert value == pytest.approx(planned[f"config/training/{key}"]), f"{key} at step {ran['step']}"
            if in_effect in ran:  # the first report after the replay changed the values
                assert ran[in_effect] == pytest.approx(value)
