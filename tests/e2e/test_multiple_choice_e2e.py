"""Multiple choice (run_swag.py's recipe) on a file in SWAG's own column layout: the prepared rows
hold one tokenized pair per ending, and the collator pads every choice of a batch.
(Whether the preset learns: tests/e2e/test_families_learn_e2e.py.)"""

from __future__ import annotations

import csv
import os

from hfsweep.tasks.data_hooks import examples_collator
from hfsweep.tasks.multiple_choice import TASK
from tests.conftest import prepare_data, resolved_config, write_swag


def test_swag_rows_become_one_pair_per_ending_and_batches_pad_every_choice(tmp_path):
    folder = write_swag(tmp_path / "swag", {"train.csv": 40, "val.csv": 8})
    cfg = resolved_config(
        ["+experiment=bert_swag_offline", "debug=tiny", f"data.path={folder}"], tmp_path / "run", tmp_path / "cache"
    )
    data = prepare_data(cfg)
    import datasets

    from hfsweep.data.tokenizers import load_tokenizer

    validation = datasets.load_from_disk(data.validation_path)
    row = validation[0]
    assert len(row["input_ids"]) == 4 and validation.features["labels"].dtype == "int64"
    tokenizer = load_tokenizer(data.tokenizer_path)
    with open(os.path.join(folder, "val.csv")) as f:
        first = next(csv.DictReader(f))
    assert (
        tokenizer.decode(row["input_ids"][2], skip_special_tokens=True)
        == f"{first['sent1']} {first['sent2']} {first['ending2']}"
    )
    batch = examples_collator(TASK, cfg["data_collator"], tokenizer)([validation[i] for i in range(3)])
    assert tuple(batch["input_ids"].shape[:2]) == (3, 4) and batch["labels"].tolist() == validation["labels"][:3]
    assert data.num_train_tokens == sum(
        sum(sum(m) for m in r["attention_mask"])
        for r in datasets.concatenate_datasets(
            [
                datasets.Dataset.from_parquet(os.path.join(data.train_path, f))
                for f in sorted(os.listdir(data.train_path))
            ]
        )
    )
