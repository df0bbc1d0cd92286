"""End to end: a real offline sweep on real Ray, 2 DDP workers per trial over gloo, under ASHA."""

from __future__ import annotations

import os

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from hfsweep import sweep
from hfsweep.data import prepare
from hfsweep.results import best_trial, evaluate_model
from tests.conftest import resolved_config

pytestmark = pytest.mark.slow

MAX_STEPS = 40
SWEEP = [
    f"training.max_steps={MAX_STEPS}",
    "scheduler.grace_period=10",
    "search_space.training.learning_rate.values=[3e-3,1e-3,1e-5,1e-6]",
]


@pytest.fixture(scope="module")
def finished_sweep(ray_cluster, tmp_path_factory, cache_dir):
    storage = tmp_path_factory.mktemp("sweep")
    cfg = resolved_config(SWEEP, storage, cache_dir)
    return cfg, sweep.run(cfg)


def test_every_trial_finishes_and_asha_stops_some(finished_sweep):
    cfg, results = finished_sweep
    assert len(results) == 4
    assert results.errors == []
    statuses = {r.path: r.metrics["step"] for r in results}
    assert all(step % cfg["training"]["eval_steps"] == 0 for step in statuses.values())
    stopped = [step for step in statuses.values() if step < MAX_STEPS]
    assert stopped, f"ASHA stopped no trial: final steps {sorted(statuses.values())}"
    assert any(step == MAX_STEPS for step in statuses.values())
    for result in results:
        assert result.metrics["training_iteration"] == result.metrics["step"] // cfg["training"]["eval_steps"]


def test_every_report_reached_tune_with_its_checkpoint(finished_sweep):
    _, results = finished_sweep
    for result in results:
        history = result.metrics_dataframe
        assert list(history["step"]) == sorted(history["step"])
        assert history["checkpoint_path"].map(os.path.isdir).all()
        assert len(result.best_checkpoints) == len(history)


def test_best_checkpoint_loads_and_reproduces_its_eval_loss(finished_sweep):
    cfg, results = finished_sweep
    best = best_trial(results, cfg)
    assert best.hyperparameters["training.learning_rate"] in (3e-3, 1e-3)
    model = AutoModelForCausalLM.from_pretrained(best.checkpoint_path)
    tokenizer = AutoTokenizer.from_pretrained(best.checkpoint_path)
    data = prepare(cfg)
    loss = evaluate_model(model, tokenizer, data.validation_path)
    assert loss == pytest.approx(best.value, rel=0.01)


def test_resolved_config_is_saved_beside_the_results(finished_sweep):
    cfg, _ = finished_sweep
    storage = cfg["cluster"]["storage_path"]
    assert os.path.isfile(os.path.join(storage, "resolved_config.yaml"))
    assert os.path.isdir(os.path.join(storage, cfg["name"]))


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
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    assert cfg["name"] == "gpt2_wikitext" and cfg["data"]["block_size"] == 128
    results = sweep.run(cfg)
    assert results.errors == [] and len(results) == 1
    best = best_trial(results, cfg)
    assert best.step == 10
    assert AutoModelForCausalLM.from_pretrained(best.checkpoint_path).config.n_positions == 128
