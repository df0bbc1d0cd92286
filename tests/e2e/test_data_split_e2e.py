"""The Accelerate loop on 2 workers with `data.datasets_to_split=[train,validation]`, as Ray's
Accelerate example runs: each worker evaluates its own Ray Data shard of the validation split, and
the reported eval loss is the whole split's. (The Trainer loop's case is the ASHA sweep of
test_sweep_e2e.)"""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from hfsweep.driver.results.evaluation import evaluate_model
from tests.conftest import prepare_data, run_sweep


def test_accelerate_on_two_workers_evaluates_each_validation_example_once(ray_cluster, tmp_path, cache_dir):
    overrides = [
        "debug=tiny",
        "loop=accelerate",
        "data.datasets_to_split=[train,validation]",
        "cluster.num_workers=2",
        "training.max_steps=10",
    ]
    cfg, results = run_sweep(overrides, tmp_path, cache_dir)
    assert results.errors == []
    final = results[0].metrics
    assert final["step"] == 10

    data = prepare_data(cfg)
    blocks = data.num_validation_blocks
    assert final["eval_samples"] == blocks - blocks % 2, (
        "every example once, in two equal shards (not twice, not once per worker)"
    )
    checkpoint = final["checkpoint_path"]
    model, tokenizer = AutoModelForCausalLM.from_pretrained(checkpoint), AutoTokenizer.from_pretrained(checkpoint)
    assert final["eval_loss"] == pytest.approx(evaluate_model(model, tokenizer, data.validation_path), rel=0.01)
