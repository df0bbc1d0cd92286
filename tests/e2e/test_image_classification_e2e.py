"""Image classification (run_image_classification.py's recipe) on real images that ship offline:
scikit-learn's handwritten digits, a tiny ViT built from config, pixel values from a ViT image
processor where text families have a tokenizer. (Whether the preset learns: tests/e2e/test_families_learn_e2e.py.)"""

from __future__ import annotations

import datasets

from hfsweep.data.offline import write_digits
from hfsweep.tasks.data_hooks import examples_collator
from hfsweep.tasks.image_classification import TASK
from tests.conftest import prepare_data, resolved_config


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
    batch = examples_collator(TASK, cfg["data_collator"], processor)([validation[i] for i in range(4)])
    assert tuple(batch["pixel_values"].shape) == (4, 3, 8, 8) and batch["labels"].tolist() == validation["labels"][:4]
    assert (
        -1.0 <= float(batch["pixel_values"].min()) < float(batch["pixel_values"].max()) <= 1.0
    )  # rescaled, normalised at 0.5
