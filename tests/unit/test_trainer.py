"""The Trainer a worker builds: its class and arguments from config, advanced TrainingArguments
passed through untouched, and the classification metrics computed locally."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import default_collate
from transformers import Trainer

from hfsweep.config.schema import ModelConfig, typed
from hfsweep.contract.recipe import TrainingRecipe
from hfsweep.loops.hf_trainer import build_trainer, training_arguments
from hfsweep.loops.trainers import ClassWeightedTrainer
from hfsweep.models import build_model
from hfsweep.tasks import get_task
from hfsweep.tasks.sequence_classification import TASK as CLASSIFICATION
from tests.conftest import resolved_config, sweep_config

ADVANCED = [
    "+training.optim=adafactor",
    "+training.gradient_accumulation_steps=4",
    "training.lr_scheduler_type=cosine",
    "+training.neftune_noise_alpha=5.0",
    "+training.log_level=warning",
]


class OneToken:
    """The only tokenizer facts build_model needs: vocabulary size and special token ids."""

    bos_token_id = eos_token_id = None
    pad_token_id = 0

    def __len__(self):
        return 50


def trainer_from(overrides: list[str], tmp_path) -> Trainer:
    sweep = sweep_config(["model=bert_tiny", "eval_metrics=[accuracy,f1]", *overrides], tmp_path, tmp_path)
    task = get_task(sweep.model.task)
    model = build_model(sweep.model, OneToken(), ["negative", "positive"], task=task)
    args = training_arguments(TrainingRecipe.of(sweep), str(tmp_path / "out"), task)
    validation = [{"input_ids": torch.arange(1, 13), "labels": torch.tensor(1)}]
    return build_trainer(
        TrainingRecipe.of(sweep),
        task,
        model=model,
        tokenizer=None,
        args=args,
        train_dataset=None,
        eval_dataset=validation,
        callbacks=[],
    )


def test_advanced_training_arguments_reach_the_trainer_untouched(tmp_path):
    trainer = trainer_from(ADVANCED, tmp_path)
    assert type(trainer) is Trainer
    assert trainer.args.optim == "adafactor"
    assert trainer.args.gradient_accumulation_steps == 4
    assert trainer.args.lr_scheduler_type == "cosine"
    assert trainer.args.neftune_noise_alpha == 5.0
    assert trainer.args.log_level == "warning"
    assert trainer.model.config.id2label == {0: "negative", 1: "positive"}


def test_a_custom_trainer_class_from_config_weights_the_loss(tmp_path):
    trainer = trainer_from(["trainer=class_weighted", "trainer.class_weights=[1.0,4.0]"], tmp_path)
    assert isinstance(trainer, ClassWeightedTrainer)
    torch.manual_seed(0)
    inputs = {"input_ids": torch.randint(1, 50, (6, 12)), "labels": torch.tensor([0, 1, 1, 0, 0, 1])}
    trainer.model.eval()
    loss, outputs = trainer.compute_loss(trainer.model, dict(inputs), return_outputs=True)
    weighted = F.cross_entropy(outputs.logits, inputs["labels"], weight=torch.tensor([1.0, 4.0]))
    assert loss.item() == pytest.approx(weighted.item())
    assert loss.item() != pytest.approx(F.cross_entropy(outputs.logits, inputs["labels"]).item())


def test_class_weighted_trainer_needs_its_weights(tmp_path):
    from hfsweep.config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"trainer\.class_weights: has no value \(\?\?\?\)"):
        trainer_from(["trainer=class_weighted"], tmp_path)


def test_classification_scores_the_argmax_of_the_logits_binary_for_two_classes_macro_over_more():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    labels = np.array([0, 1, 0, 1])
    assert CLASSIFICATION.compute_metrics(["accuracy", "f1"])((logits, labels)) == {"accuracy": 0.5, "f1": 0.5}
    three = np.eye(3)[[0, 1, 2, 2]]
    assert CLASSIFICATION.compute_metrics(["f1"])((three, np.array([0, 1, 2, 0])))["f1"] == pytest.approx(
        (2 / 3 + 1 + 2 / 3) / 3
    )
    scores = np.array([[0.5], [1.5], [2.5]])  # one output: a regression (STS-B), scored as it is
    assert CLASSIFICATION.compute_metrics(["pearsonr"])((scores, np.array([1.0, 2.0, 3.0])))[
        "pearsonr"
    ] == pytest.approx(1.0)
    assert CLASSIFICATION.compute_metrics([]) is None


def test_resumed_hyperparameters_keep_the_schedules_progress_and_a_plateau_schedules_reductions():
    from transformers import get_scheduler

    from hfsweep.loops.common import apply_hyperparameters

    def optimizer():
        return torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)

    linear = optimizer()
    schedule = get_scheduler("linear", linear, num_warmup_steps=0, num_training_steps=10)
    for _ in range(5):
        linear.step()
        schedule.step()
    apply_hyperparameters(linear, schedule, {"learning_rate": 4e-3})  # an exploited trial's own lr, half-way down
    assert linear.param_groups[0]["lr"] == pytest.approx(2e-3) and schedule.get_last_lr() == [pytest.approx(2e-3)]

    plateau = optimizer()
    schedule = get_scheduler("reduce_lr_on_plateau", plateau, scheduler_specific_kwargs={"patience": 0, "factor": 0.5})
    schedule.step(1.0)
    schedule.step(2.0)  # worse: one reduction
    apply_hyperparameters(plateau, schedule, {"learning_rate": 1e-3})  # its own checkpoint's values
    assert plateau.param_groups[0]["lr"] == pytest.approx(5e-4)


def test_an_exploited_trial_trains_with_its_own_weight_decay_over_a_donor_that_had_none():
    """PBT copies a donor trained with weight_decay=0.0 (a value search_space=finetune searches)
    into a trial with 0.1: the decayed group takes 0.1; the biases' group stays undecayed."""
    from transformers import get_scheduler

    from hfsweep.loops.common import apply_hyperparameters, hyperparameters_in_effect

    model = torch.nn.Linear(2, 2)
    donor = torch.optim.AdamW(
        [{"params": [model.weight], "weight_decay": 0.0}, {"params": [model.bias], "weight_decay": 0.0}], lr=1e-3
    )  # the Trainer's grouping, as the donor saved it
    schedule = get_scheduler("linear", donor, num_warmup_steps=0, num_training_steps=10)
    donor.step()
    schedule.step()
    apply_hyperparameters(donor, schedule, {"learning_rate": 1e-3, "weight_decay": 0.1})
    assert [group["weight_decay"] for group in donor.param_groups] == [0.1, 0.0]
    assert hyperparameters_in_effect(donor)["weight_decay_in_effect"] == 0.1


def test_the_accelerate_loop_decays_the_parameters_the_trainer_decays(tmp_path):
    """The Trainer's rule goes by name and layer type: Swin's 2-D `relative_position_bias_table`
    is not decayed, though it is a matrix."""
    from transformers import SwinConfig, SwinForImageClassification, Trainer, TrainingArguments

    from hfsweep.loops.accelerate import _optimizer

    model = SwinForImageClassification(
        SwinConfig(image_size=8, patch_size=2, embed_dim=8, depths=[1], num_heads=[2], window_size=2, num_labels=2)
    )
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[]))
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    decayed = {
        names[id(parameter)]
        for parameter in _optimizer(model, {"weight_decay": 0.01, "learning_rate": 1e-3}).param_groups[0]["params"]
    }
    assert decayed == set(trainer.get_decay_parameter_names(model))
    assert any("relative_position_bias_table" in name for name in set(names.values()) - decayed)


@pytest.mark.parametrize("skipped", [False, True])
def test_the_accelerate_loop_holds_the_schedule_on_a_step_the_loss_scaler_skipped(monkeypatch, skipped):
    """As the Trainer does, the schedule steps only when the optimizer did: fp16's loss scaler skips
    a step whose gradients overflowed. A CPU has no loss scaler, so the skip is Accelerate's own
    flag (`optimizer_step_was_skipped`) set by hand."""
    from accelerate import Accelerator
    from transformers import get_scheduler

    from hfsweep.loops.accelerate import step_optimizer

    monkeypatch.setattr(Accelerator, "optimizer_step_was_skipped", property(lambda self: skipped))
    accelerator = Accelerator(cpu=True, step_scheduler_with_optimizer=False)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    schedule = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=10)
    model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
    model(torch.ones(1, 2)).sum().backward()
    step_optimizer(accelerator, model, optimizer, schedule, max_grad_norm=1.0)
    assert schedule.get_last_lr()[0] == pytest.approx(1e-3 if skipped else 9e-4)


def three_layer_gpt2(model_cfg, tokenizer, label_names):
    """A model factory of a user's: the architecture's sizes its own."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=3, n_embd=32, n_head=2, n_positions=16))


def highest_logit_share(eval_pred) -> dict:
    """A compute_metrics of a user's: how often class 1 has the higher logit."""
    logits, _ = eval_pred
    return {"positive_share": float((np.argmax(logits, axis=-1) == 1).mean())}


def test_a_model_factory_from_config_builds_the_model(tmp_path):
    cfg = resolved_config(["+model.factory._target_=tests.unit.test_trainer.three_layer_gpt2"], tmp_path, tmp_path)
    model = build_model(typed(ModelConfig, cfg["model"]), OneToken(), task=get_task(cfg["model"]["task"]))
    assert model.config.n_layer == 3 and model.loss_type == "ForCausalLM"


class CountingCollator:
    """A data collator of a user's, built with the tokenizer: the default one, counting its batches."""

    batches = 0

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        from transformers import default_data_collator

        CountingCollator.batches += 1
        return default_data_collator(features)


def test_compute_metrics_and_data_collator_from_config_reach_the_trainer(tmp_path):
    overrides = [
        "+compute_metrics._target_=tests.unit.test_trainer.highest_logit_share",
        "+data_collator._target_=tests.unit.test_trainer.CountingCollator",
        "metric=eval_positive_share",
        "mode=max",
    ]
    trainer = trainer_from(overrides, tmp_path)
    metrics = trainer.evaluate()
    assert metrics["eval_positive_share"] in (0.0, 1.0), "the configured compute_metrics ran"
    assert CountingCollator.batches == 1, "the configured collator built the batch"


def test_the_accelerate_loop_leaves_unset_keys_at_the_trainers_own_defaults(tmp_path):
    """What a config leaves unset runs as a Trainer given the same config would run it."""
    from transformers import SchedulerType, TrainingArguments

    from hfsweep.loops.accelerate import trainer_defaults

    trainer = TrainingArguments(output_dir=str(tmp_path))
    for key, value in trainer_defaults().items():
        ran = getattr(trainer, key)
        assert (SchedulerType(value) if key == "lr_scheduler_type" else value) == ran, key


@pytest.mark.parametrize("save_when_stopped", [True, False])
def test_early_stopping_at_an_evaluation_that_is_no_save_step_saves_that_step(save_when_stopped, tmp_path):
    """Evaluations every 2 steps, saves every 6: the callback stops at step 4, and the Trainer
    saves it (the trial's last report then says it finished); without SaveWhenStopped it saves
    nothing, and the checkpoint budget would free the trial's older checkpoints as a stopped trial's."""
    from transformers import EarlyStoppingCallback

    from hfsweep.loops.hf_trainer import SaveWhenStopped

    trainer = trainer_from(
        [
            "callbacks=early_stopping",  # the best-model tracking it needs
            "training.max_steps=12",
            "training.eval_steps=2",
            "training.save_steps=6",
            "training.logging_steps=2",
        ],
        tmp_path,
    )
    trainer.train_dataset = [{"input_ids": torch.arange(1, 13), "labels": torch.tensor(i % 2)} for i in range(8)]
    trainer.data_collator = default_collate
    # no evaluation improves on the first by 100: the second, at step 4, stops the training
    trainer.add_callback(EarlyStoppingCallback(early_stopping_patience=1, early_stopping_threshold=100.0))
    if save_when_stopped:
        trainer.add_callback(SaveWhenStopped())  # after the callback that stops, as train_loop_per_worker adds it
    trainer.train()
    assert trainer.state.global_step == 4
    saved = sorted(p.name for p in (tmp_path / "out").glob("checkpoint-*"))
    assert saved == (["checkpoint-4"] if save_when_stopped else [])


def test_the_accelerate_loop_reads_a_share_of_the_steps_as_the_trainer_does(tmp_path):
    """eval_steps=0.1 of 25 steps: the Trainer evaluates every 3 steps (rounded up), and so must the
    accelerate loop, which counts in whole steps (`step % eval_steps`)."""
    from transformers import TrainingArguments
    from transformers.trainer_callback import TrainerState

    from hfsweep.loops.accelerate import STEP_KEYS, in_steps

    shares = {"warmup_steps": 0.06, "logging_steps": 0.2, "eval_steps": 0.1, "save_steps": 0.1}
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=25, eval_strategy="steps", **shares)
    state = TrainerState()
    state.compute_steps(args, max_steps=25)
    trainer_reads = {
        "warmup_steps": args.get_warmup_steps(25),
        "logging_steps": state.logging_steps,
        "eval_steps": state.eval_steps,
        "save_steps": state.save_steps,
    }
    assert (
        {key: in_steps({**shares, "max_steps": 25})[key] for key in STEP_KEYS}
        == trainer_reads
        == {
            "warmup_steps": 2,
            "logging_steps": 5,
            "eval_steps": 3,
            "save_steps": 3,
        }
    )
    assert in_steps({**shares, "eval_steps": 7, "save_steps": None, "max_steps": 25})["eval_steps"] == 7


def test_under_gradient_accumulation_a_bert_classifier_logs_the_mean_loss(tmp_path):
    """Two micro-batches per step: the Trainer must log (and train on) their mean loss, not their
    sum, which it does for a head whose forward takes **kwargs but ignores num_items_in_batch
    unless build_model says so (huggingface/transformers#47688)."""
    no_dropout = ["+model.config.hidden_dropout_prob=0.0", "+model.config.attention_probs_dropout_prob=0.0"]
    steps = ["training.max_steps=1", "training.logging_steps=1", "training.learning_rate=1e-12"]
    trainer = trainer_from(
        [*no_dropout, *steps, "+training.gradient_accumulation_steps=2", "training.per_device_train_batch_size=2"],
        tmp_path,
    )
    torch.manual_seed(0)
    examples = [{"input_ids": torch.randint(1, 50, (12,)), "labels": torch.tensor(i % 2)} for i in range(4)]
    trainer.train_dataset, trainer.data_collator = examples, default_collate
    trainer.args.dataloader_drop_last = False
    model = trainer.model
    with torch.no_grad():
        losses = [model(**default_collate(batch)).loss.item() for batch in (examples[:2], examples[2:])]
    trainer.args.seed = 0
    trainer.train()
    (logged,) = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert logged == pytest.approx(sum(losses) / 2, rel=1e-3), "the micro-batches' losses were summed"
