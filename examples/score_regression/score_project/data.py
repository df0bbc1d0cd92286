"""Write a score-regression dataset: real English sentences from CPython's documentation, scored
by their length (words / 10), as train.csv and validation.csv.

    python -m score_project.data DIR
"""

from __future__ import annotations

import csv
import os
import sys

from hfsweep.data.offline import topic_sentences


def write(out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    for split, by_topic in topic_sentences().items():
        with open(os.path.join(out_dir, f"{split}.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence", "score"])
            for sentences in by_topic.values():
                writer.writerows([s, round(len(s.split()) / 10, 1)] for s in sentences)
    return out_dir


if __name__ == "__main__":
    print(write(sys.argv[1]))
