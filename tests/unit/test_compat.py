"""One test per private API in hfsweep/compat.py: each fails when the installed Ray, torch,
datasets, Hydra or W&B no longer has what hfsweep relies on (hfsweep itself would only degrade). Those that
need a running Ray are in tests/e2e/test_compat_e2e.py."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from types import SimpleNamespace

import datasets
import pytest
import torch
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

from hfsweep import compat


def test_train_v2_report_log_module_is_where_compat_looks():
    assert compat.quiet_train_report_log(), "ray.train.v2._internal.execution.context moved"


def test_tunes_csv_logger_still_sets_up_trials():
    assert compat.csv_logger_sets_up_trials(CSVLoggerCallback), f"CSVLoggerCallback.{compat.CSV_SETUP_TRIAL} is gone"


def test_rays_wandb_logging_actor_class_exists():
    assert compat.wandb_logging_actor_class() is not None, "ray.air.integrations.wandb._WandbLoggingActor is gone"


@pytest.mark.parametrize("logger_class", [CSVLoggerCallback, JsonLoggerCallback])
def test_tunes_loggers_still_restore_from_remote(logger_class):
    assert compat.logger_restores_from_remote(logger_class), (
        f"{logger_class.__name__}.{compat.RESTORE_FROM_REMOTE} is gone"
    )


def test_tunes_tensorboard_logger_still_writes_hparams_through_the_method_hfsweep_overrides():
    assert compat.tbx_logs_hparams(TBXLoggerCallback), f"TBXLoggerCallback.{compat.TBX_LOG_HPARAMS} is gone"


def test_tunes_trial_tables_leave_out_the_keys_hfsweep_hides():
    from ray.tune.experimental.output import _get_dict_as_table_data

    assert compat.hide_from_result_tables(["hfsweep_hidden"]), "ray.tune.experimental.output.BLACKLISTED_KEYS is gone"
    from ray.tune.experimental.output import BLACKLISTED_KEYS

    rows = _get_dict_as_table_data({"hfsweep_hidden": 1, "shown": 2}, exclude=BLACKLISTED_KEYS)
    assert [row[0] for row in rows] == ["shown"]


def test_hydras_basic_sweeper_splits_a_multirun_as_hfsweep_checks_it():
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper
    from omegaconf import OmegaConf

    assert compat.BASIC_SWEEPER in {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Sweeper)}
    master = OmegaConf.create(
        {
            "hydra": {
                "sweeper": {"_target_": compat.BASIC_SWEEPER, "params": {"seed": "1,2"}},
                "overrides": {"task": ["a=x,y"]},
            }
        }
    )
    assert compat.basic_sweep_jobs(master) == [
        ["seed=1", "a=x"],
        ["seed=1", "a=y"],
        ["seed=2", "a=x"],
        ["seed=2", "a=y"],
    ]
    master.hydra.sweeper.params = None  # hfsweep's config sets none
    master.hydra.overrides.task = ["seed=1,2", "name=${hydra:job.num}"]  # as typed: resolved in each job
    jobs = compat.basic_sweep_jobs(master)  # Hydra's own escaping of `${`, which its launcher undoes
    assert [job[0] for job in jobs] == ["seed=1", "seed=2"] and jobs[0][1] == jobs[1][1] != "name=2"
    master.hydra.sweeper._target_ = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert compat.basic_sweep_jobs(master) is None


def test_transformers_auto_classes_tell_which_configs_they_build():
    from transformers import AutoModelForMaskedLM, BertConfig, GPT2Config, PretrainedConfig

    assert compat.auto_class_builds(AutoModelForMaskedLM, BertConfig) is True, "_model_mapping has moved"
    assert compat.auto_class_builds(AutoModelForMaskedLM, GPT2Config) is False
    assert compat.auto_class_builds(PretrainedConfig, GPT2Config) is None  # no Auto class: nothing refused


def test_transformers_model_classes_tell_which_attention_kernels_they_have():
    from transformers import AutoModelForMaskedLM, BertConfig, MPNetConfig

    assert compat.supports_attention(AutoModelForMaskedLM, BertConfig, "sdpa") is True, "_supports_sdpa has moved"
    assert compat.supports_attention(AutoModelForMaskedLM, BertConfig, "flash_attention_2") is True, (
        "_supports_flash_attn has moved"
    )
    assert compat.supports_attention(AutoModelForMaskedLM, MPNetConfig, "sdpa") is False
    assert compat.supports_attention(AutoModelForMaskedLM, MPNetConfig, "eager") is True


def test_lambda_lr_exposes_its_factors_and_last_lr():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5)
    assert compat.lr_factors(schedule) == [0.5], "LambdaLR.lr_lambdas is gone"
    assert hasattr(schedule, "_last_lr"), "LRScheduler._last_lr is gone"
    compat.set_last_lr(schedule, [0.25])
    assert schedule.get_last_lr() == [0.25]


def test_datasets_fingerprint_follows_the_content():
    dataset = datasets.Dataset.from_dict({"text": ["a", "b"]})
    assert isinstance(getattr(dataset, "_fingerprint", None), str), "datasets.Dataset._fingerprint is gone"
    changed = dataset.map(lambda row: {"text": row["text"] + "!"})
    assert compat.dataset_fingerprint(changed) != compat.dataset_fingerprint(dataset)


def test_the_auth_notice_is_silenced_on_the_logger_ray_logs_it_under(caplog):
    from ray._private.authentication import authentication_token_setup as setup

    assert setup.logger.name == compat.RAY_AUTH_NOTICE_LOGGER, "Ray's token-auth notice moved to another logger"
    previous = setup.logger.level
    try:
        compat.quiet_ray_auth_notice()
        with caplog.at_level(logging.INFO):
            setup._warn_token_auth_enabled()  # the notice `ray.init` logs
        assert not caplog.records, "the token-auth notice is still logged after quiet_ray_auth_notice"
    finally:
        setup.logger.setLevel(previous)


def test_prepare_trainer_hands_a_ray_data_iterables_batches_to_the_trainer_unchanged(tmp_path):
    from ray.train.huggingface.transformers import prepare_trainer
    from transformers import Trainer, TrainingArguments

    batches = [
        {"input_ids": torch.tensor([[1, 2, 3]])},
        {"input_ids": torch.tensor([[4, 5]])},
    ]  # two lengths: not re-batched
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=2)
    trainer = prepare_trainer(
        Trainer(model=torch.nn.Linear(1, 1), args=args, train_dataset=compat.ray_data_iterable(lambda: iter(batches)))
    )
    assert [batch["input_ids"].tolist() for batch in trainer.get_train_dataloader()] == [[[1, 2, 3]], [[4, 5]]], (
        "prepare_trainer no longer recognises ray.data.iterator._IterableFromIterator"
    )


def stub_trials(*ids: str) -> list:
    """Tune's own Trial objects; a resume builds new ones with the same ids."""
    from ray.tune.experiment import Trial

    return [Trial("__fake", stub=True, trial_id=trial_id) for trial_id in ids]


def test_asha_judges_a_resumed_trial_against_the_rung_results_from_before_the_resume():
    from ray.tune.schedulers import ASHAScheduler

    def asha(trials):
        scheduler = ASHAScheduler(metric="eval_loss", mode="min", time_attr="step", max_t=30, grace_period=20)
        for trial in trials:
            scheduler.on_trial_add(None, trial)
        return scheduler

    first = stub_trials("good", "bad")
    before = asha(first)
    assert before.on_trial_result(None, first[0], {"step": 20, "eval_loss": 1.0}) == "CONTINUE"
    records = compat.scheduler_records(before)
    resumed, fresh = stub_trials("good", "bad"), stub_trials("good", "bad")
    restored = asha(resumed)
    compat.restore_scheduler_records(restored, records, resumed)
    worse = {"step": 20, "eval_loss": 2.0}
    assert restored.on_trial_result(None, resumed[1], worse) == "STOP", "the rung's earlier result was lost"
    assert asha(fresh).on_trial_result(None, fresh[1], worse) == "CONTINUE", "Tune's own restore forgets the rung"


def test_pbt_keeps_its_populations_scores_by_trial_and_drops_a_checkpoint_still_being_written():
    """PBT keys its records by Tune's Trial objects, which a resume builds anew."""
    from ray.train._internal.session import _FutureTrainingResult
    from ray.tune.schedulers import PopulationBasedTraining

    def pbt(trials):
        scheduler = PopulationBasedTraining(
            metric="eval_loss", mode="min", time_attr="step", hyperparam_mutations={"lr": [1e-3, 1e-4]}
        )
        for trial in trials:
            scheduler.on_trial_add(SimpleNamespace(search_alg=None), trial)
        return scheduler

    first = stub_trials("a", "b")
    before = pbt(first)
    before._trial_state[first[0]].last_score, before._trial_state[first[0]].last_perturbation_time = -1.0, 20
    before._trial_state[first[1]].last_checkpoint = _FutureTrainingResult(future="a save under way")
    resumed = stub_trials("a", "b")
    restored = pbt(resumed)
    compat.restore_scheduler_records(restored, compat.scheduler_records(before), resumed)
    assert set(restored._trial_state) == set(resumed)
    kept = restored._trial_state[resumed[0]]
    assert (kept.last_score, kept.last_perturbation_time) == (-1.0, 20)
    assert restored._trial_state[resumed[1]].last_checkpoint is None


def test_median_stopping_rules_records_are_its_results_not_a_copy_of_the_rule():
    """MedianStoppingRule's results are a defaultdict whose factory closes over the rule: saved
    as a dict, the records hold its results alone, and restored they keep the live factory."""
    from ray.tune.schedulers import MedianStoppingRule

    def rule(trials):
        scheduler = MedianStoppingRule(metric="eval_loss", mode="min", time_attr="step")
        for trial in trials:
            scheduler.on_trial_add(None, trial)
        return scheduler

    first = stub_trials("a")
    before = rule(first)
    before.on_trial_result(None, first[0], {"step": 20, "eval_loss": 1.0})
    records = compat.scheduler_records(before)
    assert b"MedianStoppingRule" not in records, "the records pickle the rule through its defaultdict's factory"
    resumed = stub_trials("a", "b")
    restored = rule(resumed)
    compat.restore_scheduler_records(restored, records, resumed)
    assert [r["eval_loss"] for r in restored._results[resumed[0]]] == [1.0]
    assert restored._results[resumed[1]] == [], "a trial the save did not know gets the factory's empty list"


def test_the_bitsandbytes_cpu_notice_is_silenced_on_its_logger(caplog):
    """peft imports bitsandbytes wherever transformers' Trainer is imported (every worker), and on
    CPU it warns of a 4-bit kernel a CPU sweep never uses. (Its module's logger, where installed.)"""
    if importlib.util.find_spec("bitsandbytes") is not None:
        ops = importlib.import_module("bitsandbytes.backends.cpu.ops")
        assert ops.logger.name == compat.BITSANDBYTES_CPU_LOGGER, "bitsandbytes' CPU notice moved to another logger"
    logger = logging.getLogger(compat.BITSANDBYTES_CPU_LOGGER)
    previous = logger.level
    try:
        compat.quiet_bitsandbytes_cpu_notice()
        caplog.clear()  # the import's own notice
        with caplog.at_level(logging.INFO):
            logger.warning("Failed to load CPU gemm_4bit_forward from kernels-community")
        assert not caplog.records, "the notice is still logged after quiet_bitsandbytes_cpu_notice"
    finally:
        logger.setLevel(previous)


def test_which_heads_drop_the_item_count_is_read_as_their_loss_behaves():
    """`loss_drops_item_count` reads a head's source; each answer must match what its loss does
    when handed num_items_in_batch (the causal LM divides by it, the others ignore it)."""
    import transformers as tf

    bert = tf.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    gpt2 = tf.GPT2Config(vocab_size=50, n_embd=8, n_layer=1, n_head=2, pad_token_id=0, bos_token_id=1, eos_token_id=1)
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (2, 6))
    heads = [
        (tf.BertForSequenceClassification, bert, {"labels": torch.tensor([0, 1])}),
        (tf.BertForTokenClassification, bert, {"labels": torch.randint(0, 2, (2, 6))}),
        (
            tf.BertForQuestionAnswering,
            bert,
            {"start_positions": torch.tensor([1, 2]), "end_positions": torch.tensor([3, 4])},
        ),
        (tf.GPT2LMHeadModel, gpt2, {"labels": ids}),
    ]
    answers = {}
    for head, config, labels in heads:
        model = head(config).eval()
        plain = model(input_ids=ids, **labels).loss
        counted = model(input_ids=ids, num_items_in_batch=torch.tensor(1000), **labels).loss
        assert compat.loss_drops_item_count(model) == torch.equal(plain, counted), head.__name__
        answers[head.__name__] = compat.loss_drops_item_count(model)
    assert answers == {
        "BertForSequenceClassification": True,
        "BertForTokenClassification": True,
        "BertForQuestionAnswering": True,
        "GPT2LMHeadModel": False,
    }


def test_tunes_callback_states_file_is_read_back_as_tune_saved_it(tmp_path):
    """`saved_callback_states` reads what Tune's own `CallbackList.save_to_dir` wrote: the newest
    file's states, a stateless callback's left out."""
    from ray.tune import Callback
    from ray.tune.callback import CallbackList

    class Stateful(Callback):
        def __init__(self, state):
            self.state = state

        def get_state(self):
            return self.state

    for session, spent in (("2026-12-07_10-00-00", 1.0), ("2026-12-07_11-00-00", 2.0)):
        CallbackList([Callback(), Stateful({"spent_s": spent})]).save_to_dir(str(tmp_path), session_str=session)
    assert compat.saved_callback_states(str(tmp_path)) == [{"spent_s": 2.0}]
    assert compat.saved_callback_states(str(tmp_path / "none")) == []


def test_tunes_generators_tag_each_trial_with_the_count_it_was_created_at():
    """A grid's generator and a searcher's (Optuna here) number the trials they create in their
    `experiment_tag`s; `in_creation_order` puts a restored experiment's trials back in that order."""
    from ray import tune
    from ray.tune.experiment import Experiment
    from ray.tune.search import BasicVariantGenerator, SearchGenerator
    from ray.tune.search.optuna import OptunaSearch

    tune.register_trainable("noop", lambda config: None)
    grid = BasicVariantGenerator()
    grid.add_configurations([Experiment("grid", "noop", config={"x": tune.grid_search([1, 2, 3])})])
    searched = SearchGenerator(OptunaSearch(metric="m", mode="min", space={"x": tune.uniform(0, 1)}))
    searched.add_configurations([Experiment("searched", "noop", num_samples=3)])
    for generator in (grid, searched):
        created = [generator.next_trial() for _ in range(3)]
        assert compat.in_creation_order(created[::-1]) == created, [trial.experiment_tag for trial in created]
