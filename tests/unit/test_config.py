"""Config composition and every validation error a user can hit before Ray starts."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hfsweep.config.errors import ConfigError
from hfsweep.config.resources import trains_in_process, trial_resources, trial_shape
from hfsweep.config.schema import ClusterConfig, DataConfig, StrategyConfig, typed
from hfsweep.driver.preflight import preflight
from hfsweep.tasks import get_task, task_names
from tests.cli_in_process import run_all
from tests.conftest import CONF_DIR, resolved_config

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))
STRATEGIES = sorted(p.stem for p in (Path(CONF_DIR) / "strategy").glob("*.yaml"))


def experiment_overrides(experiment: str, data_dir: Path) -> list[str]:
    """An offline preset needs the folder of its local files (and a LoRA one its base's)."""
    return (
        [f"+experiment={experiment}"]
        + ([f"data.path={data_dir}"] if experiment.endswith("_offline") else [])
        + base_override(experiment)
    )


def base_override(experiment: str) -> list[str]:
    """An offline LoRA preset's base is a local model directory, which it leaves to the user (???)."""
    return ["model.pretrained=/base"] if experiment.endswith("_offline") and "lora" in experiment else []


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_resolves_and_validates(experiment, tmp_path, monkeypatch):
    monkeypatch.setenv("GLUE_DIR", str(tmp_path))  # glue_tsv reads $GLUE_DIR/MRPC
    monkeypatch.setenv("CONLL_DIR", str(tmp_path))  # conll_minilm reads $CONLL_DIR
    (tmp_path / "MRPC").mkdir()
    cfg = resolved_config(experiment_overrides(experiment, tmp_path), tmp_path, tmp_path)
    assert cfg["name"] == (
        "glue_mrpc" if experiment.startswith("glue") else experiment
    )  # a GLUE job is named after its task
    for key in ("model", "data", "training", "scheduler", "search_alg", "cluster", "metric", "mode"):
        assert cfg[key] is not None, key
    preflight(cfg)


@pytest.mark.parametrize("spelling", ["+experiment", "experiment"])
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_debug_tiny_shrinks_every_experiment(experiment, spelling, tmp_path, monkeypatch):
    """`debug=tiny` merges after the preset (either spelling, either order on the command line):
    20 steps, one learning rate and one value of every other searched key (one trial), one worker,
    FIFO, whatever the preset set; the scheduler builds."""
    from hfsweep.config.loading import iter_leaves
    from hfsweep.driver.search.schedulers import build_scheduler
    from hfsweep.driver.search.search_rules import population_size
    from hfsweep.driver.search.search_space import compile_search_space

    monkeypatch.setenv("GLUE_DIR", str(tmp_path))
    monkeypatch.setenv("CONLL_DIR", str(tmp_path))
    (tmp_path / "MRPC").mkdir()
    overrides = experiment_overrides(experiment, tmp_path)
    overrides[0] = overrides[0].replace("+experiment", spelling)
    cfg = resolved_config(["debug=tiny", *overrides], tmp_path, tmp_path)
    sweep = preflight(cfg).sweep
    assert cfg["training"]["max_steps"] == 20 and cfg["training"]["eval_steps"] == cfg["training"]["save_steps"] == 10
    assert cfg["search_space"]["training"]["learning_rate"]["values"] == [1.0e-3]
    assert cfg["cluster"]["num_workers"] == 1 and cfg["num_samples"] == 1
    leaves = list(iter_leaves(cfg["search_space"]))
    assert leaves
    listed = {path: spec["values"] for path, spec in leaves if spec["sampler"] in ("grid", "choice")}
    assert all(len(values) == 1 for values in listed.values()), listed  # peft.r, task_options.mlm_probability...
    assert population_size(sweep) == 1, "a one-trial sweep"
    scheduler = build_scheduler(sweep, compile_search_space(sweep.search_space, sweep))
    assert type(scheduler).__name__ == "FIFOScheduler"
    assert cfg["name"] == ("glue_mrpc" if experiment.startswith("glue") else experiment)  # the preset still applies


WITHOUT_STAND_IN = [  # offline presets whose data nothing here can write (SWAG's own files); the others: test_data
    e
    for e in EXPERIMENTS
    if e.endswith("_offline") and "\n  proxy:" not in (Path(CONF_DIR) / "experiment" / f"{e}.yaml").read_text()
]


@pytest.mark.parametrize("experiment", WITHOUT_STAND_IN)
def test_offline_presets_without_stand_in_data_name_the_missing_data_folder(experiment, tmp_path):
    cfg = resolved_config([f"+experiment={experiment}", *base_override(experiment)], tmp_path, tmp_path)
    with pytest.raises(ConfigError, match=r"data\.path: data\.source=local needs a folder"):
        preflight(cfg)


def test_default_is_the_offline_embedded_sweep(tmp_path):
    cfg = resolved_config([], tmp_path, tmp_path)
    preflight(cfg)
    assert cfg["data"]["source"] == "pydoc"
    assert cfg["model"]["pretrained"] is None and cfg["model"]["tokenizer"]["pretrained"] is None
    assert cfg["cluster"]["num_workers"] == 2
    assert cfg["scheduler"]["_target_"].endswith("ASHAScheduler")
    assert cfg["scheduler"]["max_t"] == cfg["training"]["max_steps"]
    assert len(cfg["search_space"]["training"]["learning_rate"]["values"]) >= 4


@pytest.mark.parametrize(
    "key", ["model", "data", "peft", "strategy", "loop", "cluster", "checkpoints", "budget", "select"]
)
def test_a_typed_sub_config_is_read_only_and_changed_by_copy(key, tmp_path):
    """The layers below the preflight share one typed sub-config each: none can change it under another."""
    import dataclasses

    node = getattr(preflight(resolved_config([], tmp_path, tmp_path)).sweep, key)
    first = dataclasses.fields(node)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{first}'"):
        setattr(node, first, None)
    assert getattr(dataclasses.replace(node, **{first: None}), first) is None


def test_the_typed_config_the_checks_read_is_read_only(tmp_path):
    """The preflight hands every check below the driver one typed `SweepConfig`: none can change it under another."""
    import dataclasses

    sweep = preflight(resolved_config([], tmp_path, tmp_path)).sweep
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'seed'"):
        sweep.seed = 1
    assert isinstance(sweep.data, DataConfig) and sweep.loop.name.value == "hf_trainer"


def test_gpt2_wikitext_reproduces_rays_example(tmp_path):
    cfg = resolved_config(["+experiment=gpt2_wikitext"], tmp_path, tmp_path)
    assert (cfg["data"]["source"], cfg["data"]["name"], cfg["data"]["config_name"]) == (
        "hub",
        "wikitext",
        "wikitext-2-raw-v1",
    )
    assert cfg["data"]["block_size"] == 128
    assert cfg["model"]["config"]["model_type"] == "gpt2" and cfg["model"]["pretrained"] is None


def test_bert_presets_reproduce_rays_examples(tmp_path):
    yelp = resolved_config(["+experiment=bert_yelp"], tmp_path, tmp_path)
    assert (yelp["data"]["name"], yelp["data"]["text_column"], yelp["data"]["pair_column"]) == (
        "yelp_review_full",
        "text",
        None,
    )
    assert yelp["data"]["max_train_samples"] == 100 and yelp["data"]["validation_split"] == "test"
    assert yelp["model"]["pretrained"] == yelp["model"]["tokenizer"]["pretrained"] == "bert-base-cased"
    assert (yelp["metric"], yelp["mode"], yelp["eval_metrics"]) == ("eval_accuracy", "max", ["accuracy"])
    mrpc = resolved_config(["+experiment=bert_mrpc"], tmp_path, tmp_path)
    assert (mrpc["data"]["name"], mrpc["data"]["config_name"]) == ("glue", "mrpc")
    assert (mrpc["data"]["text_column"], mrpc["data"]["pair_column"], mrpc["data"]["label_column"]) == (
        "sentence1",
        "sentence2",
        "label",
    )
    assert mrpc["model"]["task"] == "sequence_classification" and mrpc["eval_metrics"] == ["accuracy", "f1"]


@pytest.mark.parametrize("experiment", ["bert_yelp_offline", "bert_mrpc_offline"])
def test_offline_bert_presets_build_everything_locally(experiment, tmp_path):
    cfg = resolved_config(experiment_overrides(experiment, tmp_path), tmp_path, tmp_path)
    assert cfg["data"]["source"] == "local"
    assert cfg["model"]["pretrained"] is None and cfg["model"]["config"]["model_type"] == "bert"
    assert cfg["model"]["tokenizer"] == {"pretrained": None, "kind": "wordpiece", "vocab_size": 2000}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_composes_and_gpu_only_ones_are_refused_on_cpu(strategy, tmp_path):
    cfg = resolved_config([f"strategy={strategy}"], tmp_path, tmp_path)
    assert cfg["strategy"]["name"] == strategy
    if strategy == "ddp":
        preflight(cfg)
        return
    needs = (
        "DeepSpeed is not installed"
        if strategy.startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None
        else "needs GPUs"
    )
    with pytest.raises(ConfigError, match=rf"^strategy={strategy}: {needs}; .*strategy=ddp"):
        preflight(cfg)


def test_training_argument_names_read_from_the_source_are_the_dataclass_fields():
    from hfsweep.config.loading import _imported_training_argument_names, training_argument_names

    assert training_argument_names() == _imported_training_argument_names()
    assert training_argument_names(seq2seq=True) == _imported_training_argument_names(seq2seq=True)


def test_precision_and_activation_checkpointing_switches_reach_the_training_arguments(tmp_path):
    from hfsweep.contract.recipe import TrainingRecipe
    from hfsweep.loops.hf_trainer import training_arguments

    cfg = resolved_config(["training.bf16=true", "+training.activation_checkpointing=true"], tmp_path, tmp_path)
    sweep = preflight(cfg).sweep  # CPUs run bf16 through torch's autocast
    args = training_arguments(TrainingRecipe.of(sweep), str(tmp_path), get_task(sweep.model.task))
    assert args.bf16 and not args.fp16 and args.activation_checkpointing


# Every input hfsweep refuses, with the one line it answers (after "hfsweep: error: "). Each runs
# as a user runs it: `python -m hfsweep ARGS`, exit status 2, nothing left in the run directory.
PAIRS = ["model=bert_tiny", "data.source=local", "data.text_column=sentence"]  # a classifier on local csv files

# One row of each section of REFUSED (by its first argument) also runs as a real `python -m hfsweep`
# process, imports and all: what a user sees is exactly the one line.
IN_A_REAL_PROCESS = {
    "training.learning_rat=0.001",
    "num_samples=0",
    "+training.learning_rat=0.1",
    "data.source=ftp",
    "eval_metrics=[accuracy]",
    "cluster.num_cpus=4 cluster.num_workers=4",
    "loop=accelerate callbacks=early_stopping",
    "budget.trial_hours=0",
    "search_alg.defaults_trial=maybe",
    "search_alg.warm_start=/no/such/run",
    "search_alg=optuna",
    "search_alg=optuna search_space=learning_rate_loguniform search_alg.storage=sqlite:///{data}/earlier.db",
    "peft=lora peft.r=0",
    " ".join([*PAIRS, "data.path={data}/mixed_labels"]),
}


def write_bad_data(folder: Path) -> Path:
    """Local csv folders as users get them wrong, one folder that is not a model, and an Optuna
    storage that holds an earlier sweep's study."""
    import optuna

    files = {
        "empty": ("sentence,label\n", "sentence,label\na b,1\n"),
        "empty_validation": ("sentence,label\na b c,1\nd e f,0\n", ""),
        "mixed_labels": ("sentence,label\na b c,1\nd e f,pos\ng h,0\n", "sentence,label\na b,1\n"),
        "unseen_label": ("sentence,label\na b c,1\nd e f,0\n", "sentence,label\na b,2\n"),
        "blank_label": ("sentence,label\na b c,1\nd e f,\n", "sentence,label\na b,1\n"),
        "good": ("sentence,label\na b c,1\nd e f,0\n", "sentence,label\na b,1\n"),
    }
    for name, (train, validation) in files.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "train.csv").write_text(train)
        (folder / name / "validation.csv").write_text(validation)
    (folder / "no_config").mkdir()
    (folder / "no_config" / "README.md").write_text("not a model\n")
    optuna.create_study(storage=f"sqlite:///{folder}/earlier.db", study_name="sweep")
    return folder


REFUSED = [
    # Hydra's composition errors, in one line
    (
        ["training.learning_rat=0.001"],
        "training.learning_rat: not a key of training (did you mean 'learning_rate'?); fix the spelling.",
    ),
    (  # a TrainingArguments field conf/training/default.yaml leaves out: not a misspelling of itself
        ["training.torch_compile=true"],
        "training.torch_compile: a TrainingArguments field the training config does not set; add it with "
        "+training.torch_compile=VALUE.",
    ),
    (
        ["training.some_new_field=1"],
        "training.some_new_field: not a key of training; to add a new key, write +training.some_new_field=VALUE.",
    ),
    (
        ["cluster.num_worker=2"],
        "cluster.num_worker: not a key of cluster (did you mean 'num_workers'?); fix the spelling.",
    ),
    (
        ["seed=abc"],
        "seed: Value 'abc' of type 'str' could not be converted to Integer; give a value of that type, e.g. seed=42.",
    ),
    (
        ["scheduler=ashaa"],
        "scheduler=ashaa: no such option (did you mean 'asha'?); choose one of asha, asha_epochs, bohb, fifo, "
        "hyperband, median, pb2, pbt.",
    ),
    (
        ["-m", "scheduler=asha,fifoo"],
        "scheduler=fifoo: no such option (did you mean 'fifo'?); choose one of asha, asha_epochs, bohb, fifo, "
        "hyperband, median, pb2, pbt.",
    ),
    (
        ["-m", "seed=1,2", "num_samples=1,0"],  # the first job is fine: the last is refused before it starts
        "num_samples: must be at least 1 (trials per grid point), not 0; e.g. num_samples=1.",
    ),
    (
        ["seed=[1"],
        "no viable alternative at input '[1' See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details",
    ),
    (
        ["stopper=threshold"],
        "stopper.threshold.threshold: has no value (???); set it, e.g. stopper.threshold.threshold=VALUE.",
    ),
    # values that make no sense
    (["num_samples=0"], "num_samples: must be at least 1 (trials per grid point), not 0; e.g. num_samples=1."),
    (["mode=maximum"], "mode: must be 'min' or 'max', not 'maximum'."),
    (
        ["metric=eval_acuracy"],
        "metric: no trial reports 'eval_acuracy'; choose one of eval_loss, eval_perplexity, loss, time_total_s, "
        "train_tokens_per_second, train_samples_per_second, peak_memory_mb, trainable_params, mfu.",
    ),
    (
        ["model.task=translation"],
        f"model.task: 'translation' is not one of {', '.join(task_names())}; or give a task class as "
        "model.task._target_.",
    ),
    (
        ["+callbacks.mine._target_=my_project.NoSuchCallback"],
        "callbacks.mine._target_: cannot import 'my_project.NoSuchCallback' (No module named 'my_project'); fix the "
        "name, or make its module importable: install its package, or run from its folder (workers get it with "
        "cluster.runtime_env.working_dir or py_modules).",
    ),
    (
        ["model.tokenizer.kind=sentencepiece"],
        "model.tokenizer.kind: Invalid value 'sentencepiece', expected one of [byte_level_bpe, roberta_bpe, unigram, "
        "wordpiece], e.g. model.tokenizer.kind=byte_level_bpe.",
    ),
    (
        ["checkpoints.keep_per_trial=0"],
        "checkpoints.keep_per_trial: must be at least 1 (the best checkpoint), not 0; or null to keep every "
        "checkpoint.",
    ),
    # training
    (
        ["+training.learning_rat=0.1"],
        "training.learning_rat: not a transformers.TrainingArguments field (did you mean 'learning_rate'?); remove it "
        "or fix the spelling.",
    ),
    (
        ["+strategy.training_args.fsdp_confi=x"],
        "strategy.training_args.fsdp_confi: not a transformers.TrainingArguments field (did you mean 'fsdp_config'?); "
        "remove it or fix the spelling.",
    ),
    (
        ["training.per_device_train_batch_size=0"],
        "training.per_device_train_batch_size: must be a positive integer, not 0; e.g. "
        "training.per_device_train_batch_size=8.",
    ),
    (
        ["training.save_steps=15"],
        "training.save_steps (15): must be a multiple of training.eval_steps (10), or schedulers act on stale metrics; "
        "e.g. training.save_steps=10.",
    ),
    (
        ["training.eval_strategy=no"],
        "training.eval_strategy and training.save_strategy: both must be 'steps', so every checkpoint reaches Tune "
        "with a fresh eval metric.",
    ),
    (
        ["+training.save_total_limit=2"],
        "training.save_total_limit: 2, but the Trainer would delete checkpoints that Tune still points to (PBT, a "
        "retry and resume read them); drop it, and keep fewer with checkpoints.keep_per_trial=K.",
    ),
    (
        ["training.learning_rate=-1"],
        "training.learning_rate: must be above 0, not -1; e.g. training.learning_rate=5e-5.",
    ),
    (
        ["training.max_steps=0"],
        "training.max_steps: must be a positive integer (a Ray Data training set is an iterable, so the Trainer needs "
        "max_steps), e.g. training.max_steps=100; or -1, for each trial's steps to follow from "
        "training.num_train_epochs and its batch size.",
    ),
    (
        ["+search_space.training.per_device_train_batch_size={sampler:grid,values:[8,16]}"],
        "scheduler.time_attr: ASHAScheduler compares trials at the same step, and "
        "search_space.training.per_device_train_batch_size makes a step a different amount of data in each trial; use "
        "scheduler=asha_epochs (time in epochs), or scheduler=fifo.",
    ),
    (
        ["+search_space.training.num_train_epochs={sampler:grid,values:[2,3]}"],
        "search_space.training.num_train_epochs: training.max_steps=60 gives every trial that many steps, whatever its "
        "epochs; set training.max_steps=-1 (each trial's steps follow from its epochs and batch size).",
    ),
    (
        ["training.max_steps=-1", "training.num_train_epochs=0"],
        "training.num_train_epochs: must be above 0 under training.max_steps=-1, not 0; e.g. "
        "training.num_train_epochs=3.",
    ),
    (["+training.output_dir=/x"], "training.output_dir: hfsweep sets this itself; remove it from the config."),
    (
        ["training.max_steps=-1"],
        "training.max_steps: -1 leaves ASHAScheduler no last rung (its scheduler.max_t is training.max_steps); set "
        "training.max_steps, e.g. training.max_steps=100, or use scheduler=asha_epochs (rungs in epochs) or "
        "scheduler=fifo.",
    ),
    (
        ["scheduler=asha_epochs", "training.max_steps=100"],
        "scheduler.time_attr: ASHAScheduler places its rungs in epochs, and training.max_steps=100 ends every trial "
        "at that step whatever its epochs; set training.max_steps=-1 (each trial trains training.num_train_epochs), "
        "or use scheduler=asha (rungs in steps).",
    ),
    # data
    (
        ["data.block_size=512"],
        "data.block_size (512): larger than the model's 128 positions; lower it (data.block_size=128) or raise the "
        "model's positions.",
    ),
    (
        ["data.path=/tmp"],
        "data.path: is set, but data.source is 'pydoc', which does not read it; add data.source=local, or drop "
        "data.path.",
    ),
    (
        ["data.source=local", "data.path=/no/such/dir"],
        "data.path: '/no/such/dir' does not exist; point it at a folder of train.*/validation.* files.",
    ),
    (["data.source=hub"], "data.name: data.source=hub needs a dataset name, e.g. data.name=wikitext."),
    # the held-out test split: one nothing in the search reads
    (
        ["data.test_split=train"],
        "data.test_split: 'train' is the split trials train on; name a split they do not see, e.g. "
        "data.test_split=validation data.validation_split_percentage=10.",
    ),
    (
        ["data.test_split=validation"],
        "data.test_split: 'validation' is also the validation split the search selects on; carve the validation set "
        "from train with data.validation_split_percentage=10, or name another split.",
    ),
    (
        ["data.validation_split_percentage=100"],
        "data.validation_split_percentage: must lie between 0 and 100 (the share of the train split that validates), "
        "not 100; e.g. data.validation_split_percentage=10, or null.",
    ),
    (
        [*PAIRS, "data.path={data}/good", "data.test_split=test"],
        "data.test_split: 'test' is not a split of the files of data.path (splits: train, validation); set "
        "data.test_split.",
    ),
    (
        ["data.source=ftp"],
        "data.source: Invalid value 'ftp', expected one of [pydoc, hub, local], e.g. data.source=pydoc.",
    ),
    (
        ["data.prepare_on=head"],
        "data.prepare_on: Invalid value 'head', expected one of [driver, cluster], e.g. data.prepare_on=driver.",
    ),
    (
        ["peft.method=prefix"],
        "peft.method: Invalid value 'prefix', expected one of [none, lora, ia3], e.g. peft.method=none.",
    ),
    (
        ["loop.name=jax"],
        "loop.name: Invalid value 'jax', expected one of [hf_trainer, accelerate], e.g. loop.name=hf_trainer.",
    ),
    (
        ["peft=lora", "+search_space.peft.method={sampler:grid,values:[lora,prefix]}"],
        "search_space.peft.method: 'prefix' is not a value peft.method takes (Invalid value 'prefix', expected one of "
        "[none, lora, ia3]).",
    ),
    (
        ["task_options.doc_strid=3", "model.task=question_answering"],
        "task_options.doc_strid: not an option of the question_answering task (its options: doc_stride, "
        "max_answer_length, n_best_size, version_2_with_negative, null_score_diff_threshold) "
        "(did you mean 'doc_stride'?); remove it or fix the spelling.",
    ),
    (
        ["task_options.mlm_probability=often", "model.task=masked_lm"],
        "task_options.mlm_probability: Value 'often' of type 'str' could not be converted to Float; "
        "give a value of the type the masked_lm task declares (hfsweep.tasks.masked_lm).",
    ),
    (
        ["model.task=masked_lm"],
        "model.task=masked_lm: a byte_level_bpe tokenizer trained here has no mask token to mask with; use a masked "
        "LM's model and tokenizer, e.g. model=roberta_tiny (or model.tokenizer.kind=wordpiece or roberta_bpe).",
    ),
    (
        ["model=roberta_tiny", "model.task=masked_lm", "model.config.model_type=gpt2"],
        "model.config.model_type: AutoModelForMaskedLM (model.task=masked_lm) has no class for a gpt2 model; choose "
        "a model it builds, or another model.task.",
    ),
    (
        ["model.config.model_type=gpt3"],
        "model.config.model_type: transformers has no model type 'gpt3' (did you mean 'gptj'?); fix the spelling.",
    ),
    (
        ["model=roberta_tiny", "task_options.mlm_probability=1.7"],
        "task_options.mlm_probability: must be above 0 and at most 1 (the share of tokens masked), not 1.7; "
        "e.g. task_options.mlm_probability=0.15.",
    ),
    (
        ["model=roberta_tiny", "+search_space.task_options.mlm_probability={sampler:choice,values:[often,0.3]}"],
        "search_space.task_options.mlm_probability: 'often' is not a value task_options.mlm_probability takes "
        "(Value 'often' of type 'str' could not be converted to Float); search only values it takes, or drop the key.",
    ),
    (
        ["model=roberta_tiny", "+search_space.task_options.mlm_probability={sampler:choice,values:[1.7,0.3]}"],
        "search_space.task_options.mlm_probability: 1.7 is not a value task_options.mlm_probability takes "
        "(must be above 0 and at most 1 (the share of tokens masked), not 1.7); search only values it takes, or drop "
        "the key.",
    ),
    (
        ["model=roberta_tiny", "+search_space.task_options.eval_mlm_probability={sampler:uniform,low:0.1,high:2}"],
        "search_space.task_options.eval_mlm_probability: 2 is not a value task_options.eval_mlm_probability takes "
        "(must be above 0 and at most 1 (the share of tokens masked), not 2.0); search only values it takes, or drop "
        "the key.",
    ),
    (["data.chunk_rows=0"], "data.chunk_rows: must be a positive integer, not 0; e.g. data.chunk_rows=10000."),
    (
        ["data.max_train_tokens=-5"],
        "data.max_train_tokens: must be a positive integer, not -5; e.g. data.max_train_tokens=10000000 or null (no "
        "budget).",
    ),
    (
        ["data.streaming=true"],
        "data.streaming: a tokenizer is trained on the whole train split, which a stream does not hold; set "
        "model.tokenizer.pretrained (a hub name or a local directory).",
    ),
    (
        ["model=bert_tiny", "data.streaming=true", "model.tokenizer.pretrained=/tmp"],
        "data.streaming: the sequence_classification task reads the whole train split before tokenizing (e.g. to list "
        "its labels); set data.streaming=false (data.max_train_samples bounds what is read).",
    ),
    (
        ["data.datasets_to_split=[validation]"],
        "data.datasets_to_split: ['validation'] is neither [train] (every worker evaluates the whole validation split) "
        "nor [train,validation] (each evaluates its Ray Data shard); use one of them.",
    ),
    (
        ["+experiment=gpt2_wikitext"],
        "data: cannot load 'wikitext' from the Hugging Face hub (ConnectionError); run offline with data.source=local "
        "data.path=DIR (DIR holding train.txt and validation.txt).",
    ),
    # metrics
    (
        ["eval_metrics=[accuracy]"],
        "eval_metrics: 'accuracy' scores labels, and this task predicts none of them; use perplexity.",
    ),
    (
        ["model=bert_tiny", "eval_metrics=[perplexity]"],
        "eval_metrics: 'perplexity' is exp(eval_loss) of a language model's token loss, which this task's loss is not; "
        "use accuracy, f1, glue, matthews_correlation, pearsonr, precision, recall, spearmanr.",
    ),
    (
        ["model=bert_tiny", "metric=eval_perplexity"],
        "metric: no trial reports 'eval_perplexity'; choose one of eval_loss, loss, time_total_s, "
        "train_tokens_per_second, train_samples_per_second, peak_memory_mb, trainable_params, mfu.",
    ),
    (
        ["model=bert_tiny", "eval_metrics=[auc]"],
        "eval_metrics: 'auc' is not computed locally and evaluate.load cannot load it (FileNotFoundError; "
        "HF_HUB_OFFLINE is set); use accuracy, f1, glue, matthews_correlation, pearsonr, precision, recall, spearmanr, "
        "or a path to an evaluate module.",
    ),
    (
        ["+experiment=t5_xsum", "metric=eval_rouge1"],
        "trainer.every_k_evals: 2 generates at one evaluation in 2, so eval_rouge1 is missing from the reports "
        "between; sweep on metric=eval_loss, or set trainer.every_k_evals=1.",
    ),
    (
        ["+experiment=t5_xsum_offline", "data.path=.", "trainer=default"],
        "trainer._target_: transformers.Trainer does not generate, so eval_metrics cannot be scored; use "
        "trainer._target_=hfsweep.loops.trainers.GenerationEvalTrainer (or a Seq2SeqTrainer).",
    ),
    (
        ["model=bert_tiny", "eval_metrics=[{name:glue,config_name:mrcp}]"],
        "eval_metrics: glue needs config_name, one of cola, sst2, mrpc, qqp, stsb, mnli, mnli_matched, "
        "mnli_mismatched, qnli, rte, wnli, hans; e.g. {name: glue, config_name: mrpc}.",
    ),
    (
        ["+experiment=glue", "glue=stsb", "model=bert_tiny", "+extra_validation.other.validation_splt=test"],
        "extra_validation.other: 'validation_splt' is not a data.* key; give the data.* keys that make this validation "
        "set, e.g. extra_validation.other.validation_split=validation_mismatched.",
    ),
    (
        ["+experiment=glue_tsv", "glue=cola"],
        "data.path: the environment variable GLUE_DIR is not set; set it (GLUE_DIR=... python -m hfsweep ...) or give "
        "data.path directly.",
    ),
    (
        ["model=bert_tiny", "metric=eval_f1", "eval_metrics=[accuracy]"],
        "metric: eval_f1 is never computed; add it, e.g. eval_metrics=[accuracy,f1].",
    ),
    (
        ["+experiment=bert_squad_offline", "data.path={data}/good", "eval_metrics=[squad_v2]", "metric=eval_f1"],
        "eval_metrics: squad_v2 scores a no-answer probability, which is predicted only with "
        "task_options.version_2_with_negative=true; set it (SQuAD 2.0), or use eval_metrics=[squad].",
    ),
    (
        ["+experiment=bert_squad_offline", "data.path={data}/good", "task_options.version_2_with_negative=true"],
        "task_options.version_2_with_negative: predicts empty answers (SQuAD 2.0), which squad (v1.1) cannot score; "
        "use eval_metrics=[squad_v2] metric=eval_f1, or drop the flag.",
    ),
    (
        ["+experiment=bert_squad_offline", "data.path={data}/good"]
        + ["+search_space.task_options.version_2_with_negative={sampler:grid,values:[false,true]}"],
        "search_space.task_options.version_2_with_negative: True is not a value task_options.version_2_with_negative "
        "takes (predicts empty answers (SQuAD 2.0), which squad (v1.1) cannot score); search only values it takes, "
        "or drop the key.",
    ),
    (
        ["model=bert_tiny", "data.max_length=256"],
        "data.max_length (256): larger than the model's 128 positions; lower it (data.max_length=128) or raise the "
        "model's positions.",
    ),
    # cluster and hardware
    (
        ["cluster.num_cpus=4", "cluster.num_workers=4"],
        "cluster.num_workers: one trial needs 5 CPUs (1 CPU for the trial + 4 workers) and reading its data 1 more, "
        "but cluster.num_cpus is 4; raise cluster.num_cpus or lower cluster.num_workers.",
    ),
    (
        ["cluster.use_gpu=true", "cluster.num_gpus=1", "+cluster.resources_per_worker.GPU=0.25", "strategy=fsdp"],
        "strategy=fsdp: shards a model across whole GPUs, not a share of one (cluster.resources_per_worker.GPU=0.25); "
        "use strategy=ddp, or GPU=1.",
    ),
    (
        ["cluster.use_gpu=true", "cluster.num_gpus=1", "+cluster.resources_per_worker.GPU=0.25"],
        "cluster.num_workers: trials packed onto shared GPUs (cluster.resources_per_worker.GPU=0.25) train in one "
        "process each, as NCCL needs a GPU per worker; set cluster.num_workers=1, or GPU=1.",
    ),
    # loops
    (
        ["loop=accelerate", "+training.optim=adafactor"],
        "training.optim: loop=accelerate does not use it; remove it, or use loop=hf_trainer.",
    ),
    (
        ["loop=accelerate", "callbacks=early_stopping"],
        "callbacks: TrainerCallbacks need loop=hf_trainer; use callbacks=none with loop=accelerate.",
    ),
    (
        ["loop=accelerate", "training.lr_scheduler_type=reduce_lr_on_plateau"],
        "training.lr_scheduler_type: loop=accelerate steps its schedule every optimizer step, and reduce_lr_on_plateau "
        "needs the eval metric; use another type, or loop=hf_trainer.",
    ),
    # several objectives, BOHB, budgets
    (
        ["metric=[eval_loss,time_total_s]", "mode=[min,min]"],
        "scheduler: ASHAScheduler stops or pauses trials by one metric, and metric lists 2; use scheduler=fifo (with "
        "search_alg=optuna, grid or random), or sweep one metric (metric=eval_loss mode=min).",
    ),
    (
        [
            "metric=[eval_loss,time_total_s]",
            "mode=[min,min]",
            "scheduler=fifo",
            "search_alg=hyperopt",
            "search_space=learning_rate_loguniform",
        ],
        "search_alg: HyperOptSearch optimises one metric, and metric lists 2; use search_alg=optuna (multi-objective "
        "TPE), grid or random, or sweep one metric (metric=eval_loss mode=min).",
    ),
    (
        ["scheduler=bohb"],
        "scheduler: HyperBandForBOHB works only with BOHB's search_alg; set scheduler=bohb search_alg=bohb, or use "
        "search_alg=optuna scheduler=hyperband.",
    ),
    (
        ["budget.trial_hours=0"],
        "budget.trial_hours: must be positive, not 0.0; e.g. budget.trial_hours=8, or null for none.",
    ),
    (
        ["budget.usd=5"],
        "budget.usd: needs the price of what the trials hold; set cluster.price_per_cpu_hour, e.g. "
        "cluster.price_per_cpu_hour=2.5.",
    ),
    (
        ["budget.trial_hours=2", "cluster.address=ray://head:10001"],
        "budget.trial_hours: a budget is counted by Tune's loop, which runs on the cluster under Ray Client "
        "(cluster.address=ray://...) where the driver cannot read it; run the sweep on the head node "
        "(cluster.address=auto), or drop budget.trial_hours.",
    ),
    (
        ["budget.trial_hours=2", "scheduler=fifo", "+search_space.cluster.num_workers={sampler:choice,values:[1,2]}"],
        "budget.trial_hours: bills every trial at the config's resources, and search_space.cluster.num_workers "
        "changes what a trial holds; set cluster.num_workers in the config, or budget by budget.train_samples or "
        "budget.wall_clock_s.",
    ),
    (
        ["metric=mfu", "mode=max"],
        "metric: mfu is estimated on GPUs only; set cluster.use_gpu=true, or use train_tokens_per_second.",
    ),
    # the defaults trial
    (
        ["search_alg.defaults_trial=maybe"],
        "search_alg.defaults_trial: must be true or false, not 'maybe'; e.g. search_alg.defaults_trial=false.",
    ),
    (
        ["search_alg.defaults_trial=no"],
        "search_alg.defaults_trial: must be true or false, not 'no'; e.g. search_alg.defaults_trial=false.",
    ),
    (
        ["search_space=finetune", "search_alg=optuna"],
        "search_space.training.learning_rate: the defaults trial runs the config's own training.learning_rate=0.001, "
        "outside [1e-05, 0.0001]; widen the space to hold it, set training.learning_rate inside it, or "
        "search_alg.defaults_trial=false.",
    ),
    # search space and warm start (checked by the sweep, still before Ray starts)
    (
        ["search_alg.warm_start=/no/such/run"],
        "search_alg.warm_start: '/no/such/run' holds no sweep (resolved_config.yaml is missing); pass an earlier "
        "sweep's run directory.",
    ),
    (
        ["search_alg=optuna"],  # the default space is a grid
        "search_space.training.learning_rate: OptunaSearch cannot walk a grid; set search_space.training.learning_rate."
        "sampler=choice (its values drawn by OptunaSearch), or use search_alg=grid.",
    ),
    (
        ["search_space=bert_paper", "search_alg=optuna", "search_alg.defaults_trial=false"],
        "search_space.training.learning_rate: OptunaSearch cannot walk a grid; set search_space.training.learning_rate."
        "sampler=choice (its values drawn by OptunaSearch), or use search_alg=grid.",
    ),
    (
        ["search_alg=optuna", "search_space=learning_rate_loguniform", "search_alg.startup_trials=abc"],
        "search_alg.startup_trials: must be a whole number of trials, at least 0, not 'abc'; e.g. "
        "search_alg.startup_trials=4, or null (a third of the trials).",
    ),
    (
        ["search_alg=hyperopt", "search_space=learning_rate_loguniform", "search_alg.startup_trials=-3"],
        "search_alg.startup_trials: must be a whole number of trials, at least 0, not -3; e.g. "
        "search_alg.startup_trials=4, or null (a third of the trials).",
    ),
    (
        ["scheduler=pbt", "scheduler.time_attr=epoch", "training.max_steps=-1", "+scheduler.synch=true"]
        + ["+search_space.training.num_train_epochs={sampler:choice,values:[1,2]}"],
        "scheduler.synch: synchronous PopulationBasedTraining pauses each trial at a perturbation until every running "
        "trial has reached it, and search_space.training.num_train_epochs ends some trials in between, after which "
        "Ray's PopulationBasedTraining can leave the paused ones waiting forever; drop it (~scheduler.synch), or stop "
        "searching training.num_train_epochs.",
    ),
    # the live Optuna study: a new sweep's own, in a storage Optuna opens ({data}/earlier.db holds 'sweep')
    (
        [
            "search_alg=optuna",
            "search_space=learning_rate_loguniform",
            "search_alg.storage=sqlite:///{data}/earlier.db",
        ],
        "search_alg.study_name: the study 'sweep' already exists in sqlite:///{data}/earlier.db, an earlier sweep's; "
        "choose another search_alg.study_name, delete it (optuna delete-study --storage sqlite:///{data}/earlier.db "
        "--study-name sweep), or continue that sweep with python -m hfsweep.resume RUN_DIR.",
    ),
    (
        ["-m", "search_alg=optuna", "search_space=learning_rate_loguniform", "search_alg.storage=sqlite:///s.db"]
        + ["seed=1,2"],
        "search_alg.study_name: two jobs of this multirun would write the study 'sweep' in sqlite:///s.db; give "
        "each job its own search_alg.study_name.",
    ),
    (
        ["search_alg=optuna", "search_space=learning_rate_loguniform", "search_alg.storage=sweep.db"],
        "search_alg.storage: sweep.db: Could not parse SQLAlchemy URL from given URL string; give a URL such as "
        "sqlite:///sweep.db.",
    ),
    (
        ["search_alg=optuna", "search_space=learning_rate_loguniform", "search_alg.warm_start={data}/good"]
        + ["search_alg.storage=sqlite:///{data}/warm.db"],
        "search_alg.storage: a warm-started sweep keeps its study, which holds the earlier sweeps' trials, in memory, "
        "so the storage would not be written; drop search_alg.storage or search_alg.warm_start.",
    ),
    (
        ["+training.train_sampling_strategy=batch_rebalance"],
        "training.train_sampling_strategy: 'batch_rebalance' is not one of random, sequential, group_by_length (the "
        "workers stream their shards, so batch_rebalance's whole-set planning cannot run); e.g. group_by_length.",
    ),
    (
        ["+training.train_sampling_strategy=group_by_length"],
        "training.train_sampling_strategy: group_by_length batches examples of similar length to pad less, and every "
        "example of model.task=causal_lm has the same length here; remove it.",
    ),
    (
        ["search_space.training.learning_rate.sampler=nope"],
        "search_space.training.learning_rate: unknown sampler 'nope'; use one of choice, grid, uniform, quniform, "
        "loguniform, qloguniform, randint, qrandint, lograndint.",
    ),
    (
        ["+search_space.training.learning_rate.low=1.0e-5", "+search_space.training.learning_rate.high=1.0e-3"],
        "search_space.training.learning_rate: sampler 'grid' reads values, not low, high; set "
        "search_space.training.learning_rate.sampler=loguniform (or uniform) to sample the range, or remove "
        "~search_space.training.learning_rate.low ~search_space.training.learning_rate.high to keep the values.",
    ),
    (
        ["strategy=fsdp"],
        "strategy=fsdp: needs GPUs; set cluster.use_gpu=true on a GPU machine, or use strategy=ddp on CPUs.",
    ),
    # PEFT
    (
        ["peft=lora", "peft.load_in_4bit=true"],
        "peft.load_in_4bit: a quantized base (QLoRA) needs a CUDA GPU; set cluster.use_gpu=true on a GPU machine, or "
        "peft.load_in_4bit=false.",
    ),
    (
        ["peft=lora", "scheduler=pbt", "+search_space.peft.r={sampler:choice,values:[4,8]}"],
        "search_space.peft.r: PopulationBasedTraining would perturb it, and an exploited trial cannot load a donor's "
        "adapter of another shape; add search_space.peft.r.perturb=false (sampled per trial, taken from the donor at "
        "an exploit), or use scheduler=asha.",
    ),
    (
        ["peft=lora", "peft.target_modules=[q_proj]"],
        "peft.target_modules: ['q_proj'] does not fit this gpt2 model (Target modules {'q_proj'} not found in the base "
        "model. Please check the target modules and try again.); use some of c_attn, c_fc, c_proj, lm_head, or "
        "all-linear.",
    ),
    (
        ["+search_space.peft.r={sampler:choice,values:[4,8]}"],
        "search_space.peft.r: peft=none trains no adapter; add peft=lora, or drop the key.",
    ),
    (
        ["peft=lora", "loop=accelerate"],
        "peft: loop=accelerate saves whole models, not adapters; use loop=hf_trainer with peft=lora.",
    ),
    (["peft=lora", "peft.r=0"], "peft.r: the adapter's rank must be a positive integer, not 0; e.g. peft.r=8."),
    # data files as users get them wrong ({data}: the folders `write_bad_data` writes)
    (
        [*PAIRS, "data.path={data}/empty"],
        "data.path: '{data}/empty/train.csv' (train) holds a header and no rows; put the train split's examples in it, "
        "or point data.path at the right folder.",
    ),
    (
        [*PAIRS, "data.path={data}/empty_validation"],
        "data.path: '{data}/empty_validation/validation.csv' (validation) is empty; put the validation split's "
        "examples in it, or point data.path at the right folder.",
    ),
    (
        [*PAIRS, "data.path={data}/mixed_labels"],
        "data.label_column: 'label' of the train split mixes numbers (0, 1) and words (pos); give every example a "
        "label of one kind (class ids, or class names).",
    ),
    (
        [*PAIRS, "data.path={data}/blank_label"],
        "data.label_column: 'label' of the train split is empty in 1 of its examples (1, counting from 0); label them "
        "or drop them.",
    ),
    (
        [*PAIRS, "data.path={data}/unseen_label"],
        "data.label_column: 'label' of the validation split has labels outside the 2 classes of the train split (2); "
        "check the data or data.num_labels.",
    ),
    (
        [*PAIRS, "data.path={data}/good", "model.pretrained={data}/no_config"],
        "model.pretrained: '{data}/no_config' has no usable config.json (Unrecognized model in {data}/no_config. "
        "Should have a `model_type` key in its config.json.); give a folder a model was saved to (save_pretrained), or "
        "a hub name.",
    ),
]
if not torch.cuda.is_available():  # refused only because this machine has no CUDA device
    REFUSED.append(
        (["cluster.use_gpu=true"], "cluster.use_gpu: this machine has no CUDA GPU; set cluster.use_gpu=false.")
    )
    REFUSED.append(
        (
            ["+cluster.resources_per_worker.GPU=1"],
            "cluster.resources_per_worker.GPU: this machine has no CUDA GPU; remove it "
            "(~cluster.resources_per_worker.GPU).",
        )
    )
if importlib.util.find_spec("deepspeed") is None:
    REFUSED.append(
        (
            ["strategy=deepspeed_zero2"],
            "strategy=deepspeed_zero2: DeepSpeed is not installed; pip install 'hfsweep[deepspeed]' (on a machine with "
            "CUDA GPUs), or use strategy=ddp.",
        )
    )


def run_dir_overrides(args: list[str], run_dir: Path) -> list[str]:
    return [f"hydra.sweep.dir={run_dir}"] if "-m" in args else [f"hydra.run.dir={run_dir}"]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict:
    """Every REFUSED command line, as `python -m hfsweep` runs it: in two Python processes (half
    the lines each, `tests.cli_in_process.run_all`) that run their lines one after another, capturing
    file descriptors 1 and 2, since a refusal costs far less than the imports before it; and the rows
    of IN_A_REAL_PROCESS each in a process of its own, all at once. Each case: its output (stdout
    and stderr together), exit code, run directory, and whether Ray was started."""
    root = tmp_path_factory.mktemp("refused")
    data = write_bad_data(root / "data")
    argvs = [
        [
            *(arg.replace("{data}", str(data)) for arg in args),
            *run_dir_overrides(args, root / str(i)),
            f"cache_dir={root / 'cache'}",
        ]
        for i, (args, _) in enumerate(REFUSED)
    ]
    results = dict(enumerate(run_all(argvs, root)))
    real = {
        i: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hfsweep",
                *argvs[i][:-2],
                *run_dir_overrides(argvs[i], root / f"real-{i}"),
                f"cache_dir={root / 'cache'}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, (args, _) in enumerate(REFUSED)
        if " ".join(args) in IN_A_REAL_PROCESS
    }
    for i, process in real.items():
        output, _ = process.communicate(timeout=600)
        results[f"real-{i}"] = (output, process.returncode, False)
    return {i: (output, code, root / str(i), ray_started, data) for i, (output, code, ray_started) in results.items()}


@pytest.mark.process
@pytest.mark.parametrize("case", range(len(REFUSED)), ids=[" ".join(args) for args, _ in REFUSED])
def test_every_refused_input_gets_one_line_naming_the_key_and_fix_exit_2_and_leaves_nothing(case, refusals):
    output, code, run_dir, ray_started, data = refusals[case]
    assert output.strip().splitlines() == ["hfsweep: error: " + REFUSED[case][1].replace("{data}", str(data))], output[
        -2000:
    ]
    assert code == 2
    assert not run_dir.exists(), "a rejected config must leave no output behind"
    assert not ray_started, "refused before Ray starts"


@pytest.mark.process
def test_one_refusal_of_every_section_prints_exactly_its_line_from_a_real_process(refusals):
    real = [(int(key.split("-")[1]), value) for key, value in refusals.items() if isinstance(key, str)]
    assert {" ".join(REFUSED[i][0]) for i, _ in real} == IN_A_REAL_PROCESS, "a section without a real-process row"
    for i, (output, code, _, _, data) in real:
        assert (output.strip().splitlines(), code) == (
            ["hfsweep: error: " + REFUSED[i][1].replace("{data}", str(data))],
            2,
        ), output[-2000:]
        assert not (run_dir := refusals[i][2].parent / f"real-{i}").exists(), run_dir


def test_a_launch_checks_each_job_once_before_its_sweep_and_a_multirun_checks_every_job_first(tmp_path, monkeypatch):
    """Hydra's app alone composes: `python -m hfsweep` preflights a single run once; a multirun
    checks every job before the first job's sweep, and each job again as it starts (Hydra composes
    it anew for its launch)."""
    import hfsweep.__main__ as entry
    import hfsweep.cli.launch as launch
    from hfsweep.driver import sweep

    events = []

    def counted(cfg):
        events.append(("preflight", cfg["seed"]))
        return preflight(cfg)

    monkeypatch.setattr(entry, "preflight", counted)
    monkeypatch.setattr(launch, "preflight", counted)
    monkeypatch.setattr(sweep, "run", lambda checked: events.append(("sweep", checked.sweep.seed)))
    cache = f"cache_dir={tmp_path / 'cache'}"
    monkeypatch.setattr(sys, "argv", ["hfsweep", "seed=5", f"hydra.run.dir={tmp_path / 'run'}", cache])
    entry.cli()
    assert events == [("preflight", 5), ("sweep", 5)]
    events.clear()
    monkeypatch.setattr(sys, "argv", ["hfsweep", "-m", "seed=1,2", f"hydra.sweep.dir={tmp_path / 'multi'}", cache])
    entry.cli()
    assert events == [
        ("preflight", 1),
        ("preflight", 2),
        ("preflight", 1),
        ("sweep", 1),
        ("preflight", 2),
        ("sweep", 2),
    ]


@pytest.mark.process
def test_the_default_preflight_imports_no_trainer_so_a_refusal_stays_fast_and_quiet(tmp_path):
    """A config that passes every check up to the last costs no import of transformers' Trainer:
    it imports torch and, through peft, bitsandbytes, whose CPU notice came first in refusals
    that then took 11-13 s. Nor of TuneBOHB's module, which the BOHB pairing check would import
    to compare classes (hpbandster, ConfigSpace, scipy.stats: 2.5-3.7 s of every sweep's start,
    measured loaded). In a fresh process, as the CLI's preflight runs."""
    code = (
        "import sys; from tests.conftest import resolved_config; from hfsweep.driver.preflight import preflight; "
        f"preflight(resolved_config([], {str(tmp_path / 'run')!r}, {str(tmp_path / 'cache')!r})); "
        "print(sorted(m for m in ('torch', 'transformers.trainer', 'peft', 'ray.tune.search.bohb') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


@pytest.mark.process
def test_a_config_the_first_checks_refuse_is_refused_before_ray_is_imported(tmp_path):
    """The preflight imports the search rules, which compile Tune's samplers: Ray's import (about
    5 s of an 8 s refusal on a slow day) waits until a space is compiled. `-X importtime` lists
    every module the process imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hfsweep", "num_samples=0", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "hfsweep: error: num_samples: must be at least 1" in result.stdout + result.stderr
    timings = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in timings}
    assert "omegaconf" in imported and "ray" not in imported


def test_a_lazily_listed_target_is_checked_without_loading_it():
    from hfsweep.config.loading import check_importable

    check_importable("transformers.Trainer")
    with pytest.raises(ImportError, match=r"^'transformers' has no 'Trainr'$"):
        check_importable("transformers.Trainr")


def test_a_checkout_that_its_python_has_not_installed_is_refused_before_ray_starts(monkeypatch):
    """Run from a checkout, `python -m hfsweep` imports hfsweep from the current folder; Ray's
    workers start elsewhere, so every trial would fail on `import hfsweep` (a GLUE resume did)."""
    import importlib.machinery
    import os

    import hfsweep
    from hfsweep.config.resources import check_hfsweep_installed

    checkout = os.path.dirname(os.path.abspath(hfsweep.__path__[0]))
    monkeypatch.chdir(checkout)
    check_hfsweep_installed()  # this test's python has it installed
    monkeypatch.setattr(sys, "meta_path", [importlib.machinery.PathFinder])  # no editable install's finder
    monkeypatch.setattr(sys, "path", ["", *(p for p in sys.path if p and os.path.abspath(p) != checkout)])
    with pytest.raises(ConfigError, match=f"current folder \\({re.escape(checkout)}\\) but is not installed for"):
        check_hfsweep_installed()


@pytest.mark.process
def test_a_training_value_the_search_space_also_sets_is_named_in_one_warning(tmp_path):
    """Two real processes, at once: the warning is the first line on stderr, then the refusal."""
    given = ["training.learning_rate=0.01", "search_space.training.learning_rate.sampler=nope"]
    on, off = [
        subprocess.Popen(
            [sys.executable, "-m", "hfsweep", *args, f"hydra.run.dir={tmp_path / name}", f"cache_dir={tmp_path}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in (("on", given), ("off", [*given, "search_alg.defaults_trial=false"]))
    ]
    on_stderr, off_stderr = on.communicate(timeout=120)[1], off.communicate(timeout=120)[1]
    assert on_stderr.strip().splitlines()[0] == (
        "hfsweep: warning: training.learning_rate is also set by search_space.training.learning_rate; it runs as the "
        "defaults trial, beside the searched values."
    )
    assert on.returncode == 2
    assert off_stderr.strip().splitlines()[0].endswith("search_space.training.learning_rate; the searched values win.")


def test_bf16_on_a_gpu_without_it_is_refused(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Tesla V100-SXM2-16GB")
    cfg = resolved_config(["cluster.use_gpu=true", "training.bf16=true"], tmp_path, tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"^training\.bf16: this GPU \(Tesla V100-SXM2-16GB\) has no bf16; use training\.fp16=true instead\.$",
    ):
        preflight(cfg)
    preflight(resolved_config(["cluster.use_gpu=true", "training.fp16=true"], tmp_path, tmp_path))


def test_relative_local_paths_are_made_absolute_for_the_trials_and_hub_names_stay_names(tmp_path, monkeypatch):
    """Trials run in Ray's working directory, not the driver's: `model.pretrained=outputs/base/best`
    must still be found there."""
    (tmp_path / "outputs" / "base").mkdir(parents=True)
    (tmp_path / "chat.jinja").write_text("{{ messages }}")
    monkeypatch.chdir(tmp_path)
    cfg = resolved_config(
        ["model.pretrained=outputs/base", "model.tokenizer.pretrained=gpt2", "task_options.chat_template=chat.jinja"],
        tmp_path / "run",
        Path("cache"),
    )
    assert cfg["model"]["pretrained"] == str(tmp_path / "outputs" / "base")
    assert cfg["task_options"]["chat_template"] == str(tmp_path / "chat.jinja")
    assert cfg["model"]["tokenizer"]["pretrained"] == "gpt2", "no local folder of that name: a hub name"
    assert cfg["cache_dir"] == str(tmp_path / "cache")


def test_a_sweep_saved_before_task_options_resumes_with_its_family_options_moved_there(tmp_path):
    """resolved_config.yaml from before `task_options` held every family's options under data.*:
    resume reads the ones it set away from their defaults as task options, and the rest are gone."""
    import yaml

    from hfsweep.config.saved import saved_config
    from hfsweep.run_dir import RESOLVED_CONFIG, write_config

    cfg = resolved_config(["+experiment=bert_squad_offline", f"data.path={tmp_path}"], tmp_path / "run", tmp_path)
    old = {**cfg, "data": {**cfg["data"], "doc_stride": 48, "mlm_probability": 0.15, "packing": False}}
    del old["task_options"]
    write_config(str(tmp_path), old)
    assert "doc_stride" in yaml.safe_load((tmp_path / RESOLVED_CONFIG).read_text())["data"]
    resumed = saved_config(str(tmp_path))
    assert resumed["task_options"] == {"doc_stride": 48}
    assert not {"doc_stride", "mlm_probability", "packing"} & set(resumed["data"])
    assert preflight(resumed).task.doc_stride == 48


@pytest.mark.parametrize(
    "override",
    [
        "budget.trial_hours=10",
        "scheduler.grace_period=5",
        "num_samples=3",
        "search_alg.random_state=7",
        "cluster.price_per_cpu_hour=3",
        "cluster.max_concurrent_trials=1",
        "cluster.max_failures=3",
        "cluster.num_workers=3",
    ],
)
def test_resume_refuses_what_tune_restores_as_saved_even_with_force(tmp_path, override):
    """Tune's restore brings back the pickled scheduler, searcher and its concurrency limit,
    stoppers, retries and budget (a USD budget with its price, a trial-hours one with the resources
    it bills): an override of them would be thrown away, so it is refused in one line, --force or not."""
    from hfsweep.config.saved import saved_config
    from hfsweep.run_dir import write_config

    saved = {
        "cluster.price_per_cpu_hour=3": ["budget.usd=5", "cluster.price_per_cpu_hour=2"],
        "cluster.num_workers=3": ["budget.trial_hours=10"],
    }.get(override, [])
    write_config(str(tmp_path), resolved_config(saved, tmp_path / "run", tmp_path))
    key = override.lstrip("+").split("=")[0]
    with pytest.raises(ConfigError, match=rf"^resume: {re.escape(key)} cannot change on resume, --force or not"):
        saved_config(str(tmp_path), [override.lstrip("+")], force=True)
    assert saved_config(str(tmp_path), ["training.max_steps=50"], force=True)["training"]["max_steps"] == 50


def test_debug_tiny_keeps_the_searched_values_the_command_line_gives(tmp_path):
    """A test (or a user) adds to `debug=tiny` what its run is about: those values stay."""
    cfg = resolved_config(
        [
            "debug=tiny",
            "+experiment=gpt2_lora_wikitext",
            "search_space.peft.r.values=[4,8]",
            "search_space.training.learning_rate.values=[1e-3,1e-2]",
        ],
        tmp_path,
        tmp_path,
    )
    assert cfg["search_space"]["peft"]["r"]["values"] == [4, 8]
    assert cfg["search_space"]["training"]["learning_rate"]["values"] == [1e-3, 1e-2]


@pytest.mark.parametrize("strategy", ["fsdp", "deepspeed_zero2", "deepspeed_zero3"])
def test_a_one_worker_trial_that_shards_drives_a_worker_group_for_its_process_group(strategy, tmp_path):
    """transformers refuses FSDP in Train's local mode ("Using fsdp only works in distributed
    training", an H200 run of benchmarks/gpu.py): with no process group a world of one is not
    distributed. A Train worker group of one sets one up, as torchrun does."""
    overrides = [f"strategy={strategy}", "cluster.use_gpu=true", "cluster.num_gpus=1", "cluster.num_workers=1"]
    cfg = resolved_config(overrides, tmp_path, tmp_path)
    cluster, strategy = typed(ClusterConfig, cfg["cluster"]), typed(StrategyConfig, cfg["strategy"])
    assert not trains_in_process(cluster, strategy)
    assert trial_resources(cluster, strategy) == {"CPU": 2, "GPU": 1}
    assert trial_shape(cluster, strategy) == "1 CPU for the trial + 1 worker"
    ddp = resolved_config(["cluster.num_workers=1"], tmp_path, tmp_path)
    assert trains_in_process(typed(ClusterConfig, ddp["cluster"]), typed(StrategyConfig, ddp["strategy"]))
