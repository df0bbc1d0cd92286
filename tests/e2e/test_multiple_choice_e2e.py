"""Multiple choice (run_swag.py's recipe) on a file in SWAG's own column layout: the prepared rows
hold one tokenized pair per ending, the collator pads every choice of a batch, and a sweep of the
bert_swag_offline preset learns to pick the right ending."""

from __future__ import annotations

import csv
import os
import random

from transformers import AutoModelForMultipleChoice

from hfsweep.tasks.multiple_choice import TASK
from tests.conftest import WORDS, prepare_data, resolved_config, run_sweep

SWAG_COLUMNS = [
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


SWAG_ROWS = {"train.csv": 600, "val.csv": 100}


def write_swag(folder, rows: dict = SWAG_ROWS, seed: int = 0) -> str:
    """SWAG-layout files whose right ending, at a random position, holds the context's first word
    (a wrong one never does): only a model that scores each ending can beat chance (25%)."""
    rng, words = random.Random(seed), WORDS.split()
    os.makedirs(folder, exist_ok=True)
    for name, count in rows.items():
        with open(os.path.join(folder, name), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(SWAG_COLUMNS)
            for i in range(count):
                context = [
                    words[0],
                    *rng.sample(words[1:], 3),
                ]  # one first word: a pattern a tiny model learns in tens of steps
                others = [w for w in words if w not in context]
                endings = [" ".join(rng.sample(others, 3)) for _ in range(4)]
                label = rng.randrange(4)
                endings[label] = f"{rng.choice(others)} {context[0]} {rng.choice(others)}"
                start = "then the"
                writer.writerow(
                    [f"v{i}", i, f"{' '.join(context)} {start}", " ".join(context), start, "gen", *endings, label]
                )
    return str(folder)


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
    batch = TASK.collator(cfg, tokenizer)([validation[i] for i in range(3)])
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


def test_bert_swag_offline_learns_to_pick_the_ending(ray_cluster, tmp_path, cache_dir):
    folder = write_swag(tmp_path / "swag")
    overrides = [
        "+experiment=bert_swag_offline",
        f"data.path={folder}",
        "scheduler=fifo",
        "scheduler.grace_period=null",
        "training.max_steps=80",
        "training.eval_steps=40",
        "training.save_steps=40",
        "training.logging_steps=40",
        "search_space.training.learning_rate.values=[3e-3]",
        "cluster.num_workers=1",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache_dir)
    assert results.errors == [] and len(results) == 1
    accuracy = results[0].metrics["eval_accuracy"]
    assert accuracy > 0.6, f"accuracy {accuracy:.2f} after 80 steps; chance is 0.25"
    model = AutoModelForMultipleChoice.from_pretrained(os.path.join(cfg["cluster"]["storage_path"], "best"))
    assert type(model).__name__ == "BertForMultipleChoice"
