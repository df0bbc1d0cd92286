"""One test per private API in hfsweep/compat.py: each fails when the installed Ray, torch,
datasets, Hydra or W&B no longer has what hfsweep relies on (hfsweep itself would only degrade). Those that
need a running Ray are in tests/e2e/test_compat_e2e.py."""

from __future__ import annotations

import logging

import datasets
import pytest
import torch
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

from hfsweep import compat


def test_train_v2_report_log_module_is_where_compat_looks():
    assert compat.quiet_train_report_log(), "ray.train.v2._internal.execution.context moved"


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
