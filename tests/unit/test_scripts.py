"""The shell scripts the READMEs tell users to run (experiments/, .ci/run, benchmarks/) parse, and
the experiment scripts refuse to start without the folders they need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # every test here runs bash

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("experiments/**/*.sh"), *ROOT.glob("benchmarks/**/*.sh"), ROOT / ".ci" / "run"])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_script_parses(script):
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize(
    "script, variable",
    [
        ("experiments/glue/run_minilm.sh", "GLUE_DIR"),
        ("experiments/glue/rte_search_methods.sh", "GLUE_DIR"),
        ("experiments/glue/rte_warmup.sh", "GLUE_DIR"),
        ("experiments/glue/run_heldout.sh", "GLUE_DIR"),
        ("experiments/bert_conll2003/run_minilm.sh", "CONLL_DIR"),
    ],
)
def test_an_experiment_script_without_its_data_folder_says_which_to_set(script, variable):
    env = {key: value for key, value in os.environ.items() if key not in (variable, "OUT")}
    ran = subprocess.run(["bash", str(ROOT / script)], capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode != 0
    assert f"{variable}: set {variable} to" in ran.stderr


@pytest.mark.parametrize(
    "script, variable, args, stages",
    [
        ("experiments/bert_conll2003/run_minilm.sh", "CONLL_DIR", [], ["conll", "done"]),
        (
            "experiments/glue/rte_search_methods.sh",
            "GLUE_DIR",
            ["searches"],
            ["random", "tpe", "pbt", "pbt", "tpe", "random"],
        ),
        ("experiments/glue/run_heldout.sh", "GLUE_DIR", ["rte:1", "rte:2"], ["rte:1", "rte:2"]),
    ],
)
def test_an_experiment_script_logs_the_exit_status_of_each_run(tmp_path, script, variable, args, stages):
    """A run that fails is logged as failed: the status is read before `$(date)` in the echo
    that logs it replaces `$?` with its own 0."""
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 3\n")  # every run the script starts fails with status 3
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shim.parent}:{os.environ['PATH']}",
        variable: str(tmp_path / "data"),
        "OUT": str(tmp_path / "out"),
    }
    for name in ("RTE/train.tsv", "RTE/dev.tsv"):  # the GLUE files whose hashes are recorded
        (tmp_path / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / name).write_text("pairs\n")
    ran = subprocess.run(["bash", str(ROOT / script), *args], capture_output=True, text=True, env=env, timeout=60)
    logged = [line for line in ran.stdout.splitlines() if ": exit " in line]
    assert [line.split()[2].rstrip(":") for line in logged] == stages, ran.stdout
    assert all(": exit 3" in line for line in logged), ran.stdout


def test_the_held_out_script_refuses_a_job_that_is_not_task_and_seed_before_anything_runs(tmp_path):
    env = {**os.environ, "GLUE_DIR": str(tmp_path), "OUT": str(tmp_path / "out")}
    ran = subprocess.run(
        ["bash", str(ROOT / "experiments/glue/run_heldout.sh"), "rte:1", "cola:1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == ["run_heldout.sh: 'cola:1' is not TASK:SEED (TASK: rte, mrpc or stsb)"]
    assert not (tmp_path / "out" / "rte").exists()


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--bogus"],
            "gpu.sh: error: unknown argument '--bogus'; use --wheelhouse DIR, --extra-wheels DIR, --out DIR, "
            "--cpu-smoke, --steps a,b, --budget SECONDS, --gpt2-overrides 'k=v k=v'",
        ),
        (
            ["--wheelhouse", "/nonexistent/wh"],
            "gpu.sh: error: no hfsweep wheel in /nonexistent/wh; build the wheelhouse first (see the top of this "
            "script)",
        ),
    ],
)
def test_the_gpu_check_refuses_a_bad_argument_or_a_missing_wheelhouse_in_one_line(tmp_path, args, line):
    ran = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu.sh"), *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2 and ran.stderr.splitlines() == [line], ran.stderr
    assert not (tmp_path / "gpu.log").exists()


def test_extra_wheels_without_a_wheelhouse_need_hfsweep_installed_not_the_source_tree(tmp_path):
    """A second call carrying only extra wheels (bitsandbytes) goes on where an earlier call installed
    hfsweep. A Python that has it only as the source tree it runs beside (`-S`: no site-packages, so
    no installed hfsweep and no pip) is refused in one line before anything is installed."""
    args = ["--wheelhouse", "none", "--extra-wheels", str(tmp_path / "bnb"), "--out", str(tmp_path)]
    ran = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHON": f"{sys.executable} -S"},
    )
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.splitlines() == [
        "gpu.sh: error: no hfsweep wheel in none; build the wheelhouse first (see the top of this script)"
    ]
    assert not (tmp_path / "gpu.log").exists()


def test_the_gpu_check_starts_no_step_that_would_outlast_its_budget(tmp_path):
    """gpu.py gives each step what is left of --budget (the device time): a step with under 15 s
    left is not started, says so, and the run exits 1."""
    ran = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/gpu.py"),
            "--out",
            str(tmp_path),
            "--steps",
            "env,sweep",
            "--budget",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "== step env: not run, 10 s of the budget left" in ran.stdout
    assert 'sweep   FAILED {"why": "not run: 10 s of --budget left"}' in ran.stdout


def glue_script_setup(tmp_path):
    """For a GLUE experiment script: a stub `python` first on PATH that logs each run to
    tmp_path/python-ran, RTE's two files, and the environment naming them (GLUE_DIR) and OUT."""
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\necho ran >> {tmp_path}/python-ran\n")
    shim.chmod(0o755)
    data, out = tmp_path / "glue" / "RTE", tmp_path / "out"
    data.mkdir(parents=True)
    (data / "train.tsv").write_text("a\tb\n")
    (data / "dev.tsv").write_text("c\td\n")
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}", "GLUE_DIR": str(data.parent), "OUT": str(out)}
    return data, out, env


def test_the_fair_test_records_every_start_and_refuses_data_that_changed(tmp_path):
    """run_fair.sh appends each start's commit and data hashes, keeps the first start's hashes, and
    refuses a start whose data differ from them: one line, exit 2, nothing run or recorded."""
    data, out, env = glue_script_setup(tmp_path)

    def start():
        script = str(ROOT / "experiments/glue/run_fair.sh")
        return subprocess.run(["bash", script, "rte"], capture_output=True, text=True, env=env, timeout=60)

    assert start().returncode == 0 and start().returncode == 0
    first = (out / "rte.sha256").read_text()
    starts = (out / "rte.starts").read_text().splitlines()
    assert len(starts) == 6 and starts[1:3] == starts[4:6] == first.splitlines()  # date and commit, then 2 hashes
    (data / "dev.tsv").write_text("changed\n")
    refused = start()
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"run_fair.sh: the data in {data} differ from the first start's ({out}/rte.sha256); put those files back, "
        "or use a new OUT"
    ]
    assert (out / "rte.sha256").read_text() == first and len((out / "rte.starts").read_text().splitlines()) == 6
    assert (tmp_path / "python-ran").read_text().count("ran") == 2


def test_the_held_out_runs_record_each_tasks_start_once(tmp_path):
    """run_heldout.sh records a start once per task, however many of that task's search seeds it runs."""
    data, out, env = glue_script_setup(tmp_path)
    script = str(ROOT / "experiments/glue/run_heldout.sh")
    ran = subprocess.run(["bash", script, "rte:1", "rte:2"], capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "python-ran").read_text().count("ran") == 2  # both searches ran
    starts = (out / "rte.starts").read_text().splitlines()
    assert len(starts) == 3 and starts[1:] == (out / "rte.sha256").read_text().splitlines()  # date and commit, 2 hashes
