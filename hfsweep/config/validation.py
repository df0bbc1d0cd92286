"""The checks of a resolved config that need nothing but the config: values that make sense
together, each failing in one line that names the key and the fix. The schema
(`hfsweep.config.schema`) already refuses misspelt typed keys and wrong types at composition.
The owners above check the rest (`hfsweep.driver.preflight` calls every check once): the Task its
family's data and metrics, each loop its settings, `hfsweep.models` the adapter,
`hfsweep.config.resources` the hardware, `hfsweep.driver.search.search_rules` what schedulers and
searchers need together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import check_importable, training_argument_names, unknown_key_error
from hfsweep.config.objectives import objectives_of

PLATEAU = "reduce_lr_on_plateau"  # the one LR schedule that is not a function of the step
POSITIVE_TRAINING_KEYS = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps")


def check_config(cfg: dict, generates: bool = False) -> None:
    """Check what the config alone decides; `generates`: the sweep's Task is scored on generated
    text (its training.* keys are Seq2SeqTrainingArguments')."""
    _validate_objectives(cfg["metric"], cfg["mode"])
    if cfg["num_samples"] < 1:
        raise ConfigError(
            f"num_samples: must be at least 1 (trials per grid point), not {cfg['num_samples']}; e.g. num_samples=1."
        )
    _validate_training(cfg["training"])
    if cfg["training"].get("load_best_model_at_end"):
        _validate_best_model_metric(cfg)
    _validate_data(cfg["data"])
    if cfg["data"]["streaming"] and not cfg["model"]["tokenizer"]["pretrained"]:
        raise ConfigError(
            "data.streaming: a tokenizer is trained on the whole train split, which a stream does not hold; "
            "set model.tokenizer.pretrained (a hub name or a local directory)."
        )
    _validate_extra_validation(cfg["extra_validation"], cfg["data"])
    keep = cfg["checkpoints"]["keep_per_trial"]
    if keep is not None and keep < 1:
        raise ConfigError(
            f"checkpoints.keep_per_trial: must be at least 1 (the best checkpoint), not {keep}; "
            f"or null to keep every checkpoint."
        )
    # reads transformers' source
    _validate_training_argument_names(cfg["training"], cfg["strategy"]["training_args"], generates)
    _validate_targets(cfg)  # imports every `_target_`'s module


def _validate_targets(node, path: str = "") -> None:
    """Every `_target_` imports here, on the driver: a typo or a module the workers cannot import
    would otherwise fail every trial after Ray started."""
    if isinstance(node, dict):
        target = node.get("_target_")
        if isinstance(target, str):
            try:
                check_importable(target)
            except ImportError as err:
                raise ConfigError(
                    f"{path}._target_: cannot import '{target}' ({err}); "
                    f"fix the name, or make its module importable: install its package, or run from its folder "
                    f"(workers get it with cluster.runtime_env.working_dir or py_modules)."
                ) from err
        for key, value in node.items():
            _validate_targets(value, f"{path}.{key}" if path else key)


def _validate_training_argument_names(training: dict, strategy_args: dict, seq2seq: bool = False) -> None:
    names = training_argument_names(seq2seq)
    for section, args in (("training", training), ("strategy.training_args", strategy_args)):
        for key in args:
            if key not in names:
                raise unknown_key_error(f"{section}.{key}", names, "a transformers.TrainingArguments field")


def _validate_training(training: dict) -> None:
    for key in ("output_dir", "use_cpu", "report_to"):
        if key in training:
            raise ConfigError(f"training.{key}: hfsweep sets this itself; remove it from the config.")
    for key in POSITIVE_TRAINING_KEYS:
        if key in training and (not isinstance(training[key], int) or training[key] < 1):
            raise ConfigError(
                f"training.{key}: must be a positive integer, not {training[key]}; e.g. training.{key}=8."
            )
    if training.get("bf16") and training.get("fp16"):  # the Trainer would refuse it in every trial
        raise ConfigError(
            "training.fp16: training.bf16=true is set too, and a trial computes in one precision; "
            "set one of them false, e.g. training.fp16=false."
        )
    rate = training.get("learning_rate")
    if rate is not None and (not isinstance(rate, (int, float)) or rate <= 0):  # the defaults trial runs it
        raise ConfigError(f"training.learning_rate: must be above 0, not {rate}; e.g. training.learning_rate=5e-5.")
    steps, epochs = training.get("max_steps"), training.get("num_train_epochs", 3.0)
    if not isinstance(steps, int) or steps <= 0 and steps != -1:
        raise ConfigError(
            "training.max_steps: must be a positive integer (a Ray Data training set is an "
            "iterable, so the Trainer needs max_steps), e.g. training.max_steps=100; or -1, for each "
            "trial's steps to follow from training.num_train_epochs and its batch size."
        )
    if steps == -1 and (not isinstance(epochs, (int, float)) or epochs <= 0):
        raise ConfigError(
            f"training.num_train_epochs: must be above 0 under training.max_steps=-1, not {epochs}; "
            f"e.g. training.num_train_epochs=3."
        )
    if training.get("eval_strategy", "no") != "steps" or training.get("save_strategy") != "steps":
        raise ConfigError(
            "training.eval_strategy and training.save_strategy: both must be 'steps', so every "
            "checkpoint reaches Tune with a fresh eval metric."
        )
    if training.get("save_total_limit") is not None:
        raise ConfigError(
            f"training.save_total_limit: {training['save_total_limit']}, but the Trainer would delete checkpoints "
            f"that Tune still points to (PBT, a retry and resume read them); drop it, and keep fewer with "
            f"checkpoints.keep_per_trial=K."
        )
    eval_steps, save_steps = training.get("eval_steps"), training.get("save_steps")
    if not eval_steps or not save_steps or save_steps % eval_steps:
        raise ConfigError(
            f"training.save_steps ({save_steps}): must be a multiple of training.eval_steps "
            f"({eval_steps}), or schedulers act on stale metrics; e.g. training.save_steps={eval_steps}."
        )


def _validate_objectives(metric, mode) -> None:
    """One metric and one mode, or as many modes as metrics (several objectives)."""
    modes = mode if isinstance(mode, list) else [mode]
    for m in modes:
        if m not in ("min", "max"):
            raise ConfigError(f"mode: must be 'min' or 'max', not '{m}'.")
    if isinstance(metric, str) != isinstance(mode, str) or not isinstance(metric, str) and len(metric) != len(mode):
        metrics = [metric] if isinstance(metric, str) else metric
        raise ConfigError(
            f"mode: {as_override(mode)} does not pair with metric={as_override(metric)}; give one mode per metric, "
            f"e.g. mode={as_override(['min'] * len(metrics)) if len(metrics) > 1 else 'min'}."
        )
    if not isinstance(metric, str) and (len(metric) < 2 or len(set(metric)) != len(metric)):
        raise ConfigError(
            f"metric: a list names two or more different metrics, not {as_override(metric)}; "
            f"for one, write metric=NAME."
        )


def as_override(value) -> str:
    """A value as the command line writes it: [a,b] for a list."""
    return f"[{','.join(map(str, value))}]" if isinstance(value, list) else str(value)


def _validate_best_model_metric(cfg: dict) -> None:
    """The Trainer keeps one best model by one metric, in the sweep's direction for that metric."""
    metric = cfg["training"].get("metric_for_best_model")
    if isinstance(metric, list):
        raise ConfigError(
            f"training.metric_for_best_model: the Trainer keeps its best model by one metric, "
            f"not {as_override(metric)}; set training.metric_for_best_model={metric[0]}."
        )
    objectives = objectives_of(cfg["metric"], cfg["mode"])
    mode = dict(objectives).get(metric, objectives[0][1])
    if cfg["training"].get("greater_is_better", mode == "max") != (mode == "max"):
        raise ConfigError(
            f"training.greater_is_better: must be {str(mode == 'max').lower()} when mode={mode}, "
            f"so the Trainer's best checkpoint is the sweep's best."
        )


def _validate_extra_validation(extra: dict, data: dict) -> None:
    for name, changes in extra.items():
        unknown = [key for key in changes or {} if key not in data] if isinstance(changes, dict) else [changes]
        if not changes or unknown:
            raise ConfigError(
                f"extra_validation.{name}: {f'{unknown[0]!r} is not a data.* key' if unknown else 'is empty'}; "
                f"give the data.* keys that make this validation set, e.g. "
                f"extra_validation.{name}.validation_split=validation_mismatched."
            )


def _validate_data(data: dict) -> None:
    if sorted(data["datasets_to_split"]) not in (["train"], ["train", "validation"]):
        raise ConfigError(
            f"data.datasets_to_split: {list(data['datasets_to_split'])} is neither [train] (every worker evaluates the "
            "whole validation split) nor [train,validation] (each evaluates its Ray Data shard); use one of them."
        )
    for key, example in (
        ("chunk_rows", 10000),
        ("num_proc", 4),
        ("max_train_tokens", 10_000_000),
        ("shuffle_buffer_rows", 1024),
    ):
        if data[key] is not None and data[key] < 1:
            what = (
                "or null (all the driver's cores)"
                if key == "num_proc"
                else "or null (no budget)"
                if key == "max_train_tokens"
                else ""
            )
            raise ConfigError(
                f"data.{key}: must be a positive integer, not {data[key]}; "
                f"e.g. data.{key}={example}{' ' + what if what else ''}."
            )
    _validate_held_out(data)
    if data["source"] == "hub" and not data["name"]:
        raise ConfigError("data.name: data.source=hub needs a dataset name, e.g. data.name=wikitext.")
    if data["path"] and data["source"] != "local":
        raise ConfigError(
            f"data.path: is set, but data.source is '{data['source']}', which does not read it; "
            f"add data.source=local, or drop data.path."
        )
    if data["source"] == "local":
        if not data["path"]:
            raise ConfigError("data.path: data.source=local needs a folder or file, e.g. data.path=/data/wikitext.")
        if not os.path.exists(data["path"]):
            raise ConfigError(
                f"data.path: '{data['path']}' does not exist; point it at a folder of train.*/validation.* files."
            )


def _validate_held_out(data: dict) -> None:
    """The test split is one nothing else reads: not the training split, nor the validation split
    (unless validation is carved from train); and the carve takes a share of train."""
    share, test = data["validation_split_percentage"], data["test_split"]
    if share is not None and not 0 < share < 100:
        raise ConfigError(
            f"data.validation_split_percentage: must lie between 0 and 100 (the share of the train split that "
            f"validates), not {share:g}; e.g. data.validation_split_percentage=10, or null."
        )
    if share is not None and data["streaming"]:
        raise ConfigError(
            "data.validation_split_percentage: a stream cannot be split before it is read; "
            "drop data.streaming, or name a validation split (data.validation_split)."
        )
    if test == "train":
        raise ConfigError(
            "data.test_split: 'train' is the split trials train on; name a split they do not see, e.g. "
            "data.test_split=validation data.validation_split_percentage=10."
        )
    if test is not None and share is None and test == data["validation_split"]:
        raise ConfigError(
            f"data.test_split: '{test}' is also the validation split the search selects on; carve the validation "
            f"set from train with data.validation_split_percentage=10, or name another split."
        )


def lr_scheduler_types(training: Mapping, search_space: Mapping) -> set[str]:
    """Every LR schedule the sweep's trials may use: the configured one and any searched ones."""
    searched = search_space.get("training", {}).get("lr_scheduler_type", {})
    return {training.get("lr_scheduler_type", "linear"), *searched.get("values", ())}
