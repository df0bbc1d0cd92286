"""End to end: the GLUE recipe on two tiny tasks in GLUE's own TSV layout, a classification with a
second validation set (MNLI: matched and mismatched) and a regression (STS-B): a Hydra multirun
of one sweep per task (it is also the suite's test of `-m` and the multirun summary), the best
configuration replayed over two seeds, and the paper table."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hfsweep.cli import glue
from tests.conftest import NUMBERS, WORDS

MNLI_TRAIN = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label"
)
MNLI_DEV = MNLI_TRAIN.replace("label1", "label1\tlabel2\tlabel3\tlabel4\tlabel5")
STSB = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
LABELS = ("entailment", "neutral", "contradiction")


def mnli_pair(rng: random.Random, i: int) -> tuple[str, str, str]:
    """entailment: sentence2 is sentence1 with every third word dropped; neutral: other fruit
    words; contradiction: number words. A bare quote now and then, as in GLUE's files."""
    first = rng.choices(WORDS.split(), k=9)
    label = LABELS[i % 3]
    second = {
        "entailment": [w for j, w in enumerate(first) if j % 3 != 2],
        "neutral": rng.choices(WORDS.split(), k=6),
        "contradiction": rng.choices(NUMBERS.split(), k=6),
    }[label]
    if i % 7 == 3:
        first[0] = '"' + first[0]
    return " ".join(first), " ".join(second), label


def write_glue_dir(root: Path) -> Path:
    rng = random.Random(0)
    mnli = root / "MNLI"
    mnli.mkdir(parents=True)
    for name, header, count in (
        ("train", MNLI_TRAIN, 600),
        ("dev_matched", MNLI_DEV, 90),
        ("dev_mismatched", MNLI_DEV, 60),
    ):
        lines = [header]
        for i in range(count):
            first, second, label = mnli_pair(rng, i)
            if name == "dev_mismatched" and i % 4 == 0:  # another "genre": a quarter labelled unlike the training pairs
                label = LABELS[(LABELS.index(label) + 1) % 3]
            labels = label if name == "train" else "\t".join([label] * 5)
            lines.append(f"{i}\t{i}\t{i}e\tfiction\t(x)\t(y)\t(X)\t(Y)\t{first}\t{second}\t{labels}\t{label}")
        (mnli / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    stsb = root / "STS-B"
    stsb.mkdir()
    for name, count in (("train", 600), ("dev", 80)):
        lines = [STSB]
        for i in range(count):
            first = rng.choices(WORDS.split(), k=8)
            kept = rng.randint(0, 8)  # the more of sentence1 sentence2 repeats, the more similar: 0 to 5
            second = first[:kept] + rng.choices(NUMBERS.split(), k=8 - kept)
            lines.append(
                f"{i}\tmain-captions\tMSRvid\t2012test\t{i}\tnone\tnone\t"
                f"{' '.join(first)}\t{' '.join(second)}\t{5 * kept / 8:.3f}"
            )
        (stsb / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def accuracy_by_hand(checkpoint: str, dev: Path) -> float:
    """The checkpoint's accuracy on a GLUE MNLI dev file, read and scored here without hfsweep."""
    table = pd.read_csv(dev, sep="\t", quoting=3)
    classes = sorted(set(LABELS))  # string labels are classes in sorted order, as on the train split
    model, tokenizer = (
        AutoModelForSequenceClassification.from_pretrained(checkpoint),
        AutoTokenizer.from_pretrained(checkpoint),
    )
    with torch.no_grad():
        batch = tokenizer(
            list(table["sentence1"]),
            list(table["sentence2"]),
            padding="max_length",
            truncation=True,
            max_length=32,
            return_tensors="pt",
        )
        predicted = model(**batch).logits.argmax(-1).numpy()
    return float((predicted == np.array([classes.index(label) for label in table["gold_label"]])).mean())


def test_glue_recipe_sweeps_replays_and_tabulates_a_classification_and_a_regression(
    tmp_path, cache_dir, no_ray_connection
):
    glue_dir = write_glue_dir(tmp_path / "glue")
    sweep_dir = tmp_path / "multirun"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hfsweep",
            "-m",
            "+experiment=glue_tsv",
            "glue=mnli,stsb",
            "model=bert_tiny",
            "data.max_length=32",
            "training.max_steps=40",
            "training.eval_steps=20",
            "training.save_steps=20",
            "training.logging_steps=20",
            "training.warmup_steps=0",
            "training.per_device_eval_batch_size=128",
            "cluster.num_workers=1",
            "search_space.training.learning_rate.values=[3e-3]",
            "search_alg.defaults_trial=false",
            "scheduler.grace_period=20",
            f"hydra.sweep.dir={sweep_dir}",
            f"cache_dir={cache_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLUE_DIR": str(glue_dir)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Hydra's multirun: one sweep per job, in order, and one summary row each with its own metric.
    summary = pd.read_csv(sweep_dir / "multirun_summary.csv")
    assert list(summary["overrides"].str.extract(r"(glue=\w+)")[0]) == ["glue=mnli", "glue=stsb"]
    assert summary["eval_accuracy"].notna().tolist() == [True, False] and summary["eval_pearson"].notna().tolist() == [
        False,
        True,
    ]
    assert (summary["step"] == 40).all() and (sweep_dir / "multirun_summary.md").read_text().count("glue=") == 2

    assert glue.main([str(sweep_dir), "--seeds", "1", "2"]) == 0
    table = pd.read_csv(sweep_dir / "glue.csv")
    assert [tuple(r) for r in table[["task", "metric", "seeds"]].values] == [
        ("STS-B", "Pearson", 2),
        ("STS-B", "Spearman", 2),
        ("MNLI", "Acc matched", 2),
        ("MNLI", "Acc mismatched", 2),
    ]
    jobs = glue.glue_jobs(str(sweep_dir))
    replays = {
        task: pd.read_csv(Path(job, "replay", "replay.csv"), dtype={"seed": str}).set_index("seed")
        for task, job in jobs.items()
    }
    for (task, column), row in zip(
        [
            ("stsb", "last_eval_pearson"),
            ("stsb", "last_eval_spearmanr"),
            ("mnli", "last_eval_accuracy"),
            ("mnli", "mismatched_eval_accuracy"),
        ],
        table.itertuples(),
    ):
        per_seed = replays[task].loc[["1", "2"], column] * 100
        assert row.mean == pytest.approx(per_seed.mean()) and row.std == pytest.approx(per_seed.std())
    scores = table.groupby("task", sort=False)["mean"].mean()
    assert f"**{scores.mean():.1f}**" in (sweep_dir / "glue.md").read_text()

    # STS-B is a regression that learnt: one output, and its predictions follow the scores.
    stsb_best = AutoModelForSequenceClassification.from_pretrained(Path(jobs["stsb"], "best"))
    assert stsb_best.config.num_labels == 1 and stsb_best.config.problem_type == "regression"
    assert replays["stsb"].loc["mean", "last_eval_pearson"] > 0.5

    # Both MNLI accuracies are the final model's, on their own dev file, scored independently here.
    # The model learnt (above chance, 1/3, on matched), so the two files score differently and
    # reporting one set's accuracy under the other's name would show.
    results = pd.read_csv(Path(jobs["mnli"], "replay", "results.csv"), dtype={"seed": str}).set_index("seed")
    assert set(results["step"]) == {40}
    for seed in ("1", "2"):
        train_runs = Path(jobs["mnli"], "replay", "glue_mnli", "train_runs")
        checkpoint = next(train_runs.glob(f"*{results.loc[seed, 'trial_id']}*")) / "hf_checkpoints" / "checkpoint-40"
        matched, mismatched = (
            accuracy_by_hand(str(checkpoint), glue_dir / "MNLI" / f"{name}.tsv")
            for name in ("dev_matched", "dev_mismatched")
        )
        assert matched > 0.5 and matched != pytest.approx(mismatched), (seed, matched, mismatched)
        assert replays["mnli"].loc[seed, "last_eval_accuracy"] == pytest.approx(matched)
        assert replays["mnli"].loc[seed, "mismatched_eval_accuracy"] == pytest.approx(mismatched)

    # A second call reuses the finished replays and writes the same table.
    before = (sweep_dir / "glue.csv").read_text()
    assert glue.main([str(sweep_dir), "--seeds", "1", "2"]) == 0
    assert (sweep_dir / "glue.csv").read_text() == before
    assert re.search(r"STS-B +\| Pearson / Spearman +\|", (sweep_dir / "glue.md").read_text())
