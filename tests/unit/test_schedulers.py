"""Every scheduler, searcher and stopper option builds from config, driven by the sweep's metric."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import cloudpickle
import pytest
from ray.tune.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandForBOHB,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)
from ray.tune.schedulers.pb2 import PB2
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter
from ray.tune.stopper import CombinedStopper, ExperimentPlateauStopper, MaximumIterationStopper, TrialPlateauStopper

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig, plain
from hfsweep.driver.search.scheduler_records import SchedulerRecords, build_scheduler_records
from hfsweep.driver.search.schedulers import (
    StepBudget,
    ThresholdStopper,
    build_scheduler,
    build_search_alg,
    build_stopper,
)
from hfsweep.driver.search.search_rules import check_search
from hfsweep.driver.search.search_space import compile_search_space
from tests.conftest import CONF_DIR, sweep_config

SCHEDULERS = {
    "fifo": FIFOScheduler,
    "asha": AsyncHyperBandScheduler,
    "asha_epochs": AsyncHyperBandScheduler,
    "bohb": HyperBandForBOHB,
    "hyperband": HyperBandScheduler,
    "median": MedianStoppingRule,
    "pbt": PopulationBasedTraining,
    "pb2": PB2,
}
LOGUNIFORM_LR = "search_space=learning_rate_loguniform"


def config(tmp_path, *overrides):
    return sweep_config(list(overrides), tmp_path, tmp_path)


def test_every_scheduler_option_is_tested():
    assert {p.stem for p in (Path(CONF_DIR) / "scheduler").glob("*.yaml")} == set(SCHEDULERS)


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_builds_with_step_or_epoch_as_time(name, tmp_path):
    cfg = config(tmp_path, f"scheduler={name}", LOGUNIFORM_LR)
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    assert type(scheduler) is SCHEDULERS[name]
    if name != "fifo":
        assert scheduler._time_attr == ("epoch" if name == "asha_epochs" else "step")


@pytest.mark.parametrize("space, max_t", [("bert_paper", 4), ("finetune", 10)])
def test_a_literature_space_counts_epochs_up_to_its_longest_trial(space, max_t, tmp_path):
    """search_space=bert_paper and finetune select scheduler=asha_epochs, whose last rung is the
    space's most epochs (not the config's 3), and give each trial its own steps."""
    cfg = config(tmp_path, f"search_space={space}")
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    assert scheduler._time_attr == "epoch" and scheduler._max_t == max_t and cfg.training["max_steps"] == -1
    assert [rung for rung, _ in scheduler._brackets[0]._rungs][-1] == 1, "the first rung is one whole epoch"


def test_pbt_mutates_the_search_space_and_perturbs_at_checkpoints(tmp_path):
    cfg = config(tmp_path, "scheduler=pbt")
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    assert scheduler._hyperparam_mutations == {"training": {"learning_rate": [3e-3, 1e-3, 1e-4, 1e-5]}}
    assert scheduler._perturbation_interval == cfg.training["save_steps"]


def test_pbt_perturbations_stay_inside_the_declared_ranges(tmp_path):
    """Through Tune's own explore step: at a range's edge a 1.2 (or 0.8) perturbation is put back at
    the bound, as the RTE comparison's winner at weight decay 0.334 of 0-0.3 was not."""
    from ray.tune.schedulers.pbt import _explore

    cfg = config(
        tmp_path,
        "scheduler=pbt",
        LOGUNIFORM_LR,
        "+search_space.training.weight_decay={sampler:uniform,low:0.0,high:0.3}",
        "+search_space.training.warmup_steps={sampler:randint,low:0,high:10}",
    )
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    mutations = scheduler._hyperparam_mutations
    top = {"training": {"learning_rate": 1e-2, "weight_decay": 0.3, "warmup_steps": 9}}
    bottom = {"training": {"learning_rate": 1e-4, "weight_decay": 0.01, "warmup_steps": 1}}
    for start, factor in ((top, 1.2), (bottom, 0.8)):
        explored, _ = _explore(start, mutations, 0.0, (factor,), scheduler._custom_explore_fn)
        assert explored["training"] == {
            "learning_rate": min(max(start["training"]["learning_rate"] * factor, 1e-4), 1e-2),
            "weight_decay": min(max(start["training"]["weight_decay"] * factor, 0.0), 0.3),
            "warmup_steps": min(max(round(start["training"]["warmup_steps"] * factor), 0), 9),
        }


def test_pbt_perturbs_a_choice_to_one_of_its_values_never_a_multiple(tmp_path):
    """Through Tune's own explore step, each perturbation once with and once without a resample:
    a numeric choice stays among its values (not 16 × 1.2 = 19), and a string choice is perturbed
    without the TypeError that multiplying it raised."""
    import random

    from ray.tune.schedulers.pbt import _explore

    cfg = config(
        tmp_path,
        "scheduler=pbt",
        "+search_space.training.per_device_train_batch_size={sampler:choice,values:[8,16,32]}",
        "+search_space.training.lr_scheduler_type={sampler:choice,values:[linear,cosine]}",
    )
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    start = {"training": {"learning_rate": 1e-3, "per_device_train_batch_size": 16, "lr_scheduler_type": "cosine"}}
    random.seed(0)
    for resample in (0.0, 1.0) * 10:
        explored, _ = _explore(
            start, scheduler._hyperparam_mutations, resample, (1.2, 0.8), scheduler._custom_explore_fn
        )
        assert explored["training"]["per_device_train_batch_size"] in (8, 16, 32)
        assert explored["training"]["lr_scheduler_type"] in ("linear", "cosine")


def test_pb2_takes_bounds_from_the_search_space(tmp_path):
    cfg = config(tmp_path, "scheduler=pb2", LOGUNIFORM_LR)
    scheduler = build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))
    assert scheduler._hyperparam_bounds == {"training": {"learning_rate": [1e-4, 1e-2]}}


def test_pb2_refuses_a_grid(tmp_path):
    cfg = config(tmp_path, "scheduler=pb2")
    with pytest.raises(
        ConfigError, match=r"search_space\.training\.learning_rate: scheduler=pb2 needs a sampler with low and high"
    ):
        build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))


def sampled_configs(cfg: SweepConfig, n: int = 6) -> list:
    param_space = compile_search_space(cfg.search_space, cfg)
    searcher = build_search_alg(cfg, max_concurrent=n)
    assert searcher.set_search_properties(cfg.metric, cfg.mode, param_space)
    return [searcher.suggest(f"trial_{i}") for i in range(n)]


@pytest.mark.parametrize("name", ["optuna", "hyperopt"])
def test_seeded_searcher_samples_the_same_configs_twice(name, tmp_path):
    overrides = [
        f"search_alg={name}",
        LOGUNIFORM_LR,
        "+search_space.training.warmup_steps={sampler:choice,values:[0,5,10]}",
    ]
    first = sampled_configs(config(tmp_path, *overrides))
    assert first == sampled_configs(config(tmp_path, *overrides))
    assert first != sampled_configs(config(tmp_path, *overrides, "seed=7"))
    assert all(
        1e-4 <= c["training"]["learning_rate"] <= 1e-2 and c["training"]["warmup_steps"] in (0, 5, 10) for c in first
    )


@pytest.mark.parametrize("name", ["optuna", "hyperopt"])
def test_model_based_searchers_are_concurrency_limited_and_refuse_grid_before_ray(name, tmp_path):
    """The grid is refused by the preflight's search rules, before Ray starts and a run directory is
    written, not by `build_search_alg` in the sweep."""
    cfg = config(tmp_path, f"search_alg={name}", LOGUNIFORM_LR)
    check_search(cfg)
    searcher = build_search_alg(cfg, max_concurrent=3)
    assert isinstance(searcher, ConcurrencyLimiter) and searcher.max_concurrent == 3
    with pytest.raises(ConfigError, match=r"^search_space\.training\.learning_rate: \w+ cannot walk a grid; set "):
        check_search(config(tmp_path, f"search_alg={name}"))


@pytest.mark.parametrize("name", ["grid", "random"])
def test_variant_generator_is_seeded_and_capped(name, tmp_path):
    cfg = config(tmp_path, f"search_alg={name}", "num_samples=3", LOGUNIFORM_LR)
    searcher = build_search_alg(cfg, max_concurrent=2)
    assert isinstance(searcher, BasicVariantGenerator) and searcher.max_concurrent == 2


def test_stoppers_combine_with_the_step_budget(tmp_path):
    cfg = config(tmp_path, "stopper=[plateau,max_iterations,experiment_plateau]")
    stopper = build_stopper(cfg)
    assert isinstance(stopper, CombinedStopper)
    kinds = [type(s) for s in stopper._stoppers]
    assert kinds == [StepBudget, TrialPlateauStopper, MaximumIterationStopper, ExperimentPlateauStopper]
    (budget,) = build_stopper(config(tmp_path))._stoppers
    assert budget.max_steps == cfg.training["max_steps"]


def test_the_step_budget_is_each_trials_own_where_its_reports_carry_one():
    budget = StepBudget(60)
    assert budget("t", {"step": 60}) and not budget("t", {"step": 50})
    assert budget("t", {"step": 24, "max_steps": 24}) and not budget("t", {"step": 60, "max_steps": 90})
    epochs = StepBudget(-1)  # training.max_steps=-1: only the reports know
    assert not epochs("t", {"step": 500}) and epochs("t", {"step": 12, "max_steps": 12})


def test_threshold_stopper_follows_the_mode():
    low_loss = ThresholdStopper("eval_loss", 3.0, mode="min")
    assert low_loss("t", {"eval_loss": 2.9}) and not low_loss("t", {"eval_loss": 3.1})
    assert not low_loss("t", {"step": 10})
    budget = ThresholdStopper("step", 40, mode="max")
    assert budget("t", {"step": 40}) and not budget("t", {"step": 30})


def test_threshold_stopper_needs_its_threshold(tmp_path):
    with pytest.raises(ConfigError, match=r"stopper\.threshold\.threshold: has no value \(\?\?\?\); set it"):
        config(tmp_path, "stopper=threshold")
    _, stopper = build_stopper(config(tmp_path, "stopper=threshold", "stopper.threshold.threshold=3.5"))._stoppers
    assert (stopper.metric, stopper.threshold, stopper.mode) == ("eval_loss", 3.5, "min")


def test_early_stopping_callback_needs_matching_direction(tmp_path):
    from hfsweep.driver.preflight import preflight

    cfg = config(tmp_path, "callbacks=early_stopping")
    preflight(plain(cfg))
    assert cfg.training["metric_for_best_model"] == "eval_loss"
    cfg = config(tmp_path, "callbacks=early_stopping", "mode=max")
    with pytest.raises(ConfigError, match=r"training\.greater_is_better: must be true when mode=max"):
        preflight(plain(cfg))


def test_scheduler_settings_ray_rejects_are_one_line_config_errors(tmp_path):
    cfg = config(tmp_path, "training.max_steps=10")  # asha's grace_period is 20
    with pytest.raises(
        ConfigError, match=r"^scheduler: ASHAScheduler rejects these settings: grace_period must be <= max_t!$"
    ):
        build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))


def test_a_setting_the_chosen_scheduler_does_not_take_names_the_key_to_drop(tmp_path):
    cfg = config(tmp_path, "scheduler=fifo", "+scheduler.grace_period=300")  # as a preset tuned for ASHA leaves it
    with pytest.raises(
        ConfigError,
        match=(
            r"^scheduler\.grace_period: FIFOScheduler takes no 'grace_period'; drop it with ~scheduler\.grace_period "
            r"\(or scheduler\.grace_period=null\)$"
        ),
    ):
        build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))


@pytest.mark.parametrize("scheduler", ["pbt", "pb2"])
def test_population_training_refuses_a_plateau_schedule_even_a_searched_one(tmp_path, scheduler):
    searched = "+search_space.training.lr_scheduler_type={sampler:choice,values:[linear,reduce_lr_on_plateau]}"
    from hfsweep.driver.preflight import preflight

    cfg = config(tmp_path, f"scheduler={scheduler}", searched)
    with pytest.raises(
        ConfigError,
        match=(
            r"^training\.lr_scheduler_type: under (PopulationBasedTraining|PB2), reduce_lr_on_plateau cannot carry an "
            r"exploited trial's own learning rate over the donor's reductions; use another type \(e\.g\. linear\), or "
            r"scheduler=asha\.$"
        ),
    ):
        preflight(plain(cfg))


@pytest.mark.parametrize("name", sorted(set(SCHEDULERS) - {"fifo"}))
def test_every_schedulers_records_come_back_onto_the_trials_a_resume_restores(name, tmp_path):
    """`SchedulerRecords` saves what every scheduler records of a result and puts it back on
    resume, where Tune builds new Trial objects with the same ids (whether ASHA and PBT then
    decide with it: test_compat.py; FIFO keeps no records and has no such callback)."""
    from ray.tune.experiment import Trial

    cfg = config(tmp_path, f"scheduler={name}", LOGUNIFORM_LR)
    param_space = compile_search_space(cfg.search_space, cfg)

    def running(trials):
        """A scheduler that Tune gave `trials`; what a scheduler asks of Tune, as Tune answers."""
        scheduler = build_scheduler(cfg, param_space)
        scheduler.set_search_properties(cfg.metric, cfg.mode)
        searcher = SimpleNamespace(on_pause=lambda trial_id: None, on_unpause=lambda trial_id: None)  # BOHB's
        tune = SimpleNamespace(
            search_alg=SimpleNamespace(searcher=searcher), get_trials=lambda: trials, get_live_trials=lambda: trials
        )
        for trial in trials:
            scheduler.on_trial_add(tune, trial)
            trial.status = Trial.RUNNING
        return scheduler, tune

    class TrialsAsIds(cloudpickle.CloudPickler):
        def persistent_id(self, obj):
            return obj.trial_id if isinstance(obj, Trial) else None

    def records(scheduler) -> bytes:
        """Equal records pickle alike, however their objects are shared (`fast`: no memo); a
        defaultdict as its items (its factory is code, and MedianStoppingRule's holds the rule)."""
        buffer = io.BytesIO()
        pickler = TrialsAsIds(buffer)
        pickler.fast = True
        kept = {name: value for name, value in vars(scheduler).items() if not callable(value)}
        pickler.dump({name: dict(value) if isinstance(value, dict) else value for name, value in kept.items()})
        return buffer.getvalue()

    def trials():
        return [Trial("__fake", stub=True, trial_id=f"t{i}", config={}) for i in range(2)]

    first, resumed = trials(), trials()
    before, tune = running(first)
    before.on_trial_result(tune, first[0], {"step": 20, "epoch": 1, "training_iteration": 2, cfg.metric: 1.0})
    restored, _ = running(resumed)
    assert records(restored) != records(before), "the result left no record to restore"
    callback = SchedulerRecords(restored)
    callback.set_state(SchedulerRecords(before).get_state())
    callback.on_step_begin(0, resumed)
    assert records(restored) == records(before)


def test_fifo_keeps_no_records_to_restore(tmp_path):
    cfg = config(tmp_path, "scheduler=fifo")
    assert build_scheduler_records(build_scheduler(cfg, compile_search_space(cfg.search_space, cfg))) is None
