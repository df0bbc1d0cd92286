"""End to end: the roberta_wikitext_mlm offline variant (a small RoBERTa and a byte-level BPE
tokenizer trained from scratch) on wikitext-format local files, under ASHA on eval_loss."""

from __future__ import annotations

import os

import pytest
from transformers import AutoModelForMaskedLM

from hfsweep.data.offline import write as write_offline_data
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config, run_sweep, sequential_sweep, untrained_metrics

MAX_STEPS = 90
MARGIN = 0.75  # nats below the untrained model's loss (ln 1000 = 6.9, the vocabulary); 90 steps reach ~5.9


def test_roberta_mlm_offline_learns_and_asha_stops_the_slow_learning_rate(ray_cluster, tmp_path, cache_dir):
    folder = write_offline_data(str(tmp_path / "data"))["wikitext_proxy"]
    overrides = [
        "+experiment=roberta_wikitext_mlm_offline",
        f"data.path={folder}",
        "data.block_size=64",
        "model.config.max_position_embeddings=66",
        "~search_space.task_options",  # the masking rate is searched in the preset; here only the learning rate
        *sequential_sweep(MAX_STEPS, every=30, learning_rates=[3e-3, 1e-5]),
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    before = untrained_metrics(cfg, str(tmp_path / "untrained"))["eval_loss"]
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == 2

    final_step = {r.config["training"]["learning_rate"]: r.metrics["step"] for r in results}
    assert final_step == {3e-3: MAX_STEPS, 1e-5: 30}, f"ASHA on eval_loss, final steps: {final_step}"
    best = best_trial(results, cfg)
    assert best.metric == "eval_loss" and best.value <= before - MARGIN, (
        f"untrained eval_loss {before:.3f}, best {best.value:.3f}"
    )
    model = AutoModelForMaskedLM.from_pretrained(os.path.join(cfg["cluster"]["storage_path"], "best"))
    assert model.config.model_type == "roberta"


@pytest.mark.parametrize(("option", "prepared"), [("eval_mlm_probability", 2), ("mlm_probability", 1)])
def test_a_searched_task_option_reaches_each_trial_and_prepares_data_only_when_the_data_depends_on_it(
    option, prepared, ray_cluster, tmp_path
):
    """Searching a task option gives each trial the Task with its value: the validation split's
    masking share is prepared data (one prepared copy per value), the training batches' share is
    applied on the workers (one copy for both)."""
    folder = write_offline_data(str(tmp_path / "data"))["wikitext_proxy"]
    cache = tmp_path / "cache"
    overrides = [
        "+experiment=roberta_wikitext_mlm_offline",
        "debug=tiny",
        f"data.path={folder}",
        "data.block_size=32",
        "model.config.max_position_embeddings=34",
        "~search_space.task_options",
        f"+search_space.task_options.{option}={{sampler:grid,values:[0.15,0.5]}}",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache)
    assert results.errors == [] and sorted(r.config["task_options"][option] for r in results) == [0.15, 0.5]
    assert len(os.listdir(cache / "tokenized")) == prepared
