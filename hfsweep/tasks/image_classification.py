"""Image classification, as transformers' examples/pytorch/image-classification/
run_image_classification.py does it: each image (RGB) becomes `pixel_values` through an image
processor (the pretrained model's, or a ViT processor at `model.config.image_size`), an
`AutoModelForImageClassification` gets one output per class of the label column, and accuracy
scores it. The processor stands where text families have a tokenizer.

Its columns are the task's own options (`image`, `label` by default, as the script's). Images come
as `datasets` stores them: a parquet file with an Image column, or the hub. `data.proxy=digits`
(the vit_digits_offline preset) writes scikit-learn's 1,797 handwritten digits (8x8, shipped with
scikit-learn) that way: `hfsweep.data.offline.write_digits`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, ModelConfig
from hfsweep.tasks.base import Task
from hfsweep.tasks.local_metrics import LABELS
from hfsweep.tasks.sequence_classification import encode_labels, refuse_missing_labels


@dataclass
class ImageClassification(Task):
    image_column: str = "image"
    label_column: str = "label"

    name = "image_classification"
    inputs = LABELS
    text_keys = ()
    counts_tokens = False  # throughput in images per second

    def auto_model_class(self):
        from transformers import AutoModelForImageClassification

        return AutoModelForImageClassification

    def prepare_processor(self, model_cfg: ModelConfig, train, data_cfg: DataConfig, cache_dir: str) -> str:
        """The pretrained model's image processor, or a ViT processor for images of the built
        model's `image_size` (rescaled to 0..1, normalised to mean and std 0.5), saved once."""
        from transformers import ViTImageProcessor

        if model_cfg.pretrained:
            return model_cfg.pretrained
        size = model_cfg.config.get("image_size", 224)
        settings = {"size": {"height": size, "width": size}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
        out = os.path.join(
            cache_dir, "processors", hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        )
        if not os.path.isdir(out):
            ViTImageProcessor(**settings).save_pretrained(out)
        return out

    def load_processor(self, path: str):
        from transformers import AutoImageProcessor

        return AutoImageProcessor.from_pretrained(path)

    def config_from_processor(self, processor) -> dict:
        return {}  # the image size and channels are model.config's

    def class_column(self, data_cfg: DataConfig) -> str:
        return self.label_column  # a task option: images have no data.label_column

    def prepare_raw(self, raw, data_cfg: DataConfig):
        """Both columns present, the labels encoded as the train split's classes in every split
        (names kept in the model's config)."""
        for split, ds in raw.items():
            for option, column in (("image_column", self.image_column), ("label_column", self.label_column)):
                if column not in ds.column_names:
                    raise ConfigError(
                        f"task_options.{option}: '{column}' is not a column of the {split} split "
                        f"(columns: {', '.join(ds.column_names)}); give the task the column's name."
                    )
        refuse_missing_labels(raw, self.label_column, "task_options.label_column")
        return encode_labels(raw, self.label_column, None, "task_options.label_column")

    def preprocess(self, ds, processor, data_cfg: DataConfig, split: str):
        """Each image as flat `pixel_values` (a fixed-length row streams through Ray Data as one
        array); the collators give them back their (channels, height, width) shape."""
        from datasets import Features, List, Value

        def encode(batch: dict) -> dict:
            images = [image.convert("RGB") for image in batch[self.image_column]]
            pixels = processor(images, return_tensors="np")["pixel_values"]
            return {"pixel_values": pixels.reshape(len(images), -1), "labels": batch[self.label_column]}

        width = 3 * processor.size["height"] * processor.size["width"]
        features = Features(
            {"pixel_values": List(Value("float32"), length=width), "labels": ds.features[self.label_column]}
        )
        return ds.map(encode, batched=True, remove_columns=ds.column_names, features=features, desc=f"process {split}")

    def tokens_per_row(self, table):
        import numpy as np

        return np.ones(table.num_rows, dtype=np.int64)  # one image: the family counts samples, not tokens

    def collator(self, processor, split: str, seed: int = 0):
        """Rows of flat pixel values as a (batch, 3, height, width) batch, with their labels."""
        import numpy as np
        import torch

        shape = (3, processor.size["height"], processor.size["width"])

        def collate(rows: list) -> dict:
            pixels = np.stack([np.asarray(row["pixel_values"], dtype=np.float32) for row in rows]).reshape(
                len(rows), *shape
            )
            return {
                "pixel_values": torch.from_numpy(pixels),
                "labels": torch.tensor([int(row["labels"]) for row in rows]),
            }

        return collate

    def predictions_and_references(self, eval_pred, context):
        import numpy as np

        logits, labels = eval_pred
        return np.argmax(logits, axis=-1), labels, logits.shape[-1]


TASK = ImageClassification()
