"""The two training loops train alike: the same config gives the same loss curve under
`loop=hf_trainer` and `loop=accelerate` (one process, so no data sharding differs), and each
worker reports that it trained as configured (on CPU, float32 weights under bf16 autocast)."""

from __future__ import annotations

import pytest

from hfsweep.driver import sweep
from tests.conftest import resolved_config

pytestmark = pytest.mark.slow

# Every key the Accelerate loop must honour as the Trainer does, set away from its default.
SAME_RUN = [
    "debug=tiny",
    "search_space.training.learning_rate.values=[3e-3]",
    "training.max_steps=10",  # not a multiple of save_steps: the last step evaluates and saves too
    "training.eval_steps=3",
    "training.save_steps=6",
    "training.logging_steps=3",
    "+training.gradient_accumulation_steps=2",
    "+training.max_grad_norm=0.5",
    "+training.seed=7",
    "training.warmup_steps=2",
    "training.bf16=true",  # on CPU too: torch's autocast
]


def loss_curve(loop: str, storage, cache_dir) -> list[tuple]:
    results = sweep.run(resolved_config([f"loop={loop}", *SAME_RUN], storage, cache_dir))
    assert results.errors == []
    history = results[0].metrics_dataframe
    ran = history[["device", "param_dtype", "autocast_dtype", "distributed"]].drop_duplicates().to_dict("records")
    assert ran == [{"device": "cpu", "param_dtype": "float32", "autocast_dtype": "bfloat16", "distributed": "NO"}], f"{loop} ran {ran}"
    assert (history["peak_memory_mb"] > 0).all()
    return list(zip(history["step"], history["loss"], history["eval_loss"]))


def test_both_loops_give_the_same_loss_curve(ray_cluster, tmp_path, cache_dir):
    trainer = loss_curve("hf_trainer", tmp_path / "hf_trainer", cache_dir)
    accelerate = loss_curve("accelerate", tmp_path / "accelerate", cache_dir)
    assert [step for step, *_ in trainer] == [step for step, *_ in accelerate] == [6, 10]
    for (step, loss_t, eval_t), (_, loss_a, eval_a) in zip(trainer, accelerate):
        assert loss_a == pytest.approx(loss_t, rel=2e-3), f"training loss differs at step {step}"
        assert eval_a == pytest.approx(eval_t, rel=2e-3), f"eval loss differs at step {step}"
