"""End to end: the roberta_wikitext_mlm offline variant (a small RoBERTa and a byte-level BPE
tokenizer trained from scratch): a searched task option.
(Whether the preset learns: tests/e2e/test_families_learn_e2e.py.)"""

from __future__ import annotations

import os

import pytest

from hfsweep.data.offline import write as write_offline_data
from tests.conftest import run_sweep


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
