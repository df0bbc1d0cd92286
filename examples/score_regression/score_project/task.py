"""Sentence-level regression: one float `score` per text, one output unit, Pearson's r and the
mean absolute error as metrics. A `hfsweep.tasks.base.Task`, named in config by `_target_`."""

from __future__ import annotations

import numpy as np
import torch
from transformers import Trainer

from hfsweep.tasks.base import Task

METRICS = {
    "pearson": lambda preds, labels: float(np.corrcoef(preds, labels)[0, 1]) if preds.std() > 0 else 0.0,
    "mae": lambda preds, labels: float(np.abs(preds - labels).mean()),
}


class ScoreRegression(Task):
    name = "score_regression"
    columns = ("text_column", "label_column")
    metrics = tuple(METRICS)

    def auto_model_class(self):
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def model_config_kwargs(self, label_names):
        return {"num_labels": 1, "problem_type": "regression"}

    def preprocess(self, ds, tokenizer, data_cfg, split: str):  # data_cfg: hfsweep.config.schema.DataConfig
        from datasets import Features, List, Value

        text, length = data_cfg.text_column, data_cfg.max_length

        def encode(batch: dict) -> dict:
            encoded = tokenizer(batch[text], padding="max_length", truncation=True, max_length=length)
            return {**encoded, "labels": [float(score) for score in batch[data_cfg.label_column]]}

        features = Features({**{name: List(Value("int64"), length=length) for name in tokenizer.model_input_names},
                             "labels": Value("float32")})
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")

    def compute_metrics(self, names: list[str], context=None):
        if not names:
            return None

        def compute(eval_pred) -> dict:
            predictions, labels = eval_pred
            preds = np.asarray(predictions, dtype=np.float64).reshape(-1)
            return {name: METRICS[name](preds, np.asarray(labels, dtype=np.float64)) for name in names}

        return compute


class HuberTrainer(Trainer):
    """The Trainer with a Huber loss: robust to the few sentences whose score is far off."""

    def __init__(self, *args, delta: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.delta = delta

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = torch.nn.functional.huber_loss(outputs.logits.squeeze(-1), labels.to(outputs.logits.dtype),
                                              delta=self.delta)
        return (loss, outputs) if return_outputs else loss
