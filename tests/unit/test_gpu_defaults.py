"""The fast GPU defaults (`gpu.*`): what a GPU sweep's trials train with, each default turned off
alone, a training.* key the config sets winning, the device's own limits, and a CPU sweep trained
exactly as configured. Composed and checked on a CPU: no TrainingArguments is built for a GPU (it
would check the device), the kwargs it would get are read instead."""

from __future__ import annotations

import pytest
import torch

from hfsweep.config.errors import ConfigError
from hfsweep.contract.recipe import TrainingRecipe
from hfsweep.driver.preflight import preflight
from hfsweep.loops import accelerate, hf_trainer
from hfsweep.loops.common import GpuFeatures, attention, hardware_defaults
from hfsweep.models import build_model
from hfsweep.tasks import get_task
from tests.conftest import resolved_config, sweep_config
from tests.unit.test_trainer import OneToken

AMPERE = GpuFeatures(bf16=True, tf32=True)
VOLTA = GpuFeatures(bf16=False, tf32=False)  # a V100: neither natively
GPU = ["cluster.use_gpu=true"]
FAST_KEYS = ("tf32", "optim", "torch_compile")


def recipe(overrides: list[str], tmp_path) -> TrainingRecipe:
    return TrainingRecipe.of(sweep_config(overrides, tmp_path, tmp_path))


def trained_with(recipe: TrainingRecipe, gpu: GpuFeatures) -> dict:
    """The TrainingArguments fields both loops train with, as they put them together."""
    return {**recipe.training, **hardware_defaults(recipe, gpu)}


def trainer_kwargs(overrides: list[str], tmp_path, monkeypatch, gpu: GpuFeatures = AMPERE) -> dict:
    """The kwargs `training_arguments` hands TrainingArguments, on a worker whose GPU has `gpu`."""
    monkeypatch.setattr(GpuFeatures, "here", classmethod(lambda cls: gpu))
    monkeypatch.setattr(hf_trainer, "TrainingArguments", lambda **kwargs: kwargs)
    sweep = sweep_config(overrides, tmp_path, tmp_path)
    return hf_trainer.training_arguments(TrainingRecipe.of(sweep), str(tmp_path / "out"), get_task(sweep.model.task))


def test_a_gpu_sweeps_trainer_gets_bf16_tf32_and_fused_adamw_and_no_compile(tmp_path, monkeypatch):
    kwargs = trainer_kwargs(GPU, tmp_path, monkeypatch)
    assert kwargs["use_cpu"] is False
    assert (kwargs["bf16"], kwargs["fp16"], kwargs["tf32"], kwargs["optim"]) == (True, False, True, "adamw_torch_fused")
    assert "torch_compile" not in kwargs, "off until measured: TrainingArguments' own default (false) holds"
    assert attention(recipe(GPU, tmp_path)) == "sdpa"


@pytest.mark.parametrize(
    "override, key, value",
    [
        ("gpu.bf16=false", "bf16", False),
        ("gpu.tf32=false", "tf32", None),  # unset: torch's own default
        ("gpu.fused_adamw=false", "optim", "adamw_torch"),  # spelt out: transformers 5 defaults to the fused one
        ("gpu.torch_compile=true", "torch_compile", True),
    ],
)
def test_each_gpu_default_is_its_own_switch(tmp_path, monkeypatch, override, key, value):
    fast = trainer_kwargs(GPU, tmp_path, monkeypatch)
    switched = trainer_kwargs([*GPU, override], tmp_path, monkeypatch)
    assert switched.get(key) == value
    assert {k: v for k, v in switched.items() if k != key} == {k: v for k, v in fast.items() if k != key}


@pytest.mark.parametrize(
    "override, asked", [("gpu.attn_implementation=null", None), ("gpu.attn_implementation=eager", "eager")]
)
def test_the_attention_default_is_a_switch_too(tmp_path, override, asked):
    assert attention(recipe([*GPU, override], tmp_path)) == asked


@pytest.mark.parametrize(
    "override, key, value",
    [
        ("training.fp16=true", "bf16", False),  # fp16 asked for: no bf16 beside it
        ("training.bf16=false", "bf16", False),
        ("+training.tf32=false", "tf32", False),
        ("+training.optim=adafactor", "optim", "adafactor"),
        ("+training.torch_compile=false", "torch_compile", False),
    ],
)
def test_a_training_key_the_config_sets_wins_over_the_gpu_default(tmp_path, override, key, value):
    gpu_default = "gpu.torch_compile=true" if key == "torch_compile" else "gpu.bf16=true"
    assert trained_with(recipe([*GPU, gpu_default, override], tmp_path), AMPERE)[key] == value


def test_a_gpu_without_native_bf16_or_tf32_trains_in_fp32(tmp_path):
    """A V100 emulates bf16 slowly, and TrainingArguments refuses TF32 on it: neither is asked."""
    training = trained_with(recipe(GPU, tmp_path), VOLTA)
    assert training["bf16"] is False and "tf32" not in training
    assert training["optim"] == "adamw_torch_fused"


def test_a_cpu_sweep_trains_exactly_as_configured_even_on_a_gpu_host(tmp_path, monkeypatch):
    """bf16 is null in training/default.yaml only so that a set value can be told apart: a CPU sweep
    hands the Trainer what it did when the file said false, and asks no attention kernel."""
    cpu = recipe([], tmp_path)
    assert cpu.gpu is None and attention(cpu) is None
    for gpu in (AMPERE, VOLTA):
        assert trained_with(cpu, gpu) == {**cpu.training, "bf16": False, "fp16": False}
    kwargs = trainer_kwargs([], tmp_path, monkeypatch)
    assert kwargs["use_cpu"] is True and kwargs["bf16"] is False
    assert not set(FAST_KEYS) & set(kwargs)
    assert trained_with(recipe(["training.bf16=true"], tmp_path), VOLTA)["bf16"] is True  # autocast on CPU


def test_the_accelerate_loop_gets_the_same_choices(tmp_path, monkeypatch):
    tf32_calls = []
    monkeypatch.setattr(accelerate, "enable_tf32", tf32_calls.append)
    model = torch.nn.Linear(4, 2)

    def settings_and_optimizer(overrides):
        training = {**accelerate.trainer_defaults(), **trained_with(recipe(overrides, tmp_path), AMPERE)}
        return accelerate.accelerator_settings(training, use_gpu=True), accelerate._optimizer(model, training)

    settings, optimizer = settings_and_optimizer([*GPU, "gpu.torch_compile=true"])
    assert settings["mixed_precision"] == "bf16" and settings["cpu"] is False
    assert settings["dynamo_backend"] == "inductor"
    assert tf32_calls == [True]
    assert all(group["fused"] for group in optimizer.param_groups)

    tf32_calls.clear()
    off = ["gpu.bf16=false", "gpu.tf32=false", "gpu.fused_adamw=false"]
    settings, optimizer = settings_and_optimizer([*GPU, *off])
    assert settings["mixed_precision"] == "no" and "dynamo_backend" not in settings
    assert tf32_calls == []
    assert not any(group["fused"] for group in optimizer.param_groups)


def test_the_accelerate_loop_on_cpus_is_as_before(tmp_path):
    cpu = recipe(["loop=accelerate"], tmp_path)
    training = {**accelerate.trainer_defaults(), **trained_with(cpu, AMPERE)}
    assert accelerate.accelerator_settings(training, use_gpu=False) == {
        "cpu": True,
        "mixed_precision": "no",
        "step_scheduler_with_optimizer": False,
        "gradient_accumulation_steps": 1,
    }


@pytest.mark.parametrize(
    "overrides, asked, built",
    [
        ([], "sdpa", "sdpa"),
        ([], "eager", "eager"),
        # MPNet has no SDPA kernel: asking it would raise, so transformers' own choice (eager) stands
        (["model=roberta_tiny", "model.config.model_type=mpnet"], "sdpa", "eager"),
    ],
)
def test_the_attention_kernel_is_asked_only_of_models_that_have_it(tmp_path, overrides, asked, built):
    sweep = sweep_config(overrides, tmp_path, tmp_path)
    model = build_model(sweep.model, OneToken(), task=get_task(sweep.model.task), attention=asked)
    assert model.config._attn_implementation == built


def test_bf16_and_fp16_together_are_refused_in_one_line(tmp_path):
    cfg = resolved_config([*GPU, "training.bf16=true", "training.fp16=true"], tmp_path, tmp_path)
    with pytest.raises(
        ConfigError, match=r"^training\.fp16: training\.bf16=true is set too, [^\n]*training\.fp16=false\.$"
    ):
        preflight(cfg)


def test_flash_attention_without_its_package_is_refused_on_gpus_only(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else find_spec(name, *a)
    )
    flash = "gpu.attn_implementation=flash_attention_2"
    with pytest.raises(ConfigError, match=r"^gpu\.attn_implementation: flash_attention_2 needs [^\n]*=sdpa\.$"):
        preflight(resolved_config([*GPU, flash], tmp_path, tmp_path))
    preflight(resolved_config([flash], tmp_path, tmp_path))  # a CPU sweep asks no kernel
