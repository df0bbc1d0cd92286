"""A LoRA SFT sweep under TRL's SFTTrainer (trainer=sft) and its best adapter generating, end to end."""

from __future__ import annotations

import json
import random

from tests.conftest import run_sweep
from tests.unit.test_sft import CHAT_TEMPLATE, chat


def test_a_lora_sft_sweep_runs_and_its_best_adapter_generates(ray_cluster, tmp_path, cache_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.conftest import save_tiny_base

    base = save_tiny_base(tmp_path / "base", cache_dir)
    data = tmp_path / "chat"
    data.mkdir()
    rng = random.Random(0)
    for split, count in (("train", 200), ("validation", 20)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(chat(i, rng)) + "\n" for i in range(count)))
    (tmp_path / "chat.jinja").write_text(CHAT_TEMPLATE)
    overrides = [
        "debug=tiny",
        "model.task=sft",
        "trainer=sft",
        "peft=lora",
        "peft.target_modules=all-linear",
        f"model.pretrained={base}",
        f"model.tokenizer.pretrained={base}",
        "data.source=local",
        f"data.path={data}",
        "data.max_length=128",
        f"task_options.chat_template={tmp_path / 'chat.jinja'}",
        "search_space.training.learning_rate.values=[1e-2]",
    ]
    cfg, results = run_sweep(overrides, tmp_path / "run", cache_dir)
    assert results.errors == [] and results[0].metrics["step"] == cfg["training"]["max_steps"]
    assert 0 < results[0].metrics["eval_mean_token_accuracy"] <= 1  # logged by TRL's SFTTrainer only
    history = results[0].metrics_dataframe["eval_loss"]
    assert history.iloc[-1] < history.iloc[0]

    best = tmp_path / "run" / "best"
    tokenizer = AutoTokenizer.from_pretrained(best)
    assert tokenizer.chat_template == CHAT_TEMPLATE  # the template the data was rendered with travels with the adapter
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), best)
    prompt = tokenizer.apply_chat_template(
        chat(1, rng)["messages"][:-1], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    generated = model.generate(**prompt, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert generated.shape[1] > prompt["input_ids"].shape[1]
    assert tokenizer.decode(generated[0, prompt["input_ids"].shape[1] :]).strip()
