"""The shell scripts the READMEs tell users to run (experiments/, .ci/run, benchmarks/) parse, and
the experiment scripts refuse to start without the folders they need."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("experiments/**/*.sh"), *ROOT.glob("benchmarks/**/*.sh"), ROOT / ".ci" / "run"])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_script_parses(script):
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize("script, variable", [("experiments/glue/run_minilm.sh", "GLUE_DIR"),
                                              ("experiments/glue/rte_search_methods.sh", "GLUE_DIR"),
                                              ("experiments/bert_conll2003/run_minilm.sh", "CONLL_DIR")])
def test_an_experiment_script_without_its_data_folder_says_which_to_set(script, variable):
    env = {key: value for key, value in os.environ.items() if key not in (variable, "OUT")}
    ran = subprocess.run(["bash", str(ROOT / script)], capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode != 0
    assert f"{variable}: set {variable} to" in ran.stderr
