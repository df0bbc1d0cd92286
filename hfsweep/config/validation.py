"""Every check a resolved config gets before Ray starts, each failing in one line that names the
key and the fix.

The schema (`hfsweep.config.schema`) already refuses misspelt typed keys and wrong types at
composition; `validate` checks what types cannot: that values make sense together.
"""

from __future__ import annotations

import os
from typing import Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object, unknown_key_error
from hfsweep.config.objectives import first_objective, is_multi_objective, objectives
from hfsweep.config.resources import DATA_CPUS, resource_names, trial_resources, trial_shape
from hfsweep.tasks import get_task, metrics
from hfsweep.tasks.base import Task

LOOPS = ("hf_trainer", "accelerate")
# The training.* keys the Accelerate loop honours, and those it may ignore (the Trainer's cadence
# and logging settings, which the validation below also needs).
ACCELERATE_LOOP_KEYS = {
    "learning_rate", "weight_decay", "lr_scheduler_type", "warmup_steps", "max_steps", "seed",
    "per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps", "max_grad_norm",
    "eval_strategy", "eval_steps", "save_strategy", "save_steps", "bf16", "fp16", "activation_checkpointing",
    "logging_steps", "disable_tqdm", "average_tokens_across_devices", "train_sampling_strategy",
}
DATA_SOURCES = ("pydoc", "hub", "local")
SAMPLING_STRATEGIES = ("random", "sequential", "group_by_length")  # training.train_sampling_strategy on a streamed shard
PREPARE_ON = ("driver", "cluster")  # where the train split is tokenized: the driver's processes, or Ray tasks on every node
TOKENIZER_KINDS = ("byte_level_bpe", "roberta_bpe", "unigram", "wordpiece")  # hfsweep.data.tokenizers.TOKENIZER_TRAINERS, without importing it
# every trial's reports (time_total_s: Tune's, the trial's running time), plus eval_<eval_metrics>
REPORTED_METRICS = ("eval_loss", "eval_perplexity", "loss", "time_total_s")
PLATEAU = "reduce_lr_on_plateau"  # the one LR schedule that is not a function of the step
GPU_ONLY_TRAINING_ARGS = ("fsdp", "deepspeed")  # on CPU transformers ignores fsdp (plain DDP) and DeepSpeed needs CUDA
PEFT_METHODS = ("none", "lora", "ia3")
# peft.* keys that change which tensors the adapter has: a PBT exploit could not load the donor's.
PEFT_SHAPE_KEYS = ("method", "r", "target_modules", "feedforward_modules", "modules_to_save", "bias", "use_dora", "load_in_4bit",
                   "load_in_8bit")
POSITIVE_TRAINING_KEYS = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps")


def _training_argument_names(seq2seq: bool = False) -> set[str]:
    """TrainingArguments' fields (and Seq2SeqTrainingArguments' own, for a task that generates),
    read from transformers' source without importing it (importing takes torch: seconds, where a
    refusal should take one); imported if the source's layout is not the one expected. A test
    checks the two lists agree."""
    names = _dataclass_fields_in_source("training_args.py", "TrainingArguments")
    if seq2seq and names is not None:
        own = _dataclass_fields_in_source("training_args_seq2seq.py", "Seq2SeqTrainingArguments")
        names = None if own is None else names | own
    return names if names is not None and len(names) > 50 else _imported_training_argument_names(seq2seq)


def _dataclass_fields_in_source(file_name: str, class_name: str) -> Optional[set[str]]:
    import ast
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    with open(os.path.join(os.path.dirname(spec.origin), file_name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return None


def _imported_training_argument_names(seq2seq: bool = False) -> set[str]:
    import dataclasses

    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    return {f.name for f in dataclasses.fields(Seq2SeqTrainingArguments if seq2seq else TrainingArguments) if f.init}


def validate(cfg: dict) -> None:
    """Check a resolved config; raise ConfigError naming the first bad key."""
    _validate_objectives(cfg["metric"], cfg["mode"])
    if cfg["num_samples"] < 1:
        raise ConfigError(f"num_samples: must be at least 1 (trials per grid point), not {cfg['num_samples']}; e.g. num_samples=1.")
    get_task(cfg["model"]["task"])  # refuses an unknown task
    if cfg["model"]["tokenizer"]["kind"] not in TOKENIZER_KINDS:
        raise ConfigError(
            f"model.tokenizer.kind: cannot train '{cfg['model']['tokenizer']['kind']}'; use one of {', '.join(TOKENIZER_KINDS)}."
        )
    _validate_training(cfg["training"])
    _validate_packed_gpus(cfg["strategy"], cfg["cluster"])
    _validate_strategy(cfg["strategy"], cfg["cluster"])
    _validate_precision(cfg["training"], cfg["cluster"])
    for metric, _ in objectives(cfg):
        _validate_metrics(cfg, metric)
    if cfg["training"].get("load_best_model_at_end"):
        _validate_best_model_metric(cfg)
    _validate_data(cfg["data"], cfg["model"])
    _validate_extra_validation(cfg["extra_validation"], cfg["data"])
    _validate_cluster(cfg["cluster"])
    keep = cfg["checkpoints"]["keep_per_trial"]
    if keep is not None and keep < 1:
        raise ConfigError(
            f"checkpoints.keep_per_trial: must be at least 1 (the best checkpoint), not {keep}; "
            f"or null to keep every checkpoint."
        )
    _validate_loop(cfg)
    _validate_peft(cfg)
    task = get_task(cfg["model"]["task"])
    _validate_training_argument_names(cfg["training"], cfg["strategy"]["training_args"], task.generates)  # imports transformers
    _validate_targets(cfg)  # imports every `_target_`'s module
    _validate_sft_trainer(cfg)
    _validate_one_metric_users(cfg)
    _validate_bohb(cfg)
    _validate_budget(cfg["budget"])
    if task.generates:
        _validate_generation(cfg)


def _validate_targets(node, path: str = "") -> None:
    """Every `_target_` imports here, on the driver: a typo or a module the workers cannot import
    would otherwise fail every trial after Ray started."""
    if isinstance(node, dict):
        target = node.get("_target_")
        if isinstance(target, str):
            try:
                import_object(target)
            except ImportError as err:
                raise ConfigError(
                    f"{path}._target_: cannot import '{target}' ({err}); "
                    f"fix the name, or make its module importable: install its package, or run from its folder "
                    f"(workers get it with cluster.runtime_env.working_dir or py_modules)."
                ) from err
        for key, value in node.items():
            _validate_targets(value, f"{path}.{key}" if path else key)


def _validate_sft_trainer(cfg: dict) -> None:
    """TRL's SFTTrainer trains on the rows model.task=sft prepares, through the subclass that takes
    a worker's Ray Data shard (TRL's own takes only a `datasets` Dataset)."""
    import sys

    target = cfg["trainer"]["_target_"]
    sft_module = sys.modules.get("trl.trainer.sft_trainer")  # imported by `_validate_targets` if the Trainer subclasses it
    trainer = import_object(target)
    if sft_module is None or not (isinstance(trainer, type) and issubclass(trainer, sft_module.SFTTrainer)):
        return
    task = get_task(cfg["model"]["task"]).name
    if task != "sft":
        raise ConfigError(f"trainer._target_: {target} trains on chat or instruction rows, which model.task={task} does not make; set model.task=sft, or trainer=default.")
    from hfsweep.loops.sft_trainer import RayDataSFTTrainer

    if not issubclass(trainer, RayDataSFTTrainer):
        raise ConfigError(f"trainer._target_: {target} takes only a `datasets` Dataset, not a worker's Ray Data shard; use trainer=sft (or a subclass of its class).")


def _validate_generation(cfg: dict) -> None:
    """A task scored on generated text needs a generating Trainer, and a sweep metric that every
    report carries."""
    from transformers import Seq2SeqTrainer

    from hfsweep.loops.trainers import GenerationEvalTrainer

    if cfg["loop"]["name"] != "hf_trainer":
        raise ConfigError(f"loop={cfg['loop']['name']}: model.task={cfg['model']['task']} is scored on generated text, which the hf_trainer loop does; use loop=hf_trainer.")
    trainer = import_object(cfg["trainer"]["_target_"])
    if cfg["eval_metrics"] and not issubclass(trainer, Seq2SeqTrainer):
        raise ConfigError(
            f"trainer._target_: {cfg['trainer']['_target_']} does not generate, so eval_metrics cannot be scored; "
            f"use trainer._target_=hfsweep.loops.trainers.GenerationEvalTrainer (or a Seq2SeqTrainer)."
        )
    every = cfg["trainer"].get("every_k_evals", 1) if issubclass(trainer, GenerationEvalTrainer) else 1
    missing = [metric for metric, _ in objectives(cfg) if metric not in REPORTED_METRICS]
    if every > 1 and missing:
        raise ConfigError(
            f"trainer.every_k_evals: {every} generates at one evaluation in {every}, so {missing[0]} is missing from the "
            f"reports between; sweep on metric=eval_loss, or set trainer.every_k_evals=1."
        )


def _validate_training_argument_names(training: dict, strategy_args: dict, seq2seq: bool = False) -> None:
    names = _training_argument_names(seq2seq)
    for section, args in (("training", training), ("strategy.training_args", strategy_args)):
        for key in args:
            if key not in names:
                raise unknown_key_error(f"{section}.{key}", names, "transformers.TrainingArguments field")


def _validate_training(training: dict) -> None:
    for key in ("output_dir", "use_cpu", "report_to"):
        if key in training:
            raise ConfigError(f"training.{key}: hfsweep sets this itself; remove it from the config.")
    for key in POSITIVE_TRAINING_KEYS:
        if key in training and (not isinstance(training[key], int) or training[key] < 1):
            raise ConfigError(f"training.{key}: must be a positive integer, not {training[key]}; e.g. training.{key}=8.")
    if not isinstance(training.get("max_steps"), int) or training["max_steps"] <= 0:
        raise ConfigError(
            "training.max_steps: must be a positive integer (a Ray Data training set is an "
            "iterable, so the Trainer needs max_steps), e.g. training.max_steps=100."
        )
    if training.get("eval_strategy", "no") != "steps" or training.get("save_strategy") != "steps":
        raise ConfigError(
            "training.eval_strategy and training.save_strategy: both must be 'steps', so every "
            "checkpoint reaches Tune with a fresh eval metric."
        )
    eval_steps, save_steps = training.get("eval_steps"), training.get("save_steps")
    if not eval_steps or not save_steps or save_steps % eval_steps:
        raise ConfigError(
            f"training.save_steps ({save_steps}): must be a multiple of training.eval_steps "
            f"({eval_steps}), or schedulers act on stale metrics; e.g. training.save_steps={eval_steps}."
        )


def _validate_precision(training: dict, cluster: dict) -> None:
    """bf16 on a local GPU without it (before Ampere) would fail in the first trial; CPUs run
    bf16 and fp16 through autocast."""
    if training.get("bf16") and cluster["use_gpu"] and cluster["address"] is None:
        import torch

        if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
            raise ConfigError(
                f"training.bf16: this GPU ({torch.cuda.get_device_name(0)}) has no bf16; use training.fp16=true instead."
            )


def _validate_strategy(strategy: dict, cluster: dict) -> None:
    """Refuse a strategy the hardware cannot run: on CPU transformers silently trains FSDP as
    plain DDP, and DeepSpeed needs its package and CUDA."""
    import importlib.util

    args = strategy["training_args"]
    if args.get("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            f"strategy={strategy['name']}: DeepSpeed is not installed; pip install 'hfsweep[deepspeed]' "
            f"(on a machine with CUDA GPUs), or use strategy=ddp."
        )
    if any(args.get(key) for key in GPU_ONLY_TRAINING_ARGS) and not cluster["use_gpu"]:
        raise ConfigError(
            f"strategy={strategy['name']}: needs GPUs; set cluster.use_gpu=true on a GPU machine, or use strategy=ddp on CPUs."
        )


def _validate_packed_gpus(strategy: dict, cluster: dict) -> None:
    """Trials packed onto shared GPUs (`cluster.resources_per_worker.GPU` below 1) each train in
    one process: NCCL refuses two ranks of one group on one GPU, and FSDP and DeepSpeed shard a
    model across whole GPUs."""
    gpus = resource_names(cluster["resources_per_worker"]).get("GPU", 1 if cluster["use_gpu"] else 0)
    if not 0 < gpus < 1:
        return
    if any(strategy["training_args"].get(key) for key in GPU_ONLY_TRAINING_ARGS):
        raise ConfigError(
            f"strategy={strategy['name']}: shards a model across whole GPUs, not a share of one "
            f"(cluster.resources_per_worker.GPU={gpus:g}); use strategy=ddp, or GPU=1."
        )
    if cluster["num_workers"] > 1:
        raise ConfigError(
            f"cluster.num_workers: trials packed onto shared GPUs (cluster.resources_per_worker.GPU={gpus:g}) train in "
            f"one process each, as NCCL needs a GPU per worker; set cluster.num_workers=1, or GPU=1."
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
        raise ConfigError(f"metric: a list names two or more different metrics, not {as_override(metric)}; for one, write metric=NAME.")


def as_override(value) -> str:
    """A value as the command line writes it: [a,b] for a list."""
    return f"[{','.join(map(str, value))}]" if isinstance(value, list) else str(value)


# What may act on several objectives: Tune's FIFO scheduler, and searchers that take a list metric
# (Optuna's multi-objective samplers) or ignore the metric (grid and random search).
MULTI_OBJECTIVE_SCHEDULERS = ("ray.tune.schedulers.FIFOScheduler",)
MULTI_OBJECTIVE_SEARCHERS = ("ray.tune.search.optuna.OptunaSearch", "ray.tune.search.BasicVariantGenerator")


def _validate_one_metric_users(cfg: dict) -> None:
    """With several objectives, refuse what optimises one: schedulers but FIFO, single-objective
    searchers, and stoppers or the Trainer's best model following the whole list."""
    if not is_multi_objective(cfg):
        return
    metrics, modes = cfg["metric"], cfg["mode"]
    fix = f"or sweep one metric (metric={metrics[0]} mode={modes[0]})"
    for key, allowed, what, use in (
        ("scheduler", MULTI_OBJECTIVE_SCHEDULERS, "stops or pauses trials by one metric", "scheduler=fifo (with search_alg=optuna, grid or random)"),
        ("search_alg", MULTI_OBJECTIVE_SEARCHERS, "optimises one metric", "search_alg=optuna (multi-objective TPE), grid or random"),
    ):
        target = cfg[key]["_target_"]
        if not any(_is_a(target, name, exactly=key == "scheduler") for name in allowed):
            raise ConfigError(f"{key}: {target.rsplit('.', 1)[-1]} {what}, and metric lists {len(metrics)}; use {use}, {fix}.")
    for name, node in cfg["stopper"].items():
        if isinstance(node.get("metric"), list):
            raise ConfigError(
                f"stopper.{name}.metric: a stopper watches one metric, not {as_override(node['metric'])}; "
                f"set stopper.{name}.metric={metrics[0]} stopper.{name}.mode={modes[0]}."
            )


BOHB = ("ray.tune.schedulers.HyperBandForBOHB", "ray.tune.search.bohb.TuneBOHB")  # one works only with the other


def _validate_bohb(cfg: dict) -> None:
    import importlib.util

    scheduler, searcher = (_is_a(cfg[key]["_target_"], name) for key, name in zip(("scheduler", "search_alg"), BOHB))
    if scheduler != searcher:
        key, other = ("scheduler", "search_alg") if scheduler else ("search_alg", "scheduler")
        raise ConfigError(
            f"{key}: {cfg[key]['_target_'].rsplit('.', 1)[-1]} works only with BOHB's {other}; set scheduler=bohb search_alg=bohb, "
            f"or use search_alg=optuna scheduler=hyperband."
        )
    if searcher and (importlib.util.find_spec("hpbandster") is None or importlib.util.find_spec("ConfigSpace") is None):
        raise ConfigError("search_alg: TuneBOHB needs hpbandster and ConfigSpace; pip install 'hfsweep[bohb]', or use search_alg=optuna scheduler=hyperband.")


def _is_a(target: str, class_name: str, exactly: bool = False) -> bool:
    """Whether `_target_` names the class `class_name` (or, unless `exactly`, a subclass): every
    Tune scheduler subclasses FIFOScheduler."""
    cls, of = import_object(target), import_object(class_name)
    return cls is of or not exactly and isinstance(cls, type) and issubclass(cls, of)


def _validate_best_model_metric(cfg: dict) -> None:
    """The Trainer keeps one best model by one metric, in the sweep's direction for that metric."""
    metric = cfg["training"].get("metric_for_best_model")
    if isinstance(metric, list):
        raise ConfigError(
            f"training.metric_for_best_model: the Trainer keeps its best model by one metric, not {as_override(metric)}; "
            f"set training.metric_for_best_model={metric[0]}."
        )
    mode = dict(objectives(cfg)).get(metric, first_objective(cfg)[1])
    if cfg["training"].get("greater_is_better", mode == "max") != (mode == "max"):
        raise ConfigError(
            f"training.greater_is_better: must be {str(mode == 'max').lower()} when mode={mode}, "
            f"so the Trainer's best checkpoint is the sweep's best."
        )


def _validate_budget(budget: dict) -> None:
    for key, example in (("wall_clock_s", 3600), ("trial_hours", 8)):
        if budget[key] is not None and budget[key] <= 0:
            raise ConfigError(f"budget.{key}: must be positive, not {budget[key]}; e.g. budget.{key}={example}, or null for none.")


def _validate_metrics(cfg: dict, metric: str) -> None:
    """Every eval metric loads and fits the task's predictions, and `metric` (an objective) is
    reported. Where only the results will tell a metric's names (a `compute_metrics` or metric of
    the user's), the sweep metric need only be eval_*."""
    if cfg["compute_metrics"]:
        _check_reported(metric, None)
        return
    task = get_task(cfg["model"]["task"])
    if task.metrics:  # a task computing metrics of its own names
        for name in cfg["eval_metrics"]:
            if name not in task.metrics:
                raise ConfigError(f"eval_metrics: '{name}' is not one of {', '.join(task.metrics)}.")
        bare = metric.removeprefix("eval_")
        if bare in task.metrics and bare not in cfg["eval_metrics"]:
            raise ConfigError(
                f"metric: {metric} is never computed; add it, e.g. eval_metrics=[{','.join([*cfg['eval_metrics'], bare])}]."
            )
        _check_reported(metric, list(cfg["eval_metrics"]))
        return
    names = []
    for entry in cfg["eval_metrics"]:
        reported = metrics.reported_names(metrics.check_entry(entry, task.inputs))
        if reported is None:
            _check_reported(metric, None)
            return
        names.extend(reported)
    bare = metric.removeprefix("eval_")
    if bare not in names and bare in metrics.LOCAL_METRICS and metrics.LOCAL_METRICS[bare].inputs == task.inputs:
        raise ConfigError(
            f"metric: {metric} is never computed; add it, e.g. eval_metrics=[{','.join([*map(str, cfg['eval_metrics']), bare])}]."
        )
    _check_reported(metric, names)


def _check_reported(metric: str, names: Optional[list]) -> None:
    """`names`: what the eval metrics report (before the Trainer's `eval_`), or None if unknown."""
    if names is None:
        if not metric.startswith("eval_") and metric not in REPORTED_METRICS:
            raise ConfigError(f"metric: '{metric}' is not reported; eval metrics are reported as eval_NAME.")
        return
    reported = [*REPORTED_METRICS, *(f"eval_{name}" for name in names if f"eval_{name}" not in REPORTED_METRICS)]
    if metric not in reported:
        raise ConfigError(f"metric: no trial reports '{metric}'; choose one of {', '.join(reported)}.")


def _validate_extra_validation(extra: dict, data: dict) -> None:
    for name, changes in extra.items():
        unknown = [key for key in changes or {} if key not in data] if isinstance(changes, dict) else [changes]
        if not changes or unknown:
            raise ConfigError(
                f"extra_validation.{name}: {'%r is not a data.* key' % unknown[0] if unknown else 'is empty'}; give the data.* "
                f"keys that make this validation set, e.g. extra_validation.{name}.validation_split=validation_mismatched."
            )


def _validate_data(data: dict, model: dict) -> None:
    if sorted(data["datasets_to_split"]) not in (["train"], ["train", "validation"]):
        raise ConfigError(
            f"data.datasets_to_split: {list(data['datasets_to_split'])} is neither [train] (every worker evaluates the "
            "whole validation split) nor [train,validation] (each evaluates its Ray Data shard); use one of them."
        )
    if data["source"] not in DATA_SOURCES:
        raise ConfigError(f"data.source: '{data['source']}' is not one of {', '.join(DATA_SOURCES)}.")
    for key, example in (("chunk_rows", 10000), ("num_proc", 4), ("max_train_tokens", 10_000_000), ("shuffle_buffer_rows", 1024)):
        if data[key] is not None and data[key] < 1:
            what = "or null (all the driver's cores)" if key == "num_proc" else "or null (no budget)" if key == "max_train_tokens" else ""
            raise ConfigError(f"data.{key}: must be a positive integer, not {data[key]}; e.g. data.{key}={example}{' ' + what if what else ''}.")
    if data["prepare_on"] not in PREPARE_ON:
        raise ConfigError(f"data.prepare_on: '{data['prepare_on']}' is not one of {', '.join(PREPARE_ON)}; e.g. data.prepare_on=cluster.")
    if data["streaming"] and not model["tokenizer"]["pretrained"]:
        raise ConfigError(
            "data.streaming: a tokenizer is trained on the whole train split, which a stream does not hold; "
            "set model.tokenizer.pretrained (a hub name or a local directory)."
        )
    task = get_task(model["task"])
    task.check_config(data)
    if task.needs_whole_validation and "validation" in data["datasets_to_split"]:
        raise ConfigError(
            f"data.datasets_to_split: model.task={task.name} matches its predictions to the validation split's rows in order, "
            f"which sharding the split would lose; use data.datasets_to_split=[train]."
        )
    if data["streaming"] and type(task).prepare_raw is not Task.prepare_raw:
        raise ConfigError(
            f"data.streaming: the {task.name or type(task).__name__} task reads the whole train split before tokenizing "
            f"(e.g. to list its labels); set data.streaming=false (data.max_train_samples bounds what is read)."
        )
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
            raise ConfigError(f"data.path: '{data['path']}' does not exist; point it at a folder of train.*/validation.* files.")
    positions = model["config"].get("n_positions") or model["config"].get("max_position_embeddings")
    length_key = get_task(model["task"]).length_key
    if positions and data[length_key] > positions:
        raise ConfigError(
            f"data.{length_key} ({data[length_key]}): larger than the model's {positions} positions; "
            f"lower it (data.{length_key}={positions}) or raise the model's positions."
        )


def _validate_loop(cfg: dict) -> None:
    loop = cfg["loop"]["name"]
    if loop not in LOOPS:
        raise ConfigError(f"loop.name: '{loop}' is not one of {', '.join(LOOPS)}; e.g. loop=accelerate.")
    task, strategy = get_task(cfg["model"]["task"]), cfg["training"].get("train_sampling_strategy", "random")
    if strategy not in SAMPLING_STRATEGIES:
        raise ConfigError(f"training.train_sampling_strategy: '{strategy}' is not one of {', '.join(SAMPLING_STRATEGIES)} "
                          f"(the workers stream their shards, so batch_rebalance's whole-set planning cannot run); e.g. group_by_length.")
    if strategy == "group_by_length" and (not task.pads_batches or cfg["data"]["pad_to_max_length"]):
        fix = "set data.pad_to_max_length=false" if task.pads_batches else "remove it"
        raise ConfigError(f"training.train_sampling_strategy: group_by_length batches examples of similar length to pad less, and "
                          f"every example of model.task={task.name or type(task).__name__} has the same length here; {fix}.")
    if loop != "accelerate":
        return
    if cfg["callbacks"]:
        raise ConfigError("callbacks: TrainerCallbacks need loop=hf_trainer; use callbacks=none with loop=accelerate.")
    for key in cfg["training"]:
        if key not in ACCELERATE_LOOP_KEYS:
            raise ConfigError(f"training.{key}: loop=accelerate does not use it; remove it, or use loop=hf_trainer.")
    if PLATEAU in lr_scheduler_types(cfg):
        raise ConfigError(
            f"training.lr_scheduler_type: loop=accelerate steps its schedule every optimizer step, and {PLATEAU} "
            f"needs the eval metric; use another type, or loop=hf_trainer."
        )


def _validate_peft(cfg: dict) -> None:
    """An adapter needs the Trainer loop (its checkpoints hold only the adapter), a CUDA GPU for a
    quantized base, and, under PBT, one shape for every trial, since an exploit loads the donor's."""
    peft, searched = cfg["peft"], cfg["search_space"].get("peft", {})
    if peft["method"] not in PEFT_METHODS:
        raise ConfigError(f"peft.method: '{peft['method']}' is not one of {', '.join(PEFT_METHODS)}; e.g. peft=lora.")
    if peft["method"] == "none":
        if searched:
            raise ConfigError(f"search_space.peft.{next(iter(searched))}: peft=none trains no adapter; add peft=lora, or drop the key.")
        return
    if cfg["loop"]["name"] != "hf_trainer":
        raise ConfigError(f"peft: loop={cfg['loop']['name']} saves whole models, not adapters; use loop=hf_trainer with peft={peft['method']}.")
    from hfsweep.models import ADAPTER_KEYS

    if "r" in ADAPTER_KEYS[peft["method"]]:
        ranks = [peft["r"], *searched.get("r", {}).get("values", [])]
        bad = next((r for r in ranks if not isinstance(r, int) or r < 1), None)
        if bad is not None:
            where = "search_space.peft.r" if bad != peft["r"] else "peft.r"
            raise ConfigError(f"{where}: the adapter's rank must be a positive integer, not {bad}; e.g. peft.r=8.")
    other_methods_keys = {key for keys in ADAPTER_KEYS.values() for key in keys} - set(ADAPTER_KEYS[peft["method"]])
    unused = [key for key in searched if key in other_methods_keys]
    if unused:
        raise ConfigError(f"search_space.peft.{unused[0]}: peft={peft['method']} has no {unused[0]}; drop the key, or use an adapter that has it.")
    quantized = [key for key in ("load_in_4bit", "load_in_8bit") if peft[key]]
    if quantized:
        import importlib.util

        key = quantized[0]
        if not cfg["cluster"]["use_gpu"]:
            raise ConfigError(f"peft.{key}: a quantized base (QLoRA) needs a CUDA GPU; set cluster.use_gpu=true on a GPU machine, or peft.{key}=false.")
        if len(quantized) > 1:
            raise ConfigError("peft.load_in_8bit: load_in_4bit is set too; choose one, e.g. peft.load_in_8bit=false.")
        if not cfg["model"]["pretrained"]:
            raise ConfigError(f"peft.{key}: quantizes pretrained weights, and model.pretrained is null; set model.pretrained (a hub name or a directory).")
        if importlib.util.find_spec("bitsandbytes") is None:
            raise ConfigError(f"peft.{key}: bitsandbytes is not installed; pip install bitsandbytes, or peft.{key}=false.")
    perturbed = [key for key in PEFT_SHAPE_KEYS if key in searched and searched[key].get("perturb") is not False]
    if perturbed:
        from ray.tune.schedulers import PopulationBasedTraining

        scheduler = import_object(cfg["scheduler"]["_target_"])
        if isinstance(scheduler, type) and issubclass(scheduler, PopulationBasedTraining):
            key = perturbed[0]
            raise ConfigError(
                f"search_space.peft.{key}: {scheduler.__name__} would perturb it, and an exploited trial cannot load a donor's adapter "
                f"of another shape; add search_space.peft.{key}.perturb=false (sampled per trial, taken from the donor at an exploit), "
                f"or use scheduler=asha."
            )


def lr_scheduler_types(cfg: dict) -> set[str]:
    """Every LR schedule the sweep's trials may use: the configured one and any searched ones."""
    searched = cfg["search_space"].get("training", {}).get("lr_scheduler_type", {})
    return {cfg["training"].get("lr_scheduler_type", "linear"), *searched.get("values", ())}


def _validate_cluster(cluster: dict) -> None:
    if cluster["num_workers"] < 1:
        raise ConfigError("cluster.num_workers: must be at least 1.")
    # A local Ray finds this machine's GPUs (unless cluster.num_gpus declares logical ones).
    gpus_per_worker = resource_names(cluster["resources_per_worker"]).get("GPU", 0)
    if (cluster["use_gpu"] or gpus_per_worker) and cluster["address"] is None and cluster["num_gpus"] is None:
        import torch

        if not torch.cuda.is_available():
            key = "cluster.use_gpu" if cluster["use_gpu"] else "cluster.resources_per_worker.GPU"
            fix = "set cluster.use_gpu=false" if cluster["use_gpu"] else "remove it (~cluster.resources_per_worker.GPU)"
            raise ConfigError(f"{key}: this machine has no CUDA GPU; {fix}.")
    if cluster["address"] is None and cluster["num_cpus"] is not None:
        per_trial = trial_resources(cluster)["CPU"]
        if per_trial + DATA_CPUS > cluster["num_cpus"]:
            raise ConfigError(
                f"cluster.num_workers: one trial needs {per_trial:g} CPUs ({trial_shape(cluster)}) and reading its data "
                f"{DATA_CPUS} more, but cluster.num_cpus is {cluster['num_cpus']:g}; raise cluster.num_cpus or lower cluster.num_workers."
            )


