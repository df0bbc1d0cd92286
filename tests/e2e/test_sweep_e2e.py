"""End to end: a real offline sweep on real Ray, 2 DDP workers per trial over gloo, under ASHA,
each worker evaluating its Ray Data shard of the validation split."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import ray
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from hfsweep.config.schema import SweepConfig, typed
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from hfsweep.driver.results.evaluation import evaluate_model
from hfsweep.models import weights_digest
from tests.conftest import prepare_data, resolved_config, run_sweep

MAX_STEPS = 30
SWEEP = [
    f"training.max_steps={MAX_STEPS}",
    "data.datasets_to_split=[train,validation]",  # each worker evaluates its shard; the loss is still the whole split's
    "scheduler.grace_period=10",
    "search_space.training.learning_rate.values=[3e-3,1e-6]",
    # One at a time: 1e-6 reaches the step-10 rung after 3e-3 has set it, so ASHA stops it there.
    # Side by side, whichever arrived first would always continue.
    "cluster.max_concurrent_trials=1",
    "search_alg.defaults_trial=false",  # the smoke sweep's two trials: the recipe's 1e-3 would be a third
]


@pytest.fixture(scope="module")
def finished_sweep(ray_cluster, tmp_path_factory, cache_dir):
    storage = tmp_path_factory.mktemp("sweep")
    return run_sweep(SWEEP, storage, cache_dir)


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_every_trial_finishes_and_asha_stops_some(finished_sweep):
    cfg, results = finished_sweep
    assert len(results) == 2
    assert results.errors == []
    statuses = {r.path: r.metrics["step"] for r in results}
    assert all(step % cfg["training"]["eval_steps"] == 0 for step in statuses.values())
    assert sorted(statuses.values()) == [10, MAX_STEPS], "ASHA should stop 1e-6 at its first rung"
    for result in results:
        assert result.metrics["training_iteration"] == result.metrics["step"] // cfg["training"]["eval_steps"]


def test_fifo_runs_to_the_end_every_trial_of_the_grid_asha_stopped(finished_sweep, tmp_path, cache_dir):
    _, asha = finished_sweep
    grid = [o for o in SWEEP if not o.startswith("scheduler.")]
    fifo = sweep.run(
        preflight(resolved_config([*grid, "scheduler=fifo", "cluster.num_workers=1"], tmp_path, cache_dir))
    )
    assert fifo.errors == []
    assert sorted(r.config["training"]["learning_rate"] for r in fifo) == sorted(
        r.config["training"]["learning_rate"] for r in asha
    )
    assert [r.metrics["step"] for r in fifo] == [MAX_STEPS] * 2
    assert min(r.metrics["step"] for r in asha) < MAX_STEPS


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_every_report_reached_tune_with_its_checkpoint_and_the_disk_keeps_the_best_weights(finished_sweep):
    """By default (checkpoints.keep_per_trial=1) the completed trial keeps its best checkpoint,
    weights only, and the trial ASHA stopped keeps none; checkpoints.json counts what was freed."""
    cfg, results = finished_sweep
    kept = {}
    for result in results:
        history = result.metrics_dataframe
        assert list(history["step"]) == sorted(history["step"])
        assert history["checkpoint_path"].notna().all()  # every report carried its checkpoint to Tune
        assert len(result.best_checkpoints) == len(history)  # Tune keeps every pointer; the budget frees weights
        kept[result.metrics["step"]] = [path for path in history["checkpoint_path"] if os.path.isdir(path)]
    assert sorted(kept) == [10, MAX_STEPS]
    (best,) = kept[MAX_STEPS]
    assert "model.safetensors" in os.listdir(best)
    assert not any(name.startswith(("optimizer", "scheduler", "rng_state")) for name in os.listdir(best))
    assert kept[10] == []
    with open(os.path.join(cfg["cluster"]["storage_path"], "checkpoints.json")) as f:
        assert json.load(f)["freed"]["checkpoints"] >= 3  # the completed trial's other two, the stopped one's


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_every_report_says_the_workers_trained_ddp_on_cpu_in_float32(finished_sweep):
    _, results = finished_sweep
    for result in results:
        history = result.metrics_dataframe
        ran = history[["device", "param_dtype", "autocast_dtype", "distributed"]].drop_duplicates().to_dict("records")
        assert ran == [
            {"device": "cpu", "param_dtype": "float32", "autocast_dtype": "none", "distributed": "MULTI_CPU"}
        ]
        assert (history["peak_memory_mb"] > 0).all()


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_best_checkpoint_loads_and_reproduces_its_eval_loss(finished_sweep):
    cfg, results = finished_sweep
    best = best_trial(results, typed(SweepConfig, cfg))
    assert best.hyperparameters["training.learning_rate"] == 3e-3
    model = AutoModelForCausalLM.from_pretrained(best.checkpoint_path)
    tokenizer = AutoTokenizer.from_pretrained(best.checkpoint_path)
    data = prepare_data(cfg)
    loss = evaluate_model(model, tokenizer, data.validation_path)
    assert loss == pytest.approx(best.value, rel=0.01)


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_run_directory_holds_config_provenance_table_plots_and_best_model(finished_sweep):
    cfg, results = finished_sweep
    storage = cfg["cluster"]["storage_path"]
    with open(os.path.join(storage, "resolved_config.yaml")) as f:
        assert yaml.safe_load(f) == cfg
    assert os.path.isdir(os.path.join(storage, cfg["name"]))

    provenance = json.loads(open(os.path.join(storage, "provenance.json")).read())
    assert provenance["packages"]["torch"] and provenance["packages"]["ray"] == ray.__version__
    assert provenance["hardware"]["cpu_count"] == os.cpu_count()
    assert provenance["seeds"]["seed"] == cfg["seed"]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    git = lambda *args: (  # noqa: E731
        subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout
    )
    assert provenance["code"]["commit"] == git("rev-parse", "HEAD").strip()
    assert provenance["code"]["dirty"] == bool(git("status", "--porcelain").strip())
    assert (provenance["code"]["diff_sha256"] is None) == (git("diff", "HEAD") == "")

    table = pd.read_csv(os.path.join(storage, "results.csv"))
    assert len(table) == 2 and set(table["status"]) == {"TERMINATED"}
    assert set(table["ended"]) == {"completed", "stopped by scheduler/stopper"}
    for _, row in table.iterrows():
        assert (row["ended"] == "completed") == (row["step"] == MAX_STEPS)
    ran_for = {result.metrics["trial_id"]: result.metrics["time_total_s"] for result in results}
    assert dict(zip(table["trial_id"], table["time_total_s"])) == pytest.approx(ran_for)  # trial-hours, rebuilt
    assert "| trial_id" in open(os.path.join(storage, "results.md")).read()
    for plot in ("curves.png", "hyperparameters.png"):
        with open(os.path.join(storage, plot), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    best = json.loads(open(os.path.join(storage, "best.json")).read())
    exported = os.path.join(storage, "best")
    assert not any(name.startswith(("optimizer", "scheduler", "rng_state")) for name in os.listdir(exported))
    model = AutoModelForCausalLM.from_pretrained(exported)
    original = AutoModelForCausalLM.from_pretrained(best["checkpoint_path"])
    assert weights_digest(model) == weights_digest(original)
    assert len(AutoTokenizer.from_pretrained(exported)) == cfg["model"]["tokenizer"]["vocab_size"]


@pytest.mark.smoke  # the default tier's one sweep: DDP workers, ASHA, checkpoints, best/, the report
def test_report_command_regenerates_the_table(finished_sweep):
    cfg, _ = finished_sweep
    storage = cfg["cluster"]["storage_path"]
    os.remove(os.path.join(storage, "results.csv"))
    proc = subprocess.run(
        [sys.executable, "-m", "hfsweep.report", storage], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert len(pd.read_csv(os.path.join(storage, "results.csv"))) == 2


def test_gpt2_wikitext_runs_offline_on_local_wikitext_files(ray_cluster, tmp_path, cache_dir):
    """The headline preset with the documented offline overrides, shrunk to CPU size."""
    from pydoc_data.topics import topics

    folder = tmp_path / "wikitext-2-raw"
    folder.mkdir()
    names = sorted(topics)
    (folder / "wiki.train.raw").write_text("\n".join(topics[n] for n in names[:60]))
    (folder / "wiki.valid.raw").write_text("\n".join(topics[n] for n in names[60:]))
    overrides = [
        "+experiment=gpt2_wikitext",
        "data.source=local",
        f"data.path={folder}",
        "model.config.n_embd=64",
        "model.config.n_layer=1",
        "model.config.n_head=2",
        "model.config.n_positions=128",
        "model.tokenizer.vocab_size=300",
        "training.max_steps=10",
        "training.eval_steps=5",
        "training.save_steps=5",
        "training.logging_steps=5",
        "scheduler.grace_period=5",
        "search_space.training.learning_rate.values=[1e-3]",
        "cluster.num_workers=1",  # the preset's 2 DDP workers are the default sweep's, tested above
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    assert cfg["name"] == "gpt2_wikitext" and cfg["data"]["block_size"] == 128
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == 1
    best = best_trial(results, typed(SweepConfig, cfg))
    assert best.step == 10
    assert AutoModelForCausalLM.from_pretrained(best.checkpoint_path).config.n_positions == 128
