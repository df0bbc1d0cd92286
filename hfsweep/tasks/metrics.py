"""`compute_metrics` for the Trainer, computed locally with scikit-learn (`evaluate.load` would
fetch its scripts from the hub). The Trainer prefixes each name with `eval_`, so `accuracy`
reaches Tune as `eval_accuracy`, a sweep `metric` like any other."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

CLASSIFICATION_METRICS = ("accuracy", "f1", "precision", "recall")


def _scorers() -> dict:
    from sklearn import metrics  # only where metrics are computed: it costs every worker 0.7 s to import

    return {
        "accuracy": lambda labels, preds, average: metrics.accuracy_score(labels, preds),
        "f1": lambda labels, preds, average: metrics.f1_score(labels, preds, average=average),
        "precision": lambda labels, preds, average: metrics.precision_score(labels, preds, average=average, zero_division=0),
        "recall": lambda labels, preds, average: metrics.recall_score(labels, preds, average=average, zero_division=0),
    }


def compute_metrics_for(names: list[str]) -> Optional[Callable]:
    """The Trainer's `compute_metrics` for the configured `eval_metrics`, or None for none.
    F1, precision and recall are of the positive class for two classes (as GLUE MRPC reports
    them), macro-averaged over more."""
    if not names:
        return None
    scorers = _scorers()

    def compute_metrics(eval_pred) -> dict:
        logits, labels = eval_pred
        preds = np.argmax(logits, axis=-1)
        average = "binary" if logits.shape[-1] == 2 else "macro"
        return {name: float(scorers[name](labels, preds, average)) for name in names}

    return compute_metrics
