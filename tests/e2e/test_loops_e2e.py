"""The two training loops train alike: the same config gives the same loss curve under
`loop=hf_trainer` and `loop=accelerate`, in one process and with two workers on their own shards,
and each worker reports that it trained as configured (on CPU, float32 weights under bf16 autocast)."""

from __future__ import annotations

import pytest

from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from tests.conftest import resolved_config, run_sweep, write_glue_pairs

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
    results = run_sweep([f"loop={loop}", *SAME_RUN], storage, cache_dir)[1]
    assert results.errors == []
    history = results[0].metrics_dataframe
    ran = history[["device", "param_dtype", "autocast_dtype", "distributed"]].drop_duplicates().to_dict("records")
    assert ran == [{"device": "cpu", "param_dtype": "float32", "autocast_dtype": "bfloat16", "distributed": "NO"}], (
        f"{loop} ran {ran}"
    )
    assert (history["peak_memory_mb"] > 0).all()
    return list(zip(history["step"], history["loss"], history["eval_loss"], history["learning_rate"]))


def test_both_loops_give_the_same_loss_curve(ray_cluster, tmp_path, cache_dir):
    """The same losses, and the same learning rate logged: the one the last logged step trained at."""
    trainer = loss_curve("hf_trainer", tmp_path / "hf_trainer", cache_dir)
    accelerate = loss_curve("accelerate", tmp_path / "accelerate", cache_dir)
    assert [step for step, *_ in trainer] == [step for step, *_ in accelerate] == [6, 10]
    for (step, loss_t, eval_t, lr_t), (_, loss_a, eval_a, lr_a) in zip(trainer, accelerate):
        assert loss_a == pytest.approx(loss_t, rel=2e-3), f"training loss differs at step {step}"
        assert eval_a == pytest.approx(eval_t, rel=2e-3), f"eval loss differs at step {step}"
        assert lr_a == pytest.approx(lr_t, rel=1e-9), f"logged learning rate differs at step {step}"


# Dropout off: the two loops draw dropout masks at different places in torch's RNG (the Trainer's
# DataLoader takes a base seed from it each epoch; the Accelerate loop has no DataLoader for its
# stream), so with dropout on their curves part within a few steps. lr 1e-3: at SAME_RUN's 3e-3 this
# tiny model's eval loss spikes near step 9 (to about 7, in both loops), which magnifies any rounding.
TWO_WORKERS = [
    "cluster.num_workers=2",
    "search_space.training.learning_rate.values=[1e-3]",
    "+model.config.resid_pdrop=0",
    "+model.config.embd_pdrop=0",
    "+model.config.attn_pdrop=0",
]


def test_with_two_workers_both_loops_train_alike(ray_cluster, tmp_path, cache_dir):
    """With two workers each trains on its own shard: both loops must average the gradients, step
    the schedule once per optimizer step and log the training loss as the mean over the workers
    (rank 0's alone would differ), so both give the same training and eval losses."""
    curves = {}
    for loop in ("hf_trainer", "accelerate"):
        results = run_sweep([f"loop={loop}", *SAME_RUN, *TWO_WORKERS], tmp_path / loop, cache_dir)[1]
        assert results.errors == []
        history = results[0].metrics_dataframe
        assert set(history["distributed"]) == {"MULTI_CPU"}, f"{loop} ran {set(history['distributed'])}"
        curves[loop] = list(zip(history["step"], history["loss"], history["eval_loss"]))
    assert [row[0] for row in curves["hf_trainer"]] == [row[0] for row in curves["accelerate"]] == [6, 10]
    for (step, loss_t, eval_t), (_, loss_a, eval_a) in zip(curves["hf_trainer"], curves["accelerate"]):
        assert loss_a == pytest.approx(loss_t, rel=2e-4), f"training loss differs at step {step}"
        assert eval_a == pytest.approx(eval_t, rel=2e-4), f"eval loss differs at step {step}"


PAIRS_RUN = [  # a classifier: examples padded per batch, grouped by length, scored by eval metrics
    "+experiment=bert_mrpc_offline",
    "data.text_column='#1 String'",
    "data.pair_column='#2 String'",
    "data.label_column=Quality",
    "+data.load_kwargs.quoting=3",
    "data.max_length=32",
    "data.max_train_samples=200",
    "cluster.num_workers=1",
    "scheduler=fifo",
    "~scheduler.grace_period",
    "search_space.training.learning_rate.values=[3e-3]",
    "search_alg.defaults_trial=false",  # one trial per loop, compared as results[0]
    "training.max_steps=8",
    "training.eval_steps=4",
    "training.save_steps=8",
    "training.logging_steps=4",
    "training.warmup_steps=0",
    "+training.train_sampling_strategy=group_by_length",
]


def test_both_loops_pad_and_group_a_classifiers_batches_alike(ray_cluster, tmp_path, cache_dir):
    folder = write_glue_pairs(tmp_path / "pairs")
    curves = {}
    for loop in ("hf_trainer", "accelerate"):
        results = sweep.run(
            preflight(resolved_config([f"loop={loop}", f"data.path={folder}", *PAIRS_RUN], tmp_path / loop, cache_dir))
        )
        assert results.errors == []
        history = results[0].metrics_dataframe
        curves[loop] = list(
            zip(history["step"], history["loss"], history["eval_loss"], history["eval_accuracy"], history["eval_f1"])
        )
    assert [row[0] for row in curves["hf_trainer"]] == [row[0] for row in curves["accelerate"]] == [8]
    for trainer, accelerate in zip(curves["hf_trainer"], curves["accelerate"]):
        assert accelerate[1:3] == pytest.approx(trainer[1:3], rel=2e-3) and accelerate[3:] == pytest.approx(
            trainer[3:], abs=1e-9
        )


def test_examples_grouped_by_length_share_batches_and_each_is_trained_once(ray_cluster):
    import random

    import ray

    from hfsweep.loops.common import MEGA_BATCHES, length_grouped

    rng = random.Random(0)
    lengths = [rng.randint(2, 100) for _ in range(4 * MEGA_BATCHES)]
    shard = ray.data.from_items([{"input_ids": list(range(n)), "row": i} for i, n in enumerate(lengths)]).iterator()
    batches = list(
        length_grouped(
            shard,
            4,
            lambda batch: batch,
            seed=0,
            shuffle={"local_shuffle_buffer_size": None, "local_shuffle_seed": None},
        )
    )
    assert sorted(row for batch in batches for row in batch["row"]) == list(range(len(lengths)))
    padded = sum(4 * max(len(ids) for ids in batch["input_ids"]) for batch in batches)
    grouped_share = sum(lengths) / padded
    random_share = sum(lengths) / sum(4 * max(lengths[i : i + 4]) for i in range(0, len(lengths), 4))
    assert grouped_share > 0.95 and random_share < 0.7, (grouped_share, random_share)
