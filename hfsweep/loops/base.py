"""What a training loop is, and what each loop refuses before Ray starts. Kept light (no torch):
the preflight imports it on every launch, and a loop's training code (`hf_trainer`,
`accelerate`, each exposing `train_loop_per_worker(job)`) is imported on the workers only."""

from __future__ import annotations

from hfsweep.config.errors import ConfigError
from hfsweep.config.loading import import_object
from hfsweep.config.schema import PeftMethod, SweepConfig
from hfsweep.config.validation import PLATEAU, lr_scheduler_types

# training.train_sampling_strategy on a streamed shard
SAMPLING_STRATEGIES = ("random", "sequential", "group_by_length")


class Loop:
    """One way to train a trial on a worker, and what it refuses before Ray starts (`check`). `name`
    is `loop.name` and the module under hfsweep.loops that holds its training code
    (`train_loop_per_worker(job)`), which `hfsweep.trial.train_fn` imports on the workers only."""

    name = ""

    def check(self, sweep: SweepConfig, task) -> None:
        """Refuse in one line what this loop cannot do with the config and the sweep's Task. Both
        loops read their shard as a stream, grouped by length or not."""
        strategy = sweep.training.get("train_sampling_strategy", "random")
        if strategy not in SAMPLING_STRATEGIES:
            raise ConfigError(
                f"training.train_sampling_strategy: '{strategy}' is not one of "
                f"{', '.join(SAMPLING_STRATEGIES)} (the workers stream their shards, so "
                f"batch_rebalance's whole-set planning cannot run); e.g. group_by_length."
            )
        if strategy == "group_by_length" and (not task.pads_batches or sweep.data.pad_to_max_length):
            fix = "set data.pad_to_max_length=false" if task.pads_batches else "remove it"
            raise ConfigError(
                f"training.train_sampling_strategy: group_by_length batches examples of similar length "
                f"to pad less, and every example of model.task={task.name or type(task).__name__} has "
                f"the same length here; {fix}."
            )


class HFTrainerLoop(Loop):
    """`loop=hf_trainer`: a prepared `transformers.Trainer` (or the configured subclass)."""

    name = "hf_trainer"

    def check(self, sweep: SweepConfig, task) -> None:
        super().check(sweep, task)
        self._check_sft_trainer(sweep.trainer["_target_"], task)
        if task.generates:
            self._check_generation(sweep, task)

    @staticmethod
    def _check_sft_trainer(target: str, task) -> None:
        """TRL's SFTTrainer trains on the rows model.task=sft prepares, through the subclass that
        takes a worker's Ray Data shard (TRL's own takes only a `datasets` Dataset)."""
        import sys

        if target.startswith("transformers."):  # not TRL's; importing it would take torch and peft (seconds)
            return
        trainer = import_object(target)
        sft_module = sys.modules.get("trl.trainer.sft_trainer")  # imported with the Trainer if it subclasses it
        if sft_module is None or not (isinstance(trainer, type) and issubclass(trainer, sft_module.SFTTrainer)):
            return
        if task.name != "sft":
            raise ConfigError(
                f"trainer._target_: {target} trains on chat or instruction rows, which "
                f"model.task={task.name} does not make; set model.task=sft, or trainer=default."
            )
        from hfsweep.loops.sft_trainer import RayDataSFTTrainer

        if not issubclass(trainer, RayDataSFTTrainer):
            raise ConfigError(
                f"trainer._target_: {target} takes only a `datasets` Dataset, not a worker's Ray Data "
                f"shard; use trainer=sft (or a subclass of its class)."
            )

    @staticmethod
    def _check_generation(sweep: SweepConfig, task) -> None:
        """A task scored on generated text needs a generating Trainer, and a sweep metric that
        every report carries."""
        from transformers import Seq2SeqTrainer

        from hfsweep.config.objectives import objectives_of
        from hfsweep.loops.trainers import GenerationEvalTrainer
        from hfsweep.tasks.metrics import reported_metrics

        target = sweep.trainer["_target_"]
        trainer = import_object(target)
        if sweep.eval_metrics and not issubclass(trainer, Seq2SeqTrainer):
            raise ConfigError(
                f"trainer._target_: {target} does not generate, so eval_metrics cannot be scored; "
                f"use trainer._target_=hfsweep.loops.trainers.GenerationEvalTrainer (or a Seq2SeqTrainer)."
            )
        every = sweep.trainer.get("every_k_evals", 1) if issubclass(trainer, GenerationEvalTrainer) else 1
        objectives = objectives_of(sweep.metric, sweep.mode)
        missing = [metric for metric, _ in objectives if metric not in reported_metrics(task)]
        if every > 1 and missing:
            raise ConfigError(
                f"trainer.every_k_evals: {every} generates at one evaluation in {every}, so {missing[0]} is missing "
                f"from the reports between; sweep on metric=eval_loss, or set trainer.every_k_evals=1."
            )


# The training.* keys the Accelerate loop honours, and those it may ignore (the Trainer's cadence
# and logging settings, which the config check also needs).
ACCELERATE_LOOP_KEYS = {
    "learning_rate",
    "weight_decay",
    "lr_scheduler_type",
    "warmup_steps",
    "max_steps",
    "num_train_epochs",  # under max_steps=-1, the trial turns it into its max_steps
    "seed",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "max_grad_norm",
    "eval_strategy",
    "eval_steps",
    "save_strategy",
    "save_steps",
    "bf16",
    "fp16",
    "activation_checkpointing",
    "logging_steps",
    "disable_tqdm",
    "average_tokens_across_devices",
    "train_sampling_strategy",
}


class AccelerateLoop(Loop):
    """`loop=accelerate`: a plain Accelerate loop over the model, optimizer and schedule."""

    name = "accelerate"

    def check(self, sweep: SweepConfig, task) -> None:
        super().check(sweep, task)
        if sweep.callbacks:
            raise ConfigError(
                "callbacks: TrainerCallbacks need loop=hf_trainer; use callbacks=none with loop=accelerate."
            )
        for key in sweep.training:
            if key not in ACCELERATE_LOOP_KEYS:
                raise ConfigError(
                    f"training.{key}: loop=accelerate does not use it; remove it, or use loop=hf_trainer."
                )
        if PLATEAU in lr_scheduler_types(sweep.training, sweep.search_space):
            raise ConfigError(
                f"training.lr_scheduler_type: loop=accelerate steps its schedule every optimizer step, and {PLATEAU} "
                f"needs the eval metric; use another type, or loop=hf_trainer."
            )
        if sweep.peft.method is not PeftMethod.none:
            raise ConfigError(
                f"peft: loop=accelerate saves whole models, not adapters; use loop=hf_trainer with "
                f"peft={sweep.peft.method.value}."
            )
        if task.generates:
            raise ConfigError(
                f"loop=accelerate: model.task={task.name} is scored on generated text, which the "
                f"hf_trainer loop does; use loop=hf_trainer."
            )


LOOPS = {loop.name: loop for loop in (HFTrainerLoop(), AccelerateLoop())}


def get_loop(name: str) -> Loop:
    """The loop `loop.name` names (the schema's `LoopName` is the closed set of them)."""
    return LOOPS[name]
