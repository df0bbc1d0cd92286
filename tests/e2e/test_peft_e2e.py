"""LoRA sweeps: ASHA over the learning rate and the adapter's rank, checkpoints that hold only the
adapter, a crashed trial retried from its last adapter, best/ loaded onto its base (and merged),
and PBT moving adapters between trials."""

from __future__ import annotations

import os

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver.results.best import best_trial, directory_bytes
from hfsweep.driver.results.evaluation import evaluate_model
from hfsweep.models import tensors_digest
from tests.conftest import prepare_data, run_sweep, save_tiny_base

ADAPTER = "adapter_model.safetensors"


@pytest.fixture(scope="module")
def base(tmp_path_factory, cache_dir) -> str:
    return save_tiny_base(tmp_path_factory.mktemp("base"), cache_dir)


def lora(base: str) -> list[str]:
    return ["debug=tiny", "peft=lora", f"model.pretrained={base}", f"model.tokenizer.pretrained={base}"]


@pytest.fixture(scope="module")
def asha_sweep(ray_cluster, base, tmp_path_factory, cache_dir):
    overrides = [
        *lora(base),
        "scheduler=asha",
        "scheduler.grace_period=10",
        "cluster.max_concurrent_trials=1",  # 1e-5 reaches the step-10 rung after 1e-2 set it: ASHA stops it
        "search_space.training.learning_rate.values=[1e-2,1e-5]",
        "+search_space.peft.r={sampler:choice,values:[2,8]}",
        "peft.export_merged=true",
        # the first trial's process dies at step 20, before its save: Tune retries it from checkpoint-10
        "cluster.max_failures=1",
        "+callbacks.crash._target_=tests.faults.CrashMidSave",
        "+callbacks.crash.step=20",
    ]
    return run_sweep(overrides, tmp_path_factory.mktemp("lora_asha"), cache_dir)


def test_lora_trials_finish_and_asha_stops_the_slow_one(asha_sweep):
    cfg, results = asha_sweep
    assert results.errors == []
    assert sorted(r.metrics["step"] for r in results) == [10, cfg["training"]["max_steps"]]


def test_a_crashed_lora_trial_resumes_with_its_last_checkpoints_adapter(asha_sweep):
    _, results = asha_sweep
    restarts = [
        row
        for result in results
        for _, row in result.metrics_dataframe.iterrows()
        if isinstance(row.get("resumed_from"), str)
    ]
    assert len(restarts) == 1 and restarts[0]["resumed_from"].endswith("/checkpoint-10") and restarts[0]["step"] == 20
    assert restarts[0]["resumed_weights_digest"] == tensors_digest(
        load_file(os.path.join(restarts[0]["resumed_from"], ADAPTER))
    )


def test_a_checkpoint_holds_the_adapter_of_the_trials_rank_and_no_base_weight(asha_sweep, base):
    _, results = asha_sweep
    assert len(results) == 2
    for result in results:
        path = result.metrics["checkpoint_path"]
        tensors = load_file(os.path.join(path, ADAPTER))
        assert tensors and all(".lora_A." in name or ".lora_B." in name for name in tensors), sorted(tensors)[:5]
        ranks = {t.shape[0] for name, t in tensors.items() if ".lora_A." in name}
        assert ranks == {result.config["peft"]["r"]}
        assert not any(name.startswith("model.safetensors") for name in os.listdir(path))
        # weights, Adam's two moments, RNG and scheduler state, tokenizer: still under a tenth of the
        # base's weights alone
        assert directory_bytes(path) < 0.1 * os.path.getsize(os.path.join(base, "model.safetensors"))


def test_best_adapter_loads_onto_the_base_and_reproduces_its_eval_loss(asha_sweep, base):
    cfg, results = asha_sweep
    best = best_trial(results, typed(SweepConfig, cfg))
    assert best.hyperparameters["training.learning_rate"] == 1e-2
    assert best.checkpoint_bytes == directory_bytes(best.checkpoint_path)
    exported = os.path.join(cfg["cluster"]["storage_path"], "best")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), exported)
    untrained = evaluate_model(
        AutoModelForCausalLM.from_pretrained(base),
        AutoTokenizer.from_pretrained(exported),
        prepare_data(cfg).validation_path,
    )
    loss = evaluate_model(model, AutoTokenizer.from_pretrained(exported), prepare_data(cfg).validation_path)
    assert loss == pytest.approx(best.value, rel=0.01)
    assert loss < untrained - 0.05, "the adapter changed nothing"


def test_merged_export_loads_with_the_auto_class_and_gives_the_adapters_logits(asha_sweep, base):
    cfg, _ = asha_sweep
    storage = cfg["cluster"]["storage_path"]
    merged = AutoModelForCausalLM.from_pretrained(os.path.join(storage, "best_merged"))
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), os.path.join(storage, "best"))
    ids = AutoTokenizer.from_pretrained(os.path.join(storage, "best_merged"))(
        "the return statement", return_tensors="pt"
    ).input_ids
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, adapted(ids).logits, atol=1e-4)
        assert not torch.allclose(merged(ids).logits, AutoModelForCausalLM.from_pretrained(base)(ids).logits, atol=1e-4)


@pytest.fixture(scope="module")
def pbt_rows(ray_cluster, base, tmp_path_factory, cache_dir):
    overrides = [
        *lora(base),
        "scheduler=pbt",
        "scheduler.quantile_fraction=0.5",
        "scheduler.resample_probability=0.0",
        "+scheduler.synch=true",
        "search_space=learning_rate_loguniform",
        "search_space.training.learning_rate.low=1e-5",
        "+search_space.training.weight_decay={sampler:loguniform,low:0.001,high:0.1}",
        "+search_space.peft.r={sampler:choice,values:[2,8],perturb:false}",  # sampled per trial, taken from the donor
        "num_samples=2",  # debug=tiny's 20 steps: both trials meet at step 10, where the worse one is exploited
        "training.lr_scheduler_type=constant",
    ]
    results = run_sweep(overrides, tmp_path_factory.mktemp("lora_pbt"), cache_dir)[1]
    assert results.errors == []
    return [row for result in results for _, row in result.metrics_dataframe.iterrows()]


def exploited(rows) -> list:
    """(first report after an exploit, the donor's report at the checkpoint it restored)."""
    by_path = {row["checkpoint_path"]: row for row in rows}
    pairs = [(row, by_path[row["resumed_from"]]) for row in rows if isinstance(row.get("resumed_from"), str)]
    return [(row, donor) for row, donor in pairs if donor["trial_id"] != row["trial_id"]]


def test_pbt_exploit_restores_the_donors_adapter_with_the_trials_own_learning_rate(pbt_rows):
    pairs = exploited(pbt_rows)
    assert pairs, "PBT never exploited"
    for row, donor in pairs:
        assert row["resumed_weights_digest"] == tensors_digest(load_file(os.path.join(row["resumed_from"], ADAPTER)))
        assert row["config/peft/r"] == donor["config/peft/r"]  # not perturbed: the donor's adapter fits
        perturbed, donor_lr = row["config/training/learning_rate"], donor["config/training/learning_rate"]
        assert perturbed in (pytest.approx(donor_lr * 0.8), pytest.approx(donor_lr * 1.2))
        assert row["lr_in_effect"] == pytest.approx(perturbed), "the donor's learning rate is still in effect"
        assert row["weight_decay_in_effect"] == pytest.approx(row["config/training/weight_decay"])
