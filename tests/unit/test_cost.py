"""Cost as a result: throughput, peak memory, trainable parameters and MFU in every report (both
loops, worker groups combined), results.csv's cost columns and USD, cost objectives, `budget.usd`,
and TensorBoard's HParams sessions. (`pytest -k cost`; the end-to-end sweeps: tests/e2e/test_cost_e2e.py.)"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import torch

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import ClusterConfig, StrategyConfig, SweepConfig, typed
from hfsweep.contract.metrics import combine_ranks
from hfsweep.driver.preflight import preflight
from hfsweep.driver.search.budget import build_budget, trial_cost_usd
from hfsweep.loops.cost import Cost, peak_flops
from hfsweep.tasks import get_task
from hfsweep.tasks.metrics import check_objective_metric
from tests.conftest import resolved_config

COST_OBJECTIVES = ["metric=[eval_loss,train_tokens_per_second]", "mode=[min,max]"]


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
        check_objective_metric(typed(SweepConfig, cfg), get_task("image_classification"), "train_tokens_per_second")
    check_objective_metric(typed(SweepConfig, cfg), get_task("image_classification"), "train_samples_per_second")


def test_trial_cost_is_its_hours_times_what_it_holds_times_the_price(tmp_path):
    cfg = config(tmp_path, "cluster.num_workers=2", "cluster.price_per_cpu_hour=0.5")
    cluster, strategy = typed(ClusterConfig, cfg["cluster"]), typed(StrategyConfig, cfg["strategy"])  # 3 CPUs a trial
    assert trial_cost_usd(cluster, strategy, 7200) == pytest.approx(2 * 3 * 0.5)
    gpu = replace(cluster, use_gpu=True, price_per_gpu_hour=4.0)  # 2 GPUs; a GPU's price holds its CPUs
    assert trial_cost_usd(gpu, strategy, 3600) == pytest.approx(8.0)
    assert trial_cost_usd(replace(cluster, price_per_cpu_hour=None), strategy, 3600) is None


def test_usd_budget_ends_the_sweep_at_the_report_that_spends_it(tmp_path):
    priced = config(tmp_path, "budget.usd=0.01", "cluster.price_per_cpu_hour=1", "cluster.num_workers=2")
    budget = build_budget(typed(SweepConfig, priced))
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


def test_samples_budget_ends_the_sweep_at_the_report_that_spends_it_and_counts_on_after_a_resume(tmp_path, monkeypatch):
    import pickle

    from hfsweep.driver.search import budget as budget_module

    budget = build_budget(typed(SweepConfig, config(tmp_path, "budget.train_samples=1000")))
    pickled = pickle.dumps(budget)  # tuner.pkl holds the budget as it was built
    budget("a", {"time_total_s": 1.0, "train_samples": 400})
    budget("a", {"time_total_s": 2.0, "train_samples": 600})  # a trial's latest report counts, not the sum
    assert not budget.stop_all() and budget.summary() == "600 of 1000 training samples used"
    saved = budget.get_state()  # what Tune saves with the callbacks' state
    monkeypatch.setattr(budget_module, "_SPENDS", {})  # a new process resumes the sweep
    callback, stopper = pickle.loads(pickled), pickle.loads(pickled)
    callback.set_state(saved)
    stopper("b", {"time_total_s": 1.0, "train_samples": 399})
    assert not stopper.stop_all()
    stopper("b", {"time_total_s": 2.0, "train_samples": 400})
    assert stopper.stop_all()
    assert stopper.reason == "its training-samples budget (budget.train_samples=1000: 1000 seen)"
    assert callback.get_state()["trial_samples"] == {"a": 600, "b": 400}


def test_a_budget_state_saved_before_samples_were_counted_resumes(tmp_path):
    budget = build_budget(typed(SweepConfig, config(tmp_path, "budget.train_samples=10")))
    budget.set_state({"spent_s": 5.0, "trial_s": {"a": 3.0}, "reason": None})
    assert budget.samples_used() == 0 and not budget.stop_all()


def test_a_samples_budget_below_one_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        preflight(config(tmp_path, "budget.train_samples=-5"))
    assert str(err.value) == (
        "budget.train_samples: must be positive, not -5; e.g. budget.train_samples=100000, or null for none."
    )


def fake_trial(trial_id: str, learning_rate: float, experiment_tag: str = "", **last):
    """A finished Tune trial as `trial_table` reads it: its config, status and last report."""
    from types import SimpleNamespace

    return SimpleNamespace(
        trial_id=trial_id,
        experiment_tag=experiment_tag,
        config={"training": {"learning_rate": learning_rate}},
        status="TERMINATED",
        last_result={"trainer_finished": True, "time_total_s": 10.0, **last},
        path="/nonexistent",
        run_metadata=SimpleNamespace(error_filename=None),
    )


def test_results_give_each_trials_training_samples_and_the_search_in_defaults_runs(tmp_path):
    from types import SimpleNamespace

    import pandas as pd

    from hfsweep.driver.results.report import samples_line, trial_table

    cfg = config(tmp_path, "search_alg.defaults_trial=true")  # the config's own learning rate: 1e-3
    trials = [  # the defaults trial stopped by the scheduler at 20 of its 60 steps of 8 samples
        fake_trial("d", 1e-3, step=20, max_steps=60, train_samples=160, trainer_finished=False),
        fake_trial("a", 3e-3, step=60, max_steps=60, train_samples=480),
        fake_trial("b", 1e-4, step=60, max_steps=60, train_samples=480),
    ]
    history = pd.DataFrame({"step": [20], "eval_loss": [1.0]})
    table = trial_table(SimpleNamespace(trials=trials, trial_dataframes={"d": history}), typed(SweepConfig, cfg))
    assert table.set_index("trial_id")["train_samples"].to_dict() == {"d": 160, "a": 480, "b": 480}
    assert samples_line(table) == (
        "1120 training samples over 3 trials (train_samples in results.csv), 2.33x one defaults run (480 samples)"
    )
    before = [fake_trial("a", 3e-3, step=60)]  # a run directory from before reports carried samples
    old = trial_table(SimpleNamespace(trials=before, trial_dataframes={}), typed(SweepConfig, cfg))
    assert "train_samples" not in old and samples_line(old) == ""


def test_a_draw_of_the_configs_own_values_is_a_draw_and_the_defaults_trial_is_the_first(tmp_path):
    """The defaults trial runs first; a later trial of the search, or of an extension, that drew the
    same values is a draw: results.csv marks one defaults trial, and the tuning curve keeps the draws."""
    from types import SimpleNamespace

    from hfsweep.driver.results.report import trial_tables
    from hfsweep.driver.results.tuning_curve import is_draw

    cfg = config(tmp_path, "search_alg.defaults_trial=true")  # the config's own learning rate: 1e-3
    search = [fake_trial("d", 1e-3, step=60), fake_trial("a", 1e-4, step=60), fake_trial("b", 1e-3, step=60)]
    extension = [fake_trial("c", 1e-3, step=60)]
    analyses = [SimpleNamespace(trials=trials, trial_dataframes={}) for trials in (search, extension)]
    table = trial_tables(analyses, typed(SweepConfig, cfg)).set_index("trial_id")
    assert table["defaults"].to_dict() == {"d": True, "a": False, "b": False, "c": False}
    assert is_draw(table).sum() == 3


def test_a_restored_experiments_trials_are_tabled_in_the_order_the_searcher_created_them(tmp_path):
    """Tune lists a restored experiment's trials in another order than it created them (seen after
    a resume); results.csv keeps the searcher's, so the defaults trial stays the first of its values."""
    from types import SimpleNamespace

    from hfsweep.driver.results.report import trial_tables

    cfg = config(tmp_path, "search_alg.defaults_trial=true")  # the config's own learning rate: 1e-3
    restored = [  # as Tune lists them after a restore: the third created first
        fake_trial("b", 1e-3, experiment_tag="3_learning_rate=0.0010", step=60),
        fake_trial("d", 1e-3, experiment_tag="1_learning_rate=0.0010", step=60),
        fake_trial("a", 1e-4, experiment_tag="2_learning_rate=0.0001", step=60),
    ]
    table = trial_tables([SimpleNamespace(trials=restored, trial_dataframes={})], typed(SweepConfig, cfg))
    assert list(table["trial_id"]) == ["d", "a", "b"]
    assert table.set_index("trial_id")["defaults"].to_dict() == {"d": True, "a": False, "b": False}


def test_an_extension_counts_the_wall_clock_the_ledger_counted_not_the_days_a_sweep_lay_stopped(tmp_path):
    """A sweep ran 2 h, lay stopped 60 h, and its resume ran 3 h: its budget's ledger, which Tune
    saved with the experiment, says 5 h, and `resume --extend` counts that (it counted 65 h, from
    the first trial's start to the last report). Without a saved ledger it falls back to that span."""
    from types import SimpleNamespace

    from ray.tune.callback import CallbackList

    from hfsweep.driver.search.budget import SweepBudget, spent_before

    hour = 3600.0

    def trial(trial_id, start, last):
        metadata = SimpleNamespace(start_time=start, last_result_time=last)
        return SimpleNamespace(trial_id=trial_id, last_result={"time_total_s": last - start}, run_metadata=metadata)

    analysis = SimpleNamespace(
        experiment_path=str(tmp_path), trials=[trial("a", 0, 2 * hour), trial("b", 62 * hour, 65 * hour)]
    )
    assert spent_before([analysis])["spent_s"] == 65 * hour
    budget = SweepBudget(wall_clock_s=8 * hour, trial_hours=None, resources_per_trial=1)
    budget.set_state({"spent_s": 5 * hour, "trial_s": {}, "trial_samples": {}, "reason": None})
    CallbackList([budget]).save_to_dir(str(tmp_path), session_str="2026-12-07_20-00-00")  # as Tune saves it
    assert spent_before([analysis])["spent_s"] == 5 * hour
    budget.set_state(spent_before([analysis]))
    assert not budget.stop_all(), "3 of its 8 hours are left"
