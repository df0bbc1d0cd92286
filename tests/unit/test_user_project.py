"""hfsweep as a framework: a user's own configs (--config-dir, hydra.searchpath, a primary config
of their own) and code (`_target_`) from their own folder (its sweeps and the installed wheel:
tests/e2e/test_user_project_e2e.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "score_regression"


def hfsweep(*args: str, cwd: Path, timeout: int = 120, executable: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run(
        [executable, "-m", "hfsweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def write_primary_config(folder: Path) -> Path:
    """A user's primary config that pulls in hfsweep's defaults (the documented `defaults:` line)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "myproject.yaml").write_text(
        "defaults:\n  - config   # hfsweep's defaults, from pkg://hfsweep.conf\n  - _self_\n"
        "hydra:\n  searchpath:\n    - pkg://hfsweep.conf\n    - file://" + str(EXAMPLE / "conf") + "\n"
        "name: myproject\nseed: 7\n"
    )
    return folder


@pytest.mark.parametrize(
    "how",
    [
        ["--config-dir", "conf"],
        [f"hydra.searchpath=[file://{EXAMPLE / 'conf'}]"],
    ],
    ids=["config-dir", "searchpath"],
)
@pytest.mark.process
def test_a_user_config_folder_adds_experiments_models_and_search_spaces(how, tmp_path):
    proc = hfsweep(*how, "+experiment=score_regression", "--cfg", "job", cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "_target_: score_project.task.ScoreRegression" in proc.stdout  # conf/model/bert_regressor.yaml
    assert "weight_decay:" in proc.stdout.split("search_space:")[1]  # conf/search_space/score_lr.yaml
    refused = hfsweep(*how, "+experiment=score_regresion", f"hydra.run.dir={tmp_path / 'run'}", cwd=EXAMPLE)
    assert refused.returncode == 2 and not (tmp_path / "run").exists()
    options = sorted(
        [p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml")] + ["score_regression"]
    )  # hfsweep's and the user's
    assert refused.stderr.strip().splitlines() == [
        "hfsweep: error: experiment=score_regresion: no such option (did you mean 'score_regression'?); choose one of "
        f"{', '.join(options)}."
    ]


@pytest.mark.process
def test_a_user_primary_config_pulls_in_hfsweeps_defaults(tmp_path):
    folder = write_primary_config(tmp_path / "myconf")
    proc = hfsweep("--config-path", str(folder), "--config-name", "myproject", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "name: myproject" in proc.stdout and "seed: 7" in proc.stdout and "ASHAScheduler" in proc.stdout
    refused = hfsweep("--config-path", str(folder), "--config-name", "myproject", "model=bert_regresor", cwd=tmp_path)
    assert refused.returncode == 2
    assert "model=bert_regresor: no such option (did you mean 'bert_regressor'?)" in refused.stderr
