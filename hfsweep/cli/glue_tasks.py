"""GLUE's tasks, their names and official metrics: what the paper table and the fair test both read."""

from __future__ import annotations

from hfsweep.run_dir import last_column

# Each task's official metrics, in GLUE's order: (label, the replay.csv column of the final model's score).
OFFICIAL = {
    "cola": [("MCC", last_column("eval_matthews_correlation"))],
    "sst2": [("Acc", last_column("eval_accuracy"))],
    "mrpc": [("F1", last_column("eval_f1")), ("Acc", last_column("eval_accuracy"))],
    "stsb": [("Pearson", last_column("eval_pearson")), ("Spearman", last_column("eval_spearmanr"))],
    "qqp": [("F1", last_column("eval_f1")), ("Acc", last_column("eval_accuracy"))],
    "mnli": [("Acc matched", last_column("eval_accuracy")), ("Acc mismatched", "mismatched_eval_accuracy")],
    "qnli": [("Acc", last_column("eval_accuracy"))],
    "rte": [("Acc", last_column("eval_accuracy"))],
    "wnli": [("Acc", last_column("eval_accuracy"))],
}
NAMES = {
    "cola": "CoLA",
    "sst2": "SST-2",
    "mrpc": "MRPC",
    "stsb": "STS-B",
    "qqp": "QQP",
    "mnli": "MNLI",
    "qnli": "QNLI",
    "rte": "RTE",
    "wnli": "WNLI",
}
