"""Select on one split, report on another, end to end: MRPC pairs in GLUE's TSV files, validation
carved from train.tsv (data.validation_split_percentage), dev.tsv held out as the test split; the
search and the selection over seeds see only the carve, and the final models of the winner and of
the defaults, each seed's, are scored once on dev.tsv."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import prepare_data, run_sweep, write_glue_pairs

COUNTS = {"train": 200, "dev": 60}


def test_the_final_models_of_the_winner_and_the_defaults_alone_are_scored_on_the_held_out_split(
    ray_cluster, tmp_path, cache_dir, capsys
):
    pairs = write_glue_pairs(tmp_path / "pairs", counts=COUNTS)
    overrides = [
        "+experiment=bert_mrpc_offline",
        "debug=tiny",
        f"data.path={pairs}",
        "data.text_column='#1 String'",
        "data.pair_column='#2 String'",
        "data.label_column=Quality",
        "+data.load_kwargs.quoting=3",
        "data.max_length=32",
        "search_alg.defaults_trial=true",
        "data.validation_split_percentage=20",
        "data.test_split=validation",
        "select.top_k=1",
        "select.seeds=[1,2]",
    ]
    cfg, _ = run_sweep(overrides, tmp_path / "run", cache_dir)
    out, run_dir = capsys.readouterr().out, tmp_path / "run"
    data = prepare_data(cfg)
    assert (data.num_train_blocks, data.num_validation_blocks) == (160, 40), "the search sees 20% of train.tsv"

    search = pd.read_csv(run_dir / "results.csv")
    assert len(search) == 2 and not [c for c in search if c.startswith("test_")], "no trial of the search is scored"
    test = json.loads((run_dir / "best.json").read_text())["test"]
    assert (test["split"], test["model"]) == ("validation", "final")
    selection = pd.read_csv(run_dir / "select" / "selection.csv")
    scored = selection["mean_test_accuracy"].notna()
    assert scored.tolist() == (selection["rank"].eq(1) | selection["defaults"]).tolist(), "the winner, the defaults"
    reruns = pd.read_csv(run_dir / "select" / "results.csv")
    for who, row in (("winner", selection.iloc[0]), ("defaults", selection[selection["defaults"]].iloc[0])):
        record = test[who]
        assert record["seeds"] == [1, 2]
        runs = record["runs"].values()
        assert [run["step"] for run in runs] == [20, 20] and all(
            r["checkpoint"].endswith("checkpoint-20") for r in runs
        )
        assert {run["trial_id"] for run in runs} <= set(reruns["trial_id"]), "the selection's runs, not the search's"
        assert row["mean_test_accuracy"] == pytest.approx(record["mean"]["test_accuracy"])
        assert f"{who}: test_accuracy = {record['mean']['test_accuracy']:.4f} (mean over seeds 1, 2" in out

    winner = test["winner"]["runs"]["1"]
    assert winner["test_accuracy"] == pytest.approx(dev_accuracy(winner["checkpoint"], pairs)), "dev.tsv, whole"
    assert out.count("held-out test split 'validation', scored once at the final models") == 1, "once, after select"
    assert "mean eval_accuracy of the final models (select.model=final)" in out
    assert "at the best checkpoints (by validation) instead, mean eval_accuracy: winner " in out
    assert "## Held-out test split" in (run_dir / "results.md").read_text()


def dev_accuracy(checkpoint: str, pairs) -> float:
    """The accuracy of a saved classifier on every pair of dev.tsv, computed here by hand."""
    import csv

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    with open(pairs / "dev.tsv", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == COUNTS["dev"]
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    encoded = tokenizer(
        [r["#1 String"] for r in rows],
        [r["#2 String"] for r in rows],
        truncation=True,
        max_length=32,
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        predicted = model(**encoded).logits.argmax(-1).numpy()
    return float(np.mean(predicted == np.array([int(r["Quality"]) for r in rows])))
