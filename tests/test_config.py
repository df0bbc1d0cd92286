"""Config composition and every validation error a user can hit before Ray starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from hfsweep.config import ConfigError, validate
from tests.conftest import CONF_DIR, resolved_config

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_resolves(experiment, tmp_path):
    cfg = resolved_config([f"+experiment={experiment}"], tmp_path, tmp_path)
    assert cfg["name"] == experiment
    for key in ("model", "data", "training", "scheduler", "search_alg", "cluster", "metric", "mode"):
        assert cfg[key] is not None, key


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
        (["data.block_size=512"], r"data\.block_size \(512\): larger than the model's 128 positions"),
        (["data.source=local", "data.path=/no/such/dir"], r"data\.path: '/no/such/dir' does not exist"),
        (["data.source=hub"], r"data\.name: data\.source=hub needs a dataset name"),
        (["data.source=ftp"], r"data\.source: 'ftp' is not one of pydoc, hub, local"),
        (["cluster.num_cpus=4", "cluster.num_workers=4"], r"cluster\.num_workers: one trial needs 5 CPUs"),
        (["cluster.use_gpu=true"], r"cluster\.use_gpu: this machine has no CUDA GPU"),
        (["loop=accelerate", "+training.gradient_accumulation_steps=2"], r"^training\.gradient_accumulation_steps: loop=accelerate does not use it; remove it, or use loop=hf_trainer\.$"),
        (["loop=accelerate", "callbacks=early_stopping"], r"^callbacks: TrainerCallbacks need loop=hf_trainer"),
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
