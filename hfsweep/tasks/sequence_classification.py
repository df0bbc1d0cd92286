"""Sequence classification (single sentences or pairs), as run_glue.py: truncated to
`data.max_length` and padded per batch (or to `data.max_length` with `data.pad_to_max_length`,
as Ray's BERT examples pad), labels a ClassLabel taken from the training split; or, as
run_glue.py does for STS-B, a regression on a float score with one output."""

from __future__ import annotations

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig
from hfsweep.tasks.base import Task, quiet_progress
from hfsweep.tasks.causal_lm import token_features
from hfsweep.tasks.local_metrics import LABELS


def refuse_missing_labels(raw, column: str, key: str = "data.label_column") -> None:
    """One line naming the split and rows where an example has no label (a blank cell), which a
    cast would meet as a traceback, or a float column would train on as a NaN target."""
    for split, ds in raw.items():
        values = ds[column]
        missing = [row for row, value in enumerate(values) if value is None or value != value]  # None, or NaN
        if missing:
            which = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            raise ConfigError(
                f"{key}: '{column}' of the {split} split is empty in {len(missing)} of its examples ({which}, "
                f"counting from 0); label them or drop them."
            )


def encode_labels(raw, column: str, num_labels: int | None, key: str = "data.label_column"):
    """Make the label column a ClassLabel taken from the train split (integer labels count
    0..N-1, string labels are named classes), so every split and the model share the classes.
    `key`: the config key that names the column, for a refusal."""
    from datasets import ClassLabel

    feature = raw["train"].features[column]
    if not isinstance(feature, ClassLabel):
        values = set(raw["train"][column])
        numbers = sorted(str(v) for v in values if not isinstance(v, str) or _is_number(v))
        words = sorted(v for v in values if isinstance(v, str) and not _is_number(v))
        if numbers and words:
            raise ConfigError(
                f"{key}: '{column}' of the train split mixes numbers ({', '.join(numbers[:3])}) and words "
                f"({', '.join(words[:3])}); give every example a label of one kind (class ids, or class names)."
            )
        values = sorted(values)
        if values and isinstance(values[0], str):
            feature = ClassLabel(names=values)
        else:
            feature = ClassLabel(num_classes=num_labels or int(max(values)) + 1)
            # class ids: a cast would not check them, the tokenized split's features would, with a traceback
            for split in raw:
                outside = sorted(v for v in set(raw[split][column]) if not 0 <= v < feature.num_classes)
                if outside:
                    raise ConfigError(
                        f"{key}: '{column}' of the {split} split has labels outside the "
                        f"{feature.num_classes} classes of the train split ({', '.join(map(str, outside[:5]))}); "
                        f"check the data or data.num_labels."
                    )
        try:
            with quiet_progress():  # a refusal is the only line the user sees
                raw = raw.cast_column(column, feature)
        except ValueError as err:
            raise ConfigError(
                f"{key}: '{column}' has labels outside the {feature.num_classes} classes of the train "
                f"split ({err}); check the data or data.num_labels."
            ) from err
    if num_labels and feature.num_classes != num_labels:
        raise ConfigError(
            f"data.num_labels: {num_labels}, but '{column}' holds {feature.num_classes} classes; "
            f"set data.num_labels={feature.num_classes} or null."
        )
    return raw


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def is_regression(train, data_cfg: DataConfig) -> bool:
    """run_glue.py's rule: `data.num_labels: 1`, or a label column of floats (STS-B's score)."""
    from datasets import Value

    feature = train.features[data_cfg.label_column]
    return data_cfg.num_labels == 1 or (isinstance(feature, Value) and feature.dtype.startswith("float"))


class SequenceClassification(Task):
    name = "sequence_classification"
    columns = ("text_column", "pair_column", "label_column")
    inputs = LABELS
    pads_batches = True

    def auto_model_class(self):
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def model_config_kwargs(self, label_names):
        """Named classes, one output each; a regression has no classes (`label_names` None), so
        one output and the mean squared error."""
        if label_names is None:
            return {"num_labels": 1, "problem_type": "regression"}
        return super().model_config_kwargs(label_names)

    def prepare_raw(self, raw, data_cfg: DataConfig):
        refuse_missing_labels(raw, data_cfg.label_column)  # else a blank cell makes a column of floats: a regression
        if is_regression(raw["train"], data_cfg):
            from datasets import Value

            return raw.cast_column(data_cfg.label_column, Value("float32"))
        return encode_labels(raw, data_cfg.label_column, data_cfg.num_labels)

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        """Tokenize the text (and the pair) truncated to data.max_length; `labels` keeps its
        ClassLabel, so the prepared data names its classes."""
        from datasets import Features

        text, pair, length = data_cfg.text_column, data_cfg.pair_column, data_cfg.max_length
        padding, padded_length = self.padding(data_cfg)

        def encode(batch: dict) -> dict:
            encoded = tokenizer(
                batch[text], batch[pair] if pair else None, padding=padding, truncation=True, max_length=length
            )
            return {**encoded, "labels": batch[data_cfg.label_column]}

        features = Features(
            {
                **token_features(tokenizer.model_input_names, padded_length),
                "labels": ds.features[data_cfg.label_column],
            }
        )
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")

    def collator(self, tokenizer, split: str, seed: int = 0):
        from transformers import DataCollatorWithPadding

        return DataCollatorWithPadding(tokenizer)

    def predictions_and_references(self, eval_pred, context):
        """Class ids (argmax of the logits), or the score itself for a one-output regression (STS-B)."""
        import numpy as np

        logits, labels = eval_pred
        if logits.shape[-1] == 1:
            return logits.reshape(-1), labels, None
        return np.argmax(logits, axis=-1), labels, logits.shape[-1]


TASK = SequenceClassification()
