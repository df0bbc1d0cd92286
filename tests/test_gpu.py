"""The GPU paths, run only where CUDA is (`pytest -m gpu`): DDP over NCCL with bf16, FSDP,
DeepSpeed ZeRO-2 and ZeRO-3, four trials packed on one GPU, a PBT exploit under FSDP, and QLoRA
(LoRA over a 4-bit base).
On a CPU machine every test here is skipped (their refusals there are in test_config.py)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from hfsweep.driver import sweep
from hfsweep.models import weights_digest
from tests.conftest import resolved_config, save_tiny_base

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def gpu_workers() -> int:
    """Two workers per trial where the machine has two GPUs, else one."""
    import torch

    return 2 if torch.cuda.device_count() >= 2 else 1


def gpu_sweep(tmp_path, cache_dir, *overrides):
    cfg = resolved_config(["debug=tiny", "cluster.use_gpu=true", f"cluster.num_workers={gpu_workers()}", *overrides], tmp_path, cache_dir)
    results = sweep.run(cfg)
    assert results.errors == []
    return cfg, results


@pytest.mark.parametrize(
    "strategy",
    [
        "ddp",
        "fsdp",
        pytest.param("deepspeed_zero2", marks=pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="pip install 'hfsweep[deepspeed]'")),
        pytest.param("deepspeed_zero3", marks=pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="pip install 'hfsweep[deepspeed]'")),
    ],
)
def test_each_strategy_trains_a_bf16_sweep_to_the_end(ray_cluster, tmp_path, cache_dir, strategy):
    cfg, results = gpu_sweep(tmp_path, cache_dir, f"strategy={strategy}", "training.bf16=true")
    table = pd.read_csv(tmp_path / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [cfg["training"]["max_steps"]]
    assert (tmp_path / "best" / "config.json").is_file()


def test_four_single_worker_trials_share_one_gpu(ray_cluster, tmp_path, cache_dir):
    cfg = resolved_config(
        [
            "debug=tiny",
            "cluster.use_gpu=true",
            "cluster.resources_per_worker={CPU:1,GPU:0.25}",
            "search_space.training.learning_rate.values=[3e-3,1e-3,3e-4,1e-4]",
        ],
        tmp_path,
        cache_dir,
    )
    results = sweep.run(cfg)
    assert results.errors == [] and len(results) == 4
    table = pd.read_csv(tmp_path / "results.csv")
    assert set(table["ended"]) == {"completed"}


def test_pbt_under_fsdp_copies_the_donors_weights(ray_cluster, tmp_path, cache_dir):
    from transformers import AutoModelForCausalLM

    _, results = gpu_sweep(
        tmp_path, cache_dir,
        "strategy=fsdp", "scheduler=pbt", "+scheduler.synch=true", "scheduler.resample_probability=0.0",
        "search_space=learning_rate_loguniform", "num_samples=2", "training.max_steps=30", "training.lr_scheduler_type=constant",
    )
    rows = [row for result in results for _, row in result.metrics_dataframe.iterrows()]
    exploited = [r for r in rows if isinstance(r.get("resumed_from"), str)]
    assert exploited, "PBT never restored a trial"
    for row in exploited:
        assert row["resumed_weights_digest"] == weights_digest(AutoModelForCausalLM.from_pretrained(row["resumed_from"]))


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="pip install bitsandbytes")
def test_a_qlora_sweep_trains_an_adapter_over_a_4bit_base(ray_cluster, tmp_path, cache_dir):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    base = save_tiny_base(tmp_path / "base", cache_dir)
    cfg, results = gpu_sweep(tmp_path / "run", cache_dir, "peft=lora", "peft.load_in_4bit=true", "training.bf16=true",
                             f"model.pretrained={base}", f"model.tokenizer.pretrained={base}")
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [cfg["training"]["max_steps"]]
    assert all("lora_" in name for name in load_file(tmp_path / "run" / "best" / "adapter_model.safetensors")), "only the adapter is saved"
    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), tmp_path / "run" / "best")
