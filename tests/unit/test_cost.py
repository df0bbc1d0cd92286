"""Cost as a result: throughput, peak memory, trainable parameters and MFU in every report (both
loops, worker groups combined), results.csv's cost columns and USD, cost objectives, `budget.usd`,
and TensorBoard's HParams sessions. (`pytest -k cost`; the end-to-end sweeps are slow.)"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import math
import os
import time

import pandas as pd
import pytest
import torch

from hfsweep.config.errors import ConfigError
from hfsweep.contract import combine_ranks
from hfsweep.driver.budget import build_budget, trial_cost_usd
from hfsweep.driver.preflight import preflight
from hfsweep.loops.cost import Cost, peak_flops
from hfsweep.tasks import get_task
from hfsweep.tasks.metrics import check_objective_metric
from tests.conftest import resolved_config, run_sweep

COST_OBJECTIVES = ["metric=[eval_loss,train_tokens_per_second]", "mode=[min,max]"]
# 40 steps, a report every 20: seconds of training per report, so that Tune's lag in taking a report
# on a loaded machine (in its time_total_s, not in the loop's clock) stays well inside 10%
LONGER = ["training.max_steps=40", "training.eval_steps=20", "training.save_steps=20", "training.logging_steps=20"]
# Two workers' start-ups end seconds apart on a loaded machine, and each clock starts at its own: a
# longer run keeps that skew a small share of the training time the throughput is checked over.
TWO_WORKERS_LONGER = [
    "training.max_steps=80",
    "training.eval_steps=40",
    "training.save_steps=40",
    "training.logging_steps=40",
]
BATCH, BLOCK = 8, 128  # conf/training/default.yaml's per_device_train_batch_size, conf/data's block_size


def config(tmp_path, *overrides):
    return resolved_config(list(overrides), tmp_path, tmp_path)


class Tiny(torch.nn.Module):
    """A model taking a batch as the loops hand it (keyword inputs), with one frozen parameter."""

    def __init__(self):
        super().__init__()
        self.embed, self.frozen = torch.nn.Embedding(10, 4), torch.nn.Parameter(torch.zeros(3), requires_grad=False)

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None, labels=None):
        return self.embed(input_ids).sum() if input_ids is not None else pixel_values.sum()


def test_cost_counts_training_batches_only_and_their_real_tokens():
    model = Tiny()
    cost = Cost(model, get_task("causal_lm"))
    cost.start()
    ids, mask = torch.ones(2, 5, dtype=torch.long), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    for _ in range(3):
        model(input_ids=ids, attention_mask=mask)
    model.eval()
    model(input_ids=ids, attention_mask=mask)  # evaluation: not training
    assert (cost.samples, int(cost.tokens)) == (6, 24)
    metrics = cost.metrics()
    assert metrics["trainable_params"] == 40 and cost.params == 43
    assert metrics["train_tokens_per_second"] == pytest.approx(4 * metrics["train_samples_per_second"])
    assert "mfu" not in metrics, "no MFU on a CPU"


def test_cost_counts_input_ids_without_a_mask_and_samples_for_images():
    model = Tiny()
    cost = Cost(model, get_task("causal_lm"))
    cost.start()
    model(input_ids=torch.ones(2, 5, dtype=torch.long))
    assert int(cost.tokens) == 10
    images = Tiny()
    image_cost = Cost(images, get_task("image_classification"))
    image_cost.start()
    images(pixel_values=torch.ones(3, 12), labels=torch.zeros(3))
    assert image_cost.samples == 3 and "train_tokens_per_second" not in image_cost.metrics()


def test_mfu_is_six_params_tokens_per_second_over_the_devices_bf16_peak(monkeypatch):
    model = Tiny()
    cost = Cost(model, get_task("causal_lm"))
    cost.start()
    model(input_ids=torch.ones(2, 5, dtype=torch.long))
    cost.device = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 80GB HBM3")
    metrics = cost.metrics()
    assert metrics["mfu"] == pytest.approx(6 * 43 * metrics["train_tokens_per_second"] / 989e12)


@pytest.mark.parametrize(
    "name, flops",
    [
        ("NVIDIA H100 80GB HBM3", 989e12),
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA L40S", 362e12),
        ("NVIDIA L4", 121e12),
        ("Tesla T4", None),
    ],
)
def test_peak_flops_by_device_name(name, flops):
    assert peak_flops(name) == flops


def test_a_worker_groups_report_sums_throughput_and_takes_the_largest_memory():
    ranks = [
        {
            "step": 10,
            "train_tokens_per_second": 100.0,
            "train_samples_per_second": 1.0,
            "peak_memory_mb": 50.0,
            "mfu": 0.2,
        },
        {
            "step": 10,
            "train_tokens_per_second": 120.0,
            "train_samples_per_second": 1.5,
            "peak_memory_mb": 70.0,
            "mfu": 0.4,
        },
    ]
    assert combine_ranks(ranks) == {
        "step": 10,
        "train_tokens_per_second": 220.0,
        "train_samples_per_second": 2.5,
        "peak_memory_mb": 70.0,
        "mfu": pytest.approx(0.3),
    }


def test_cost_metrics_may_be_objectives_where_they_are_reported(tmp_path):
    preflight(config(tmp_path, *COST_OBJECTIVES, "scheduler=fifo"))
    preflight(config(tmp_path, "metric=peak_memory_mb", "mode=min"))
    with pytest.raises(ConfigError, match="metric: mfu is estimated on GPUs only"):
        preflight(config(tmp_path, "metric=mfu", "mode=max"))
    cfg = config(tmp_path)
    with pytest.raises(
        ConfigError, match="model.task=image_classification trains on no tokens; use train_samples_per_second"
    ):
        check_objective_metric(cfg, get_task("image_classification"), "train_tokens_per_second")
    check_objective_metric(cfg, get_task("image_classification"), "train_samples_per_second")


def test_trial_cost_is_its_hours_times_what_it_holds_times_the_price(tmp_path):
    cfg = config(tmp_path, "cluster.num_workers=2", "cluster.price_per_cpu_hour=0.5")
    cluster, strategy = cfg["cluster"], cfg["strategy"]  # 3 CPUs a trial
    assert trial_cost_usd(cluster, strategy, 7200) == pytest.approx(2 * 3 * 0.5)
    gpu = {**cluster, "use_gpu": True, "price_per_gpu_hour": 4.0}  # 2 GPUs; a GPU's price holds its CPUs
    assert trial_cost_usd(gpu, strategy, 3600) == pytest.approx(8.0)
    assert trial_cost_usd({**cluster, "price_per_cpu_hour": None}, strategy, 3600) is None


def test_usd_budget_ends_the_sweep_at_the_report_that_spends_it(tmp_path):
    budget = build_budget(config(tmp_path, "budget.usd=0.01", "cluster.price_per_cpu_hour=1", "cluster.num_workers=2"))
    budget("a", {"time_total_s": 6.0})  # 6 s x 3 CPUs at $1 per CPU-hour: $0.005
    assert not budget.stop_all()
    budget("b", {"time_total_s": 6.0})
    assert budget.stop_all() and budget.reason == "its USD budget (budget.usd=0.01: $0.01 spent)"
    assert "$0.01 of $0.01" in budget.summary()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["budget.usd=5"],
            "budget.usd: needs the price of what the trials hold; set cluster.price_per_cpu_hour, e.g. "
            "cluster.price_per_cpu_hour=2.5.",
        ),
        (
            ["budget.usd=0", "cluster.price_per_cpu_hour=1"],
            "budget.usd: must be positive, not 0.0; e.g. budget.usd=100, or null for none.",
        ),
        (
            ["cluster.price_per_gpu_hour=-1"],
            "cluster.price_per_gpu_hour: must be at least 0, not -1.0; e.g. cluster.price_per_gpu_hour=2.5.",
        ),
    ],
)
def test_budget_usd_and_prices_are_refused_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as err:
        preflight(config(tmp_path, *overrides))
    assert str(err.value) == message


def test_hparams_session_names_searched_keys_as_results_do_and_lists_objectives_first(tmp_path):
    from hfsweep.driver.loggers import HParamsTBXLoggerCallback

    class Trial:  # what Tune's logger reads of a trial; hashable, as it keys its writers by trial
        local_path, evaluated_params = str(tmp_path), {"training/learning_rate": 0.1}
        config = {"training": {"learning_rate": 0.01, "optim": ["adamw", 2]}, "seed": 3}  # PBT moved 0.1 to 0.01

        def init_local_path(self):
            pass

    trial = Trial()
    trial.last_result = {
        "training_iteration": 2,
        "step": 20,
        "done": True,
        "eval_runtime": 1.0,
        "time_total_s": 9.5,
        "loss": 3.0,
        "eval_loss": 2.5,
        "peak_memory_mb": 700.0,
        "train_tokens_per_second": 4000.0,
        "trainer_finished": True,
    }
    logger = HParamsTBXLoggerCallback(metrics=["time_total_s", "eval_loss"])
    logger.log_trial_start(trial)
    logger.log_trial_result(2, trial, trial.last_result)
    logger.log_trial_end(trial)
    hparams, metrics = hparams_session(str(tmp_path))
    assert hparams == {"training.learning_rate": pytest.approx(0.01), "training.optim": "['adamw', 2]", "seed": 3}
    assert metrics == {
        "final/time_total_s": 9.5,
        "final/eval_loss": 2.5,
        "final/loss": 3.0,
        "final/peak_memory_mb": 700.0,
        "final/train_tokens_per_second": 4000.0,
    }
    assert list(metrics)[:2] == ["final/time_total_s", "final/eval_loss"], "the objectives first, in their order"


# --- end to end ------------------------------------------------------------------------------


def reports(storage) -> dict:
    """Every trial's reports, by trial id, from Tune's result.json files."""
    found = {}
    for path in glob.glob(os.path.join(storage, "sweep", "run_trial_*", "result.json")):
        rows = [json.loads(line) for line in open(path)]
        found[rows[0]["trial_id"]] = rows
    return found


def assert_throughput_matches_tokens_over_time(rows: list[dict], workers: int = 1) -> None:
    """The trial's final throughput (results.csv's) against the tokens it trained, counted
    independently (steps x batch x block x workers: causal LM's blocks are all real tokens), over
    its training time (Tune's `time_total_s` less the start-up the loop reported), within 10%.
    Only the last report: each worker's clock starts where its own start-up ends, and on a loaded
    machine rank 0's reported start-up differs from the other's by seconds, which the first
    report's short window cannot absorb (18% off once, at step 20 of 40, on two workers)."""
    last = rows[-1]
    counted = last["step"] * BATCH * BLOCK * workers / (last["time_total_s"] - rows[0]["startup_s"])
    assert last["train_tokens_per_second"] == pytest.approx(counted, rel=0.1), last
    for row in rows:
        assert row["train_tokens_per_second"] == pytest.approx(BLOCK * row["train_samples_per_second"])


def hparams_session(trial_dir: str) -> tuple[dict, dict]:
    """A trial's HParams session as TensorBoard reads it: its hyperparameters, and each metric the
    session lists with the last value of its scalar."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    accumulator = EventAccumulator(os.path.join(trial_dir, "hparams")).Reload()
    content = {
        tag: plugin_data_pb2.HParamsPluginData.FromString(raw)
        for tag, raw in accumulator.PluginTagToContent("hparams").items()
    }
    start = content["_hparams_/session_start_info"].session_start_info
    hparams = {
        name: value.number_value if value.HasField("number_value") else value.string_value
        for name, value in start.hparams.items()
    }
    names = [info.name.tag for info in content["_hparams_/experiment"].experiment.metric_infos]
    return hparams, {name: accumulator.Scalars(name)[-1].value for name in names}


@pytest.fixture(scope="module")
def cost_sweep(ray_cluster, tmp_path_factory, cache_dir):
    """Two trials on two objectives, the loss and the throughput, with a price per CPU-hour and
    TensorBoard; and what the sweep printed."""

    storage = tmp_path_factory.mktemp("cost")
    overrides = [
        "debug=tiny",
        *LONGER,
        *COST_OBJECTIVES,
        "search_space.training.learning_rate.values=[3e-3,1e-3]",
        "cluster.max_concurrent_trials=1",
        "cluster.price_per_cpu_hour=0.5",
        "logger=tensorboard",
    ]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_sweep(overrides, storage, cache_dir)
    return storage, printed.getvalue()


@pytest.mark.slow
def test_sweep_on_a_cost_objective_reports_cost_in_results_and_summary(cost_sweep):
    storage, out = cost_sweep
    table = pd.read_csv(storage / "results.csv")
    assert len(table) == 2 and (table["status"] == "TERMINATED").all()
    assert "mfu" not in table, "no MFU on a CPU"
    by_trial = reports(storage)
    from transformers import AutoModelForCausalLM

    parameters = AutoModelForCausalLM.from_pretrained(storage / "best").num_parameters()
    for row in table.to_dict("records"):
        rows = by_trial[row["trial_id"]]
        assert (
            row["train_tokens_per_second"] == rows[-1]["train_tokens_per_second"] == row["last_train_tokens_per_second"]
        )
        assert row["trainable_params"] == parameters
        assert rows[-1]["eval_perplexity"] == pytest.approx(math.exp(rows[-1]["eval_loss"])), (
            "a language model's perplexity"
        )
        assert 100 < row["peak_memory_mb"] < 20_000
        assert row["cost_usd"] == pytest.approx(rows[-1]["time_total_s"] / 3600 * 1 * 0.5)  # 1 CPU a trial
        assert_throughput_matches_tokens_over_time(rows)
    total = table["cost_usd"].sum()
    assert f"Total cost: ${total:.4g} over 2 trials" in (storage / "results.md").read_text()
    assert f"  cost:            ${total:.4g} for 2 trials (cost_usd in results.csv)" in out
    assert "checkpoint_dir_name" not in out and "trainable_params" not in out, "left out of Tune's trial tables"


@pytest.mark.slow
def test_tensorboard_hparams_hold_each_trials_searched_values_and_final_metrics(cost_sweep):
    storage, _ = cost_sweep
    table = pd.read_csv(storage / "results.csv").set_index("trial_id")
    by_trial = reports(storage)
    trial_dirs = glob.glob(os.path.join(storage, "sweep", "run_trial_*"))
    assert sorted(os.path.basename(d) for d in trial_dirs) == sorted(f"run_trial_{t}" for t in table.index), (
        "named by id, not rounded values"
    )
    for trial_dir in trial_dirs:
        trial_id = next(t for t in by_trial if t in trial_dir)
        hparams, metrics = hparams_session(trial_dir)
        assert hparams == {"training.learning_rate": pytest.approx(table.loc[trial_id, "training.learning_rate"])}
        final = by_trial[trial_id][-1]
        assert list(metrics)[:2] == ["final/eval_loss", "final/train_tokens_per_second"], "the objectives first"
        for name in ("eval_loss", "train_tokens_per_second", "peak_memory_mb", "loss"):
            assert metrics[f"final/{name}"] == pytest.approx(final[name], rel=1e-6)
        assert not {"final/done", "final/should_checkpoint", "final/eval_runtime"} & set(metrics)


@pytest.mark.slow
def test_accelerate_loop_on_two_workers_reports_their_summed_throughput(ray_cluster, tmp_path, cache_dir):
    overrides = ["debug=tiny", *TWO_WORKERS_LONGER, "loop=accelerate", "cluster.num_workers=2"]
    run_sweep(overrides, tmp_path, cache_dir)
    (rows,) = reports(tmp_path).values()
    assert rows[-1]["distributed"] == "MULTI_CPU"
    assert_throughput_matches_tokens_over_time(rows, workers=2)
    table = pd.read_csv(tmp_path / "results.csv")
    assert {"train_tokens_per_second", "train_samples_per_second", "peak_memory_mb", "trainable_params"} <= set(table)
    assert "cost_usd" not in table, "no price, no cost"


@pytest.mark.slow
def test_usd_budget_stops_the_sweep(ray_cluster, tmp_path, cache_dir, capfd):
    # 3 trials of 40 steps one at a time at $1 per CPU-hour: the first report (several seconds in) spends $0.0003
    overrides = [
        "debug=tiny",
        "training.max_steps=40",
        "cluster.max_concurrent_trials=1",
        "cluster.price_per_cpu_hour=1",
        "budget.usd=0.0003",
        "search_space.training.learning_rate.values=[3e-3,1e-3,1e-4]",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    table = pd.read_csv(tmp_path / "results.csv")
    assert (table["step"] < 40).all(), "the budget stops the running trial before its end"
    assert len(table) < 3 or (table["ended"] == "never started").any(), "no trial starts after the budget is spent"
    out = capfd.readouterr().out
    assert "  budget:          the sweep ended on its USD budget (budget.usd=0.0003: $" in out
    assert table["cost_usd"].sum() >= 0.0003


@pytest.mark.slow
def test_in_process_trials_on_a_reused_actor_each_report_their_own_peak_memory(ray_cluster, tmp_path, cache_dir):
    """Tune reuses an in-process trial's actor: a trial of small batches after one of large batches
    reports its own peak resident set, not the process's lifetime peak."""

    overrides = [
        "debug=tiny",
        "cluster.max_concurrent_trials=1",
        "scheduler=fifo",  # a step is a different amount of data at each batch size
        "search_space.training.learning_rate.values=[1e-3]",
        "+search_space.training.per_device_train_batch_size={sampler:grid,values:[256,2]}",
    ]
    results = run_sweep(overrides, tmp_path, cache_dir)[1]
    assert results.errors == []
    assert len({result.metrics["pid"] for result in results}) == 1, "both trials ran in one reused actor"
    table = pd.read_csv(tmp_path / "results.csv").set_index("training.per_device_train_batch_size")
    large, small = table.loc[256, "peak_memory_mb"], table.loc[2, "peak_memory_mb"]
    assert small < large - 100, (
        f"the second trial (batch 2) reported {small:.0f} MB, the first (batch 256) {large:.0f} MB"
    )


def test_a_budget_pickled_before_the_shared_ledger_resumes_with_what_it_spent():
    """tests/fixtures/budget_pre_ledger.pkl is a SweepBudget of the layout at 775d442 (its spend in
    its own fields, no ledger key: trial_hours=0.5 over 2 CPUs, 100 s of wall clock, two trials of
    300 s and 150 s), as a run directory of that time holds it in Tune's state."""
    import pickle
    from pathlib import Path

    data = (Path(__file__).parents[1] / "fixtures" / "budget_pre_ledger.pkl").read_bytes()
    stopper, callback = pickle.loads(data), pickle.loads(data)  # Tune restores two copies
    assert stopper.summary() == "0.25 of 0.5 trial-hours (450.0 trial-seconds x 2) used"
    callback("c3", {"time_total_s": 100.0})  # one ledger: the stopper sees what the callback counted
    assert not stopper.stop_all() and stopper.summary().startswith("0.3056 of 0.5")
    stopper("c3", {"time_total_s": 450.0})
    assert stopper.stop_all() and callback.reason.startswith("its trial-hours budget")


def two_reports(config):
    from ray import tune

    for step in (1, 2):
        time.sleep(0.05)
        tune.report({"step": step})


def test_an_extension_counts_what_the_sweeps_earlier_experiments_spent(ray_cluster, tmp_path):
    """`resume --extend` seeds its budget with the earlier experiments' spend, read from Tune's
    records: a trial-hours budget those trials spent stops the extension before it starts."""
    from ray import tune

    from hfsweep.driver.budget import SweepBudget, spent_before

    tune.Tuner(
        two_reports,
        param_space={"x": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(name="sweep", storage_path=str(tmp_path), verbose=0),
    ).fit()
    analysis = tune.ExperimentAnalysis(str(tmp_path / "sweep"))
    state = spent_before([analysis])
    assert state["trial_s"] == {t.trial_id: t.last_result["time_total_s"] for t in analysis.trials}
    assert all(seconds >= 0.1 for seconds in state["trial_s"].values()) and 0.1 <= state["spent_s"] < 120
    hours = sum(state["trial_s"].values()) / 3600
    budget = SweepBudget(None, 0.9 * hours, resources_per_trial=1)
    assert not budget.stop_all(), "a fresh budget has spent nothing"
    budget.set_state(state)
    assert budget.stop_all() and budget.reason.startswith("its trial-hours budget")
    roomy = SweepBudget(None, 2 * hours, resources_per_trial=1)
    roomy.set_state(state)
    assert not roomy.stop_all() and roomy.trial_hours_used() == pytest.approx(hours)
