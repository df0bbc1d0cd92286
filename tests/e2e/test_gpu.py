"""The GPU paths, run only where CUDA is (`pip install -e '.[test,gpu]'`, then `pytest -m gpu`):
DDP over NCCL with bf16, FSDP, DeepSpeed ZeRO-2 and ZeRO-3, four trials packed on one GPU, a PBT
exploit under FSDP, and QLoRA (LoRA over a 4-bit base).

Every test asserts what the workers report they ran (`hfsweep.loops.common.WhatRan`: device,
parameter and autocast dtypes, Accelerate's distributed type, 4-bit modules, peak memory), not only
that the sweep completed. The strategies' tests need two GPUs, one worker on each, and skip saying
so; FSDP also runs on one GPU, in a worker group of one (`trains_in_process`).
DeepSpeed and bitsandbytes come with the `gpu` extra; without them the tests fail, never skip.
On a CPU machine every test here is skipped (their refusals there are in test_config.py)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
import torch

from hfsweep.models import weights_digest
from tests.conftest import run_sweep, save_tiny_base

pytestmark = pytest.mark.gpu

TWO_GPUS = pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason=(
        "needs two GPUs: one worker per GPU (DDP does not engage in a world of one; FSDP on one GPU is "
        "test_fsdp_engages_on_one_gpu_in_a_worker_group_of_one)"
    ),
)


def gpu_sweep(tmp_path, cache_dir, *overrides):
    cfg, results = run_sweep(["debug=tiny", "cluster.use_gpu=true", *overrides], tmp_path, cache_dir)
    assert results.errors == []
    return cfg, results


def what_ran(results) -> pd.DataFrame:
    """Every report of every trial, with what its worker said it trained with."""
    return pd.concat([result.metrics_dataframe for result in results], ignore_index=True)


def needs(module: str) -> None:
    assert importlib.util.find_spec(module) is not None, f"{module} is missing: pip install -e '.[gpu]'"


# What each strategy engages with training.bf16=true, as Accelerate decides: DDP computes under bf16
# autocast over float32 weights; FSDP (version 2) adds no autocast, its MixedPrecisionPolicy casts the
# gathered weights to bf16 for the forward (seen on an H200, benchmarks/results/gpu/ run 9);
# DeepSpeed's bf16 engine holds bf16 weights and Accelerate adds no autocast.
STRATEGIES = {
    "ddp": {"distributed": "MULTI_GPU", "param_dtype": "float32", "autocast_dtype": "bfloat16"},
    "fsdp": {"distributed": "FSDP", "param_dtype": "bfloat16", "autocast_dtype": "none"},
    "deepspeed_zero2": {"distributed": "DEEPSPEED", "param_dtype": "bfloat16", "autocast_dtype": "none"},
    "deepspeed_zero3": {"distributed": "DEEPSPEED", "param_dtype": "bfloat16", "autocast_dtype": "none"},
}


@TWO_GPUS
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_each_strategy_trains_a_bf16_sweep_on_two_gpus(ray_cluster, tmp_path, cache_dir, strategy):
    if strategy.startswith("deepspeed"):
        needs("deepspeed")
    cfg, results = gpu_sweep(tmp_path, cache_dir, f"strategy={strategy}", "training.bf16=true", "cluster.num_workers=2")
    table = pd.read_csv(tmp_path / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [cfg["training"]["max_steps"]]
    reports = what_ran(results)
    expected = {"device": "cuda", **STRATEGIES[strategy]}
    assert reports[list(expected)].drop_duplicates().to_dict("records") == [expected]
    assert (reports["peak_memory_mb"] > 0).all()


def test_fsdp_engages_on_one_gpu_in_a_worker_group_of_one(ray_cluster, tmp_path, cache_dir):
    """In Train's local mode transformers refused FSDP ("only works in distributed training", an
    H200 run of benchmarks/gpu.py); a worker group of one sets up the process group it needs."""
    _, results = gpu_sweep(tmp_path, cache_dir, "strategy=fsdp", "training.bf16=true", "cluster.num_workers=1")
    reports = what_ran(results)
    expected = {"device": "cuda", **STRATEGIES["fsdp"]}
    assert reports[list(expected)].drop_duplicates().to_dict("records") == [expected]


def test_four_bf16_trials_packed_on_one_gpu_train_on_it_at_the_same_time(ray_cluster, tmp_path, cache_dir):
    cfg, results = gpu_sweep(
        tmp_path,
        cache_dir,
        "training.bf16=true",
        "+cluster.resources_per_worker.GPU=0.25",
        "search_space.training.learning_rate.values=[3e-3,1e-3,3e-4,1e-4]",
    )
    assert len(results) == 4 and set(pd.read_csv(tmp_path / "results.csv")["ended"]) == {"completed"}
    reports = what_ran(results)
    expected = {"device": "cuda", "param_dtype": "float32", "autocast_dtype": "bfloat16", "distributed": "NO"}
    assert reports[list(expected)].drop_duplicates().to_dict("records") == [expected]
    assert (reports["peak_memory_mb"] > 0).all()
    # Tune's own timings: a trial began at its first result's timestamp less its time_total_s.
    spans = [
        (h["timestamp"].iloc[0] - h["time_total_s"].iloc[0], h["timestamp"].iloc[-1])
        for h in (r.metrics_dataframe for r in results)
    ]
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), (
        f"the four trials did not all run at once: {spans}"
    )


@TWO_GPUS
def test_pbt_under_fsdp_copies_the_donors_weights(ray_cluster, tmp_path, cache_dir):
    from transformers import AutoModelForCausalLM

    _, results = gpu_sweep(
        tmp_path,
        cache_dir,
        "strategy=fsdp",
        "cluster.num_workers=2",
        "scheduler=pbt",
        "+scheduler.synch=true",
        "scheduler.resample_probability=0.0",
        "search_space=learning_rate_loguniform",
        "num_samples=2",
        "training.max_steps=30",
        "training.lr_scheduler_type=constant",
    )
    assert set(what_ran(results)["distributed"]) == {"FSDP"}
    rows = [row for result in results for _, row in result.metrics_dataframe.iterrows()]
    exploited = [r for r in rows if isinstance(r.get("resumed_from"), str)]
    assert exploited, "PBT never restored a trial"
    for row in exploited:
        assert row["resumed_weights_digest"] == weights_digest(
            AutoModelForCausalLM.from_pretrained(row["resumed_from"])
        )


def test_a_qlora_sweep_trains_an_adapter_over_a_4bit_base(ray_cluster, tmp_path, cache_dir):
    needs("bitsandbytes")
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    base = save_tiny_base(tmp_path / "base", cache_dir)
    cfg, results = gpu_sweep(
        tmp_path / "run",
        cache_dir,
        "peft=lora",
        "peft.load_in_4bit=true",
        "training.bf16=true",
        f"model.pretrained={base}",
        f"model.tokenizer.pretrained={base}",
    )
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    assert list(table["ended"]) == ["completed"] and list(table["step"]) == [cfg["training"]["max_steps"]]
    reports = what_ran(results)
    assert (reports["linear4bit_modules"] > 0).all(), "the base's linear layers are not bitsandbytes' Linear4bit"
    assert set(reports["device"]) == {"cuda"} and set(reports["autocast_dtype"]) == {"bfloat16"}
    assert (reports["peak_memory_mb"] > 0).all()
    assert all("lora_" in name for name in load_file(tmp_path / "run" / "best" / "adapter_model.safetensors")), (
        "only the adapter is saved"
    )
    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), tmp_path / "run" / "best")


@pytest.mark.parametrize("loop", ["hf_trainer", "accelerate"])
def test_each_trial_reports_its_own_cuda_peak_memory_and_an_mfu(ray_cluster, tmp_path, cache_dir, loop):
    """Cost on a GPU: the peak is CUDA's allocation since the trial began (two trials one after
    another on one reused actor, large batches first), and MFU is estimated against the device's
    bf16 peak."""
    _, results = gpu_sweep(
        tmp_path,
        cache_dir,
        f"loop={loop}",
        "training.bf16=true",
        "cluster.max_concurrent_trials=1",
        "scheduler=fifo",  # a step is a different amount of data at each batch size
        "+search_space.training.per_device_train_batch_size={sampler:grid,values:[256,2]}",
    )
    assert len({result.metrics["pid"] for result in results}) == 1, "both trials ran in one reused actor"
    table = pd.read_csv(tmp_path / "results.csv").set_index("training.per_device_train_batch_size")
    device_mb = torch.cuda.get_device_properties(0).total_memory / 2**20
    large, small = table.loc[256, "peak_memory_mb"], table.loc[2, "peak_memory_mb"]
    assert 0 < small < large < device_mb, f"batch 2 reported {small:.0f} MB after batch 256's {large:.0f} MB"
    assert ((table["mfu"] > 0) & (table["mfu"] < 1)).all(), table["mfu"]
    print(table[["peak_memory_mb", "mfu", "train_tokens_per_second"]].to_string())
