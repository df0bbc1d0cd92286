"""docs/tasks.md's family of one's own ("A family of your own"), run as the page writes it: a
variant of a built-in family that overrides one data method and one metrics method, named by
`model.task._target_` from the folder a sweep starts in."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- family: stars_as_score.py -->"


def write_family(folder: Path) -> Path:
    """The page's python block after MARKER, as the file it says to save."""
    text = (REPO / "docs" / "tasks.md").read_text()
    block = re.search(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.S)
    assert block, f"docs/tasks.md has no python block after {MARKER}"
    path = folder / "stars_as_score.py"
    path.write_text(block.group(1))
    return path


def load_family(path: Path):
    spec = importlib.util.spec_from_file_location("stars_as_score", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.StarsAsScore()


def test_the_variant_implements_only_what_it_changes_of_the_protocols(tmp_path):
    from typing_extensions import get_protocol_members  # typing has it from Python 3.13

    from hfsweep.contract.protocols import DataTask, MetricTask, ModelTask

    task = load_family(write_family(tmp_path))
    assert all(isinstance(task, protocol) for protocol in (DataTask, ModelTask, MetricTask))
    own = {name for name in vars(type(task)) if not name.startswith("__")}
    assert own == {"name", "prepare_raw", "predictions_and_references"}
    assert own - {"name"} <= get_protocol_members(DataTask) | get_protocol_members(MetricTask)
    scores, stars = np.array([[3.6], [-0.7], [9.0], [1.4]]), np.array([4.0, 0.0, 4.0, 2.0])
    predicted, references, classes = task.predictions_and_references((scores, stars), context=None)
    assert predicted.tolist() == [4, 0, 4, 1] and references.tolist() == [4, 0, 4, 2] and classes == 5


@pytest.mark.process
def test_a_sweep_trains_the_variant_as_one_score_and_scores_it_as_classes(tmp_path, cache_dir):
    write_family(tmp_path)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hfsweep",
            "+experiment=bert_yelp_offline",
            "debug=tiny",
            "model.task={_target_:stars_as_score.StarsAsScore}",
            f"cache_dir={cache_dir}",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(run_dir / "results.csv")
    assert list(table["ended"]) == ["completed"]
    # a float score never equals a star: accuracy above 0 is the rounding's
    assert 0 < table["last_eval_accuracy"].item() <= 1
    from transformers import AutoConfig

    best = AutoConfig.from_pretrained(run_dir / "best")
    assert best.num_labels == 1 and best.problem_type == "regression"
