"""Supervised fine-tuning (`model.task=sft`): chat and prompt/completion rows become causal-LM
rows whose prompt (or, with assistant_only_loss, all but the assistant's messages) is masked out of
the loss. (A LoRA SFT sweep under TRL's SFTTrainer, trainer=sft: tests/e2e/test_sft_e2e.py.)"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from datasets import Dataset

from hfsweep.config.schema import DataConfig, typed
from hfsweep.driver.preflight import preflight
from hfsweep.tasks import with_options
from hfsweep.tasks.base import IGNORED
from hfsweep.tasks.sft import TASK
from tests.conftest import WORDS

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
DATA = typed(DataConfig, {"max_length": 48})
OPTIONS = {"chat_template": CHAT_TEMPLATE}  # the sft task's, beside its defaults


def chat(i: int, rng: random.Random) -> dict:
    """A question whose answer is its words in reverse order."""
    words = rng.choices(WORDS.split(), k=4)
    return {
        "messages": [
            {"role": "system", "content": "You reverse words."},
            {"role": "user", "content": f"reverse {i % 10}: {' '.join(words)}"},
            {"role": "assistant", "content": " ".join(reversed(words))},
        ]
    }


@pytest.fixture(scope="module")
def tokenizer():
    from hfsweep.data.tokenizers import TOKENIZER_TRAINERS

    rng = random.Random(0)
    texts = [m["content"] for i in range(200) for m in chat(i, rng)["messages"]] + [
        "<|user|> <|assistant|> <|system|>"
    ] * 5
    return TOKENIZER_TRAINERS["byte_level_bpe"](texts, 400)


def rows(tokenizer, examples: list, max_length: int = 48, **options) -> Dataset:
    task = with_options(TASK, {**OPTIONS, **options})
    return task.preprocess(Dataset.from_list(examples), tokenizer, replace(DATA, max_length=max_length), "train")


def test_completion_only_loss_labels_the_prompt_minus_100_and_trains_on_the_answer(tokenizer):
    example = chat(3, random.Random(1))
    (row,) = rows(tokenizer, [example])
    prompt = tokenizer.apply_chat_template(
        example["messages"][:-1],
        chat_template=CHAT_TEMPLATE,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    length = sum(row["attention_mask"])
    assert row["labels"][: len(prompt)] == [IGNORED] * len(prompt)
    assert row["input_ids"][: len(prompt)] == prompt
    assert row["labels"][len(prompt) : length] == row["input_ids"][len(prompt) : length]
    assert row["labels"][length:] == [IGNORED] * (DATA.max_length - length)
    answer = tokenizer.decode(row["labels"][len(prompt) : length])
    assert (
        answer.strip() == example["messages"][-1]["content"] + tokenizer.eos_token
    )  # and the template's newline, if it keeps it


def test_without_completion_only_loss_every_real_token_is_trained_on(tokenizer):
    (row,) = rows(tokenizer, [chat(3, random.Random(1))], completion_only_loss=False)
    length = sum(row["attention_mask"])
    assert row["labels"][:length] == row["input_ids"][:length]


def trained_spans(row: dict) -> list:
    """The runs of consecutive tokens a row trains on, as lists of token ids."""
    spans, previous = [], IGNORED
    for token, label in zip(row["input_ids"], row["labels"]):
        if label != IGNORED:
            assert label == token
            if previous == IGNORED:
                spans.append([])
            spans[-1].append(token)
        previous = label
    return spans


def test_assistant_only_loss_trains_on_every_assistant_turn_and_nothing_else(tokenizer):
    rng = random.Random(4)
    turns = [chat(i, rng)["messages"] for i in range(3)]
    example = {"messages": turns[0][:1] + [m for t in turns for m in t[1:]]}  # system, then user/assistant three times
    (row,) = rows(tokenizer, [example], assistant_only_loss=True, max_length=128)
    answers = [m["content"] for m in example["messages"] if m["role"] == "assistant"]
    assert len(answers) == 3 and sum(row["attention_mask"]) < 128
    # each assistant turn's text and its EOS (transformers renders with trim_blocks: no newline after
    # {% endif %}); no system or user token
    assert [tokenizer.decode(span) for span in trained_spans(row)] == [a + tokenizer.eos_token for a in answers]
    (last_only,) = rows(tokenizer, [example], max_length=128)
    assert [tokenizer.decode(span) for span in trained_spans(last_only)] == [answers[-1] + tokenizer.eos_token]


def test_assistant_only_loss_refuses_plain_text_and_a_template_that_renders_beginnings_otherwise(tokenizer):
    from hfsweep.config.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=(
            r"^task_options\.assistant_only_loss: .* these rows are plain text; set "
            r"task_options\.assistant_only_loss=false\.$"
        ),
    ):
        rows(
            tokenizer,
            [{"prompt": "reverse: apple river", "completion": " river apple"}],
            chat_template=None,
            assistant_only_loss=True,
        )
    marks_the_last = CHAT_TEMPLATE.replace(
        "{{ m['content'] }}", "{{ m['content'] }}{% if loop.last %} (end){% endif %}"
    )
    example = {"messages": chat(0, random.Random(0))["messages"] * 2}
    with pytest.raises(
        ConfigError,
        match=(
            r"^task_options\.assistant_only_loss: the chat template renders a conversation's first 3 messages otherwise"
        ),
    ):
        rows(tokenizer, [example], chat_template=marks_the_last, assistant_only_loss=True)


def test_prompt_completion_text_rows_end_with_eos_and_mask_the_prompt(tokenizer):
    (row,) = rows(tokenizer, [{"prompt": "reverse: apple river", "completion": " river apple"}], chat_template=None)
    prompt = tokenizer("reverse: apple river")["input_ids"]
    length = sum(row["attention_mask"])
    assert row["labels"][: len(prompt)] == [IGNORED] * len(prompt)
    assert tokenizer.decode(row["input_ids"][len(prompt) : length]) == " river apple" + tokenizer.eos_token


def test_packing_fills_blocks_of_max_length_and_keeps_the_prompt_masked(tokenizer):
    rng = random.Random(2)
    examples = [chat(i, rng) for i in range(20)]
    packed = rows(tokenizer, examples, packing=True)
    unpacked = rows(tokenizer, examples)
    assert len(packed) < len(unpacked)
    assert all(sum(r["attention_mask"]) == DATA.max_length for r in list(packed)[:-1])
    trained = lambda ds: sum(label != IGNORED for r in ds for label in r["labels"])  # noqa: E731
    assert trained(packed) == trained(unpacked)  # the same answer tokens, none of the prompts'


def test_rows_of_another_shape_and_chats_without_a_template_are_refused_in_one_line(tokenizer):
    from datasets import DatasetDict

    from hfsweep.config.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"^data: model.task=sft reads rows with `messages`.*the train split has text\.$"
    ):
        TASK.prepare_raw(DatasetDict(train=Dataset.from_list([{"text": "a"}])), DATA)
    with pytest.raises(ConfigError, match=r"^task_options.chat_template: the tokenizer has none"):
        rows(tokenizer, [chat(0, random.Random(0))], chat_template=None)


def test_trl_sft_trainers_are_refused_in_one_line_off_sft_rows_or_without_the_shard_subclass(tmp_path):
    from hfsweep.config.errors import ConfigError
    from tests.conftest import resolved_config

    with pytest.raises(
        ConfigError,
        match=r"^trainer\._target_: hfsweep\.loops\.sft_trainer\.RayDataSFTTrainer trains on chat or instruction rows, "
        r"which model\.task=causal_lm does not make; set model\.task=sft, or trainer=default\.$",
    ):
        preflight(resolved_config(["debug=tiny", "trainer=sft"], tmp_path, tmp_path))
    with pytest.raises(
        ConfigError,
        match=(
            r"^trainer\._target_: trl\.SFTTrainer takes only a `datasets` Dataset, not a worker's Ray Data shard; use "
            r"trainer=sft"
        ),
    ):
        preflight(
            resolved_config(["debug=tiny", "model.task=sft", "trainer._target_=trl.SFTTrainer"], tmp_path, tmp_path)
        )
