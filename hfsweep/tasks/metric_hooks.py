"""A task family's metrics concern: what its predictions are for `evaluate`'s metrics, or the
metrics it computes itself, and whether it generates text to be scored. The loops and the metric
checks call these hooks (`hfsweep.contract.protocols.MetricTask`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Optional

from hfsweep.contract.protocols import EvalContext


class MetricHooks:
    """How a family's predictions are scored (by default: nothing beyond the loss)."""

    # What its predictions are for `evaluate`-named metrics (`hfsweep.tasks.local_metrics.LABELS`, TAGS,
    # ANSWERS or TEXTS); None: it predicts nothing they score (language modelling: perplexity only).
    inputs: Optional[str] = None
    metrics: tuple[str, ...] = ()  # names the task computes itself (a user task's own), instead of evaluate's
    generates = False  # evaluated on generated text: Seq2SeqTrainingArguments, and a generating Trainer for metrics
    needs_whole_validation = False  # metrics that match predictions to the validation split's rows in order
    # Its eval_loss is a mean cross-entropy over tokens (a language model's), so exp(eval_loss) is a
    # perplexity: reported as eval_perplexity, and `perplexity` may be one of its eval_metrics.
    reports_perplexity = False

    def check_metrics(self, sweep) -> None:
        """Raise ConfigError where its options do not fit the sweep's metrics (the Task checks the
        options it is given and each value a search may give one); by default any fit."""

    def predictions_and_references(self, eval_pred, context: EvalContext) -> tuple:
        """The evaluation output (`EvalPrediction`: logits or generated ids, and labels) as the
        predictions and references `evaluate`'s metrics take, and the number of classes (or None)."""
        raise NotImplementedError

    def metrics_for(
        self, compute_metrics: Optional[Mapping], eval_metrics: list, context: EvalContext
    ) -> Optional[Callable]:
        """The loops' `compute_metrics`: the config's `compute_metrics: {_target_: a function
        (eval_pred) -> {name: value}}`; else the task's metrics for `eval_metrics` (None for none)."""
        if compute_metrics:
            from hydra.utils import instantiate

            return instantiate(compute_metrics, _partial_=True)
        return self.compute_metrics(eval_metrics, context)

    def compute_metrics(self, entries: list, context: EvalContext = EvalContext()) -> Optional[Callable]:
        """The Trainer's `compute_metrics` for the configured `eval_metrics`, or None for none."""
        from functools import partial

        from hfsweep.tasks.metrics import metrics_function

        if not entries:
            return None
        return metrics_function(entries, partial(self.predictions_and_references, context=context))
