"""The RTE search-method comparison script, every stage run up to the start of Ray."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.unit.test_scripts import ROOT

# Stands in for `python` on the script's PATH: `python -m hfsweep ARGS` runs as the real command
# does, every check and the data's preparation included, and exits where Ray would start; every
# call is logged (not the data preparation's spawned process, which imports this file again as
# `__mp_main__`).
UP_TO_RAY = """
import os, sys
if __name__ == "__main__":
    with open(os.environ["CALLS"], "a") as calls:
        calls.write(" ".join(sys.argv[2:]) + "\\n")
if __name__ == "__main__" and sys.argv[1:3] == ["-m", "hfsweep"]:
    from hfsweep.__main__ import cli
    from hfsweep.driver import sweep

    def checked_up_to_ray(cluster):
        print("checked up to the start of Ray")
        sys.exit(0)

    sweep.init_ray = checked_up_to_ray
    sys.argv = ["hfsweep", *sys.argv[3:]]
    cli()
"""


def test_every_stage_of_the_rte_search_method_comparison_passes_its_checks(tmp_path):

    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    (tmp_path / "up_to_ray.py").write_text(UP_TO_RAY)
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "up_to_ray.py"} "$@"\n')
    shim.chmod(0o755)
    glue = tmp_path / "glue"
    (glue / "RTE").mkdir(parents=True)
    for split in ("train", "dev"):  # RTE's columns and labels
        rows = [
            f"{i}\tthe river {i} runs past the stone\tthe river runs\t{'entailment' if i % 2 else 'not_entailment'}"
            for i in range(40)
        ]
        (glue / "RTE" / f"{split}.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
    env = {
        **os.environ,
        "PATH": f"{shim.parent}:{os.environ['PATH']}",
        "GLUE_DIR": str(glue),
        "OUT": str(tmp_path / "out"),
        "CALLS": str(tmp_path / "calls"),
        "HFSWEEP_CACHE": str(tmp_path / "cache"),
    }
    script = str(ROOT / "experiments/glue/rte_search_methods.sh")

    grid = subprocess.run(["bash", script, "grid"], capture_output=True, text=True, env=env, timeout=300)
    assert "grid: exit 0" in grid.stdout, (tmp_path / "out/logs/rte_grid.log").read_text()
    assert "checked up to the start of Ray" in (tmp_path / "out/logs/rte_grid.log").read_text()
    # what the grid's summary says of its spend, which bo is given as its budget
    (tmp_path / "out/logs/rte_grid.log").write_text(
        "  budget:          1.188 of 1000 trial-hours (4276.8 trial-seconds x 1) used\n"
    )
    ran = subprocess.run(["bash", script, "bo", "pbt", "seeds"], capture_output=True, text=True, env=env, timeout=600)
    for stage in ("bo", "pbt"):
        log = (tmp_path / f"out/logs/rte_{stage}.log").read_text()
        assert f"{stage}: exit 0" in ran.stdout and "checked up to the start of Ray" in log, log
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "budget.trial_hours=1.188" in calls[1].split()
    assert [call.split()[:2] for call in calls[3:]] == [
        ["hfsweep.replay", str(tmp_path / f"out/rte_methods/{name}")] for name in ("grid", "bo", "pbt")
    ]
