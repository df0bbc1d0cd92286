"""Config composition and every validation error a user can hit before Ray starts."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from hfsweep.config import ConfigError, validate
from tests.conftest import CONF_DIR, resolved_config

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))
STRATEGIES = sorted(p.stem for p in (Path(CONF_DIR) / "strategy").glob("*.yaml"))


def experiment_overrides(experiment: str, data_dir: Path) -> list[str]:
    """An offline preset needs the folder of its local files."""
    return [f"+experiment={experiment}"] + ([f"data.path={data_dir}"] if experiment.endswith("_offline") else [])


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_resolves_and_validates(experiment, tmp_path):
    cfg = resolved_config(experiment_overrides(experiment, tmp_path), tmp_path, tmp_path)
    assert cfg["name"] == experiment
    for key in ("model", "data", "training", "scheduler", "search_alg", "cluster", "metric", "mode"):
        assert cfg[key] is not None, key
    validate(cfg)


@pytest.mark.parametrize("experiment", [e for e in EXPERIMENTS if e.endswith("_offline")])
def test_offline_presets_name_the_missing_data_folder(experiment, tmp_path):
    cfg = resolved_config([f"+experiment={experiment}"], tmp_path, tmp_path)
    with pytest.raises(ConfigError, match=r"data\.path: data\.source=local needs a folder"):
        validate(cfg)


def test_default_is_the_offline_embedded_sweep(tmp_path):
    cfg = resolved_config([], tmp_path, tmp_path)
    validate(cfg)
    assert cfg["data"]["source"] == "pydoc"
    assert cfg["model"]["pretrained"] is None and cfg["model"]["tokenizer"]["pretrained"] is None
    assert cfg["cluster"]["num_workers"] == 2
    assert cfg["scheduler"]["_target_"].endswith("ASHAScheduler")
    assert cfg["scheduler"]["max_t"] == cfg["training"]["max_steps"]
    assert len(cfg["search_space"]["training"]["learning_rate"]["values"]) >= 4


def test_gpt2_wikitext_reproduces_rays_example(tmp_path):
    cfg = resolved_config(["+experiment=gpt2_wikitext"], tmp_path, tmp_path)
    assert (cfg["data"]["source"], cfg["data"]["name"], cfg["data"]["config_name"]) == ("hub", "wikitext", "wikitext-2-raw-v1")
    assert cfg["data"]["block_size"] == 128
    assert cfg["model"]["config"]["model_type"] == "gpt2" and cfg["model"]["pretrained"] is None


def test_bert_presets_reproduce_rays_examples(tmp_path):
    yelp = resolved_config(["+experiment=bert_yelp"], tmp_path, tmp_path)
    assert (yelp["data"]["name"], yelp["data"]["text_column"], yelp["data"]["pair_column"]) == ("yelp_review_full", "text", None)
    assert yelp["data"]["max_train_samples"] == 100 and yelp["data"]["validation_split"] == "test"
    assert yelp["model"]["pretrained"] == yelp["model"]["tokenizer"]["pretrained"] == "bert-base-cased"
    assert (yelp["metric"], yelp["mode"], yelp["eval_metrics"]) == ("eval_accuracy", "max", ["accuracy"])
    mrpc = resolved_config(["+experiment=bert_mrpc"], tmp_path, tmp_path)
    assert (mrpc["data"]["name"], mrpc["data"]["config_name"]) == ("glue", "mrpc")
    assert (mrpc["data"]["text_column"], mrpc["data"]["pair_column"], mrpc["data"]["label_column"]) == ("sentence1", "sentence2", "label")
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
        validate(cfg)
        return
    needs = "DeepSpeed is not installed" if strategy.startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None else "needs GPUs"
    with pytest.raises(ConfigError, match=rf"^strategy={strategy}: {needs}; .*strategy=ddp"):
        validate(cfg)


def test_precision_and_activation_checkpointing_switches_reach_the_training_arguments(tmp_path):
    from hfsweep.worker import training_arguments

    cfg = resolved_config(["training.bf16=true", "training.activation_checkpointing=true"], tmp_path, tmp_path)
    validate(cfg)  # CPUs run bf16 through torch's autocast
    args = training_arguments(cfg, str(tmp_path))
    assert args.bf16 and not args.fp16 and args.activation_checkpointing


def test_unknown_group_option_fails_composition(tmp_path):
    with pytest.raises(ConfigCompositionException, match="scheduler"):
        resolved_config(["scheduler=nope"], tmp_path, tmp_path)


def test_misspelt_typed_key_fails_composition(tmp_path):
    with pytest.raises(ConfigCompositionException, match="num_worker"):
        resolved_config(["cluster.num_worker=2"], tmp_path, tmp_path)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+training.learning_rat=0.1"], r"training\.learning_rat: not a transformers\.TrainingArguments field \(did you mean 'learning_rate'\?\)"),
        (["+strategy.training_args.fsdp_confi=x"], r"strategy\.training_args\.fsdp_confi: not a transformers\.TrainingArguments field"),
        (["training.save_steps=15"], r"training\.save_steps \(15\): must be a multiple of training\.eval_steps \(10\)"),
        (["training.eval_strategy=no"], r"training\.eval_strategy and training\.save_strategy: both must be 'steps'"),
        (["training.max_steps=0"], r"training\.max_steps: must be a positive integer"),
        (["+training.output_dir=/x"], r"training\.output_dir: hfsweep sets this itself"),
        (["mode=maximum"], r"mode: must be 'min' or 'max', not 'maximum'"),
        (["metric=eval_acuracy"], r"^metric: no trial reports 'eval_acuracy'; choose one of eval_loss, eval_perplexity, loss\.$"),
        (["data.block_size=512"], r"data\.block_size \(512\): larger than the model's 128 positions"),
        (["data.source=local", "data.path=/no/such/dir"], r"data\.path: '/no/such/dir' does not exist"),
        (["data.source=hub"], r"data\.name: data\.source=hub needs a dataset name"),
        (["data.source=ftp"], r"data\.source: 'ftp' is not one of pydoc, hub, local"),
        (["data.datasets_to_split=[validation]"], r"^data\.datasets_to_split: \['validation'\] is neither \[train\] .* nor \[train,validation\] .*; use one of them\.$"),
        (["cluster.num_cpus=4", "cluster.num_workers=4"], r"cluster\.num_workers: one trial needs 5 CPUs"),
        (["cluster.use_gpu=true"], r"cluster\.use_gpu: this machine has no CUDA GPU"),
        (["loop=accelerate", "+training.gradient_accumulation_steps=2"], r"^training\.gradient_accumulation_steps: loop=accelerate does not use it; remove it, or use loop=hf_trainer\.$"),
        (["loop=accelerate", "callbacks=early_stopping"], r"^callbacks: TrainerCallbacks need loop=hf_trainer"),
        (["loop=accelerate", "training.lr_scheduler_type=reduce_lr_on_plateau"], r"^training\.lr_scheduler_type: loop=accelerate steps its schedule every optimizer step, and reduce_lr_on_plateau needs the eval metric; use another type, or loop=hf_trainer\.$"),
        (["model.tokenizer.kind=sentencepiece"], r"model\.tokenizer\.kind: cannot train 'sentencepiece'; use one of byte_level_bpe, wordpiece"),
        (["eval_metrics=[accuracy]"], r"eval_metrics: classification metrics need model\.task=sequence_classification"),
        (["model=bert_tiny", "eval_metrics=[auc]"], r"eval_metrics: 'auc' is not one of accuracy, f1, precision, recall"),
        (["model=bert_tiny", "metric=eval_f1", "eval_metrics=[accuracy]"], r"metric: eval_f1 is never computed; add it, e\.g\. eval_metrics=\[accuracy,f1\]"),
        (["model=bert_tiny", "data.max_length=256"], r"data\.max_length \(256\): larger than the model's 128 positions"),
    ],
)
def test_validation_errors_name_the_key_and_fix(overrides, message, tmp_path):
    cfg = resolved_config(overrides, tmp_path, tmp_path)
    with pytest.raises(ConfigError, match=message):
        validate(cfg)


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "+training.learning_rat=0.1",
            "training.learning_rat: not a transformers.TrainingArguments field (did you mean 'learning_rate'?); "
            "remove it or fix the spelling.",
        ),
        (
            "+experiment=gpt2_wikitext",
            "data: cannot load 'wikitext' from the Hugging Face hub (ConnectionError); "
            "run offline with data.source=local data.path=DIR (DIR holding train.txt and validation.txt).",
        ),
        ("stopper=threshold", "stopper.threshold.threshold: has no value (???); set it, e.g. stopper.threshold.threshold=VALUE."),
        ("scheduler=ashaa", "scheduler=ashaa: no such option in conf/scheduler/; choose one of asha, fifo, hyperband, median, pb2, pbt."),
    ],
)
def test_cli_refuses_in_one_line_with_exit_2_and_leaves_nothing(override, message, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "hfsweep", override, f"hydra.run.dir={run_dir}"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"hfsweep: error: {message}"]
    assert not run_dir.exists(), "a rejected config must leave no output behind"


def test_bf16_on_a_gpu_without_it_is_refused(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Tesla V100-SXM2-16GB")
    cfg = resolved_config(["cluster.use_gpu=true", "training.bf16=true"], tmp_path, tmp_path)
    with pytest.raises(ConfigError, match=r"^training\.bf16: this GPU \(Tesla V100-SXM2-16GB\) has no bf16; use training\.fp16=true instead\.$"):
        validate(cfg)
    validate(resolved_config(["cluster.use_gpu=true", "training.fp16=true"], tmp_path, tmp_path))
