"""Multiple choice, as transformers' examples/pytorch/multiple-choice/run_swag.py does it: each row
holds a context, the start of a second sentence and N endings; the model scores the N pairs
(context, start + ending) and is trained to pick the row's label. Scored by accuracy.

Its columns are options of the task itself, SWAG's by default (`sent1`, `sent2`, `ending0`..
`ending3`, `label`); other names through `task_options` (`task_options.ending_columns=[a,b]`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig
from hfsweep.tasks.base import Task
from hfsweep.tasks.causal_lm import token_features
from hfsweep.tasks.local_metrics import LABELS


@dataclass
class MultipleChoice(Task):
    context_column: str = "sent1"
    start_column: str = "sent2"  # the second sentence's start, which each ending completes
    ending_columns: list[str] = field(default_factory=lambda: ["ending0", "ending1", "ending2", "ending3"])
    label_column: str = "label"  # the right ending's index

    name = "multiple_choice"
    inputs = LABELS
    pads_batches = True

    def auto_model_class(self):
        from transformers import AutoModelForMultipleChoice

        return AutoModelForMultipleChoice

    def texts(self, row: dict, data_cfg: DataConfig) -> list:
        return [row[self.context_column], row[self.start_column], *(row[c] for c in self.ending_columns)]

    def label_names(self, train, data_cfg: DataConfig):
        return None  # a choice's position, not a named class

    def prepare_raw(self, raw, data_cfg: DataConfig):
        """Every column present; labels are choice positions (0..N-1), as integers."""
        from datasets import Value

        wanted = {
            "context_column": self.context_column,
            "start_column": self.start_column,
            "label_column": self.label_column,
            **{f"ending_columns[{i}]": c for i, c in enumerate(self.ending_columns)},
        }
        for split, ds in raw.items():
            for option, column in wanted.items():
                if column not in ds.column_names:
                    raise ConfigError(
                        f"task_options.{option}: '{column}' is not a column of the {split} split "
                        f"(columns: {', '.join(ds.column_names)}); give the task the column's name."
                    )
            labels = set(ds.unique(self.label_column))
            outside = sorted(str(label) for label in labels - set(range(len(self.ending_columns))))
            if outside:
                raise ConfigError(
                    f"task_options.label_column: the {split} split's '{self.label_column}' holds "
                    f"{', '.join(outside[:3])}, not positions 0..{len(self.ending_columns) - 1} of its "
                    f"{len(self.ending_columns)} endings; fix the labels."
                )
        return raw.cast_column(self.label_column, Value("int64"))

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        """Each row as N tokenized pairs (context, start + ending), truncated to data.max_length."""
        from datasets import Features, List, Value

        n, length = len(self.ending_columns), data_cfg.max_length
        padding, padded_length = self.padding(data_cfg)

        def encode(batch: dict) -> dict:
            firsts = [context for context in batch[self.context_column] for _ in range(n)]
            seconds = [
                f"{start} {batch[c][i]}"
                for i, start in enumerate(batch[self.start_column])
                for c in self.ending_columns
            ]
            encoded = tokenizer(firsts, seconds, padding=padding, truncation=True, max_length=length)
            grouped = {key: [values[i : i + n] for i in range(0, len(values), n)] for key, values in encoded.items()}
            return {**grouped, "labels": batch[self.label_column]}

        pair = token_features(tokenizer.model_input_names, padded_length)
        features = Features({**{key: List(feature) for key, feature in pair.items()}, "labels": Value("int64")})
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"tokenize {split}")

    def tokens_per_row(self, table):
        import numpy as np

        column = table.column("attention_mask" if "attention_mask" in table.column_names else "input_ids").to_pylist()
        count = sum if "attention_mask" in table.column_names else len
        return np.array([sum(count(choice) for choice in row) for row in column], dtype=np.int64)

    def collator(self, tokenizer, split: str, seed: int = 0):
        from transformers import DataCollatorForMultipleChoice

        return DataCollatorForMultipleChoice(tokenizer)

    def predictions_and_references(self, eval_pred, context):
        import numpy as np

        logits, labels = eval_pred
        return np.argmax(logits, axis=-1), labels, logits.shape[-1]


TASK = MultipleChoice()
