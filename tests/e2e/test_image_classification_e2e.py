"""Image classification (run_image_classification.py's recipe) on real images that ship offline:
scikit-learn's handwritten digits, a tiny ViT built from config, pixel values from a ViT image
processor where text families have a tokenizer; a short sweep of the vit_digits_offline preset
is far above chance, and best/ loads with its processor."""

from __future__ import annotations

import os

import datasets
from transformers import AutoImageProcessor, AutoModelForImageClassification

from hfsweep.data.offline import write_digits
from hfsweep.tasks.image_classification import TASK
from tests.conftest import prepare_data, resolved_config, run_sweep


def test_digits_become_pixel_values_of_the_processors_size(tmp_path):
    folder = write_digits(str(tmp_path / "digits"))
    cfg = resolved_config(
        ["+experiment=vit_digits_offline", "debug=tiny", f"data.path={folder}"], tmp_path / "run", tmp_path / "cache"
    )
    data = prepare_data(cfg)
    assert data.label_names == [str(d) for d in range(10)]
    assert (data.num_train_blocks, data.num_validation_blocks) == (
        1437,
        360,
    ) and data.num_train_tokens == 1437  # one per image
    validation = datasets.load_from_disk(data.validation_path)
    processor = TASK.load_processor(data.tokenizer_path)
    batch = TASK.collator(cfg, processor)([validation[i] for i in range(4)])
    assert tuple(batch["pixel_values"].shape) == (4, 3, 8, 8) and batch["labels"].tolist() == validation["labels"][:4]
    assert (
        -1.0 <= float(batch["pixel_values"].min()) < float(batch["pixel_values"].max()) <= 1.0
    )  # rescaled, normalised at 0.5


def test_vit_digits_offline_learns_the_digits(ray_cluster, tmp_path, cache_dir):
    folder = write_digits(str(tmp_path / "digits"))
    overrides = [
        "+experiment=vit_digits_offline",
        f"data.path={folder}",
        "scheduler=fifo",
        "scheduler.grace_period=null",
        "training.max_steps=100",
        "search_space.training.learning_rate.values=[3e-3]",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache_dir)
    assert results.errors == [] and len(results) == 1
    accuracy = results[0].metrics["eval_accuracy"]
    assert accuracy > 0.5, f"accuracy {accuracy:.2f} after 100 steps; chance is 0.10"
    best = os.path.join(cfg["cluster"]["storage_path"], "best")
    model, processor = AutoModelForImageClassification.from_pretrained(best), AutoImageProcessor.from_pretrained(best)
    assert model.config.id2label[3] == "3" and processor.size == {"height": 8, "width": 8}
