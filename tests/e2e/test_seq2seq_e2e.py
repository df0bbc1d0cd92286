"""End to end: the t5_xsum offline variant (a small T5 and a Unigram tokenizer trained from
scratch) on jsonl document/summary files, generating for ROUGE at every evaluation, under ASHA on
eval_loss."""

from __future__ import annotations

import os

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hfsweep.data.offline import write as write_offline_data
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.results.best import best_trial
from tests.conftest import resolved_config, sequential_sweep, untrained_metrics

MAX_STEPS = 150
MARGIN = 0.1  # ROUGE-1 above the untrained model's (0: it generates nothing) that the best trial must reach


def test_t5_summarization_offline_learns_rouge_and_asha_stops_the_slow_learning_rate(ray_cluster, tmp_path, cache_dir):
    folder = write_offline_data(str(tmp_path / "data"))["summary_proxy"]
    overrides = [
        "+experiment=t5_xsum_offline",
        f"data.path={folder}",
        "trainer.max_eval_samples=64",
        *sequential_sweep(MAX_STEPS, every=50, learning_rates=[3e-3, 1e-5], warmup_steps=20),
    ]
    cfg = resolved_config(overrides, tmp_path / "run", cache_dir)
    before = untrained_metrics(cfg, str(tmp_path / "untrained"))
    results = sweep.run(preflight(cfg))
    assert results.errors == [] and len(results) == 2

    final_step = {r.config["training"]["learning_rate"]: r.metrics["step"] for r in results}
    assert final_step == {3e-3: MAX_STEPS, 1e-5: 50}, f"ASHA on eval_loss, final steps: {final_step}"
    learnt = max(results, key=lambda r: r.config["training"]["learning_rate"]).metrics_dataframe
    assert learnt["eval_rouge1"].iloc[-1] >= before["eval_rouge1"] + MARGIN, (
        f"untrained {before['eval_rouge1']:.3f}, then {list(learnt['eval_rouge1'])}"
    )
    assert (learnt["eval_gen_len"] <= 16).all() and learnt["eval_gen_len"].iloc[
        -1
    ] > 1  # trainer.max_new_tokens; more than </s>
    assert best_trial(results, cfg).metric == "eval_loss"

    best = os.path.join(cfg["cluster"]["storage_path"], "best")
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(best), AutoTokenizer.from_pretrained(best)
    generated = model.generate(
        **tokenizer(["summarize: The simple form is equivalent to this."], return_tensors="pt"), max_new_tokens=8
    )
    assert tokenizer.decode(generated[0], skip_special_tokens=True).strip()
