"""Supervised fine-tuning on instruction or chat data, prepared as TRL's `SFTTrainer` prepares it.

Rows are TRL's dataset types: conversational `messages` (the last message is the completion, the
ones before it the prompt), or `prompt` and `completion` (plain text, or lists of messages);
ShareGPT's `conversations` of `from`/`value` are converted to them by TRL. A conversation is
rendered by the tokenizer's chat template (or `task_options.chat_template`: Jinja text or a .jinja
file); with `task_options.completion_only_loss` the prompt's tokens are labelled -100, found as TRL finds them
(where the tokenized prompt and prompt + completion diverge); `assistant_only_loss` (TRL's
name) trains on every assistant message and nothing else, found by rendering the conversation's
beginnings, so the template needs no `{% generation %}` markers; `packing` packs examples into
blocks of `data.max_length` with TRL's `pack_dataset`. The result is fixed-length causal-LM rows,
so the workers stream them and the Trainer trains on them like every other task's.

The trials' Trainer is the configured one: `trainer=sft` is TRL's `SFTTrainer` itself
(hfsweep.loops.sft_trainer, which skips TRL's preparation and hands it the worker's shard).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig
from hfsweep.tasks.base import IGNORED, Task
from hfsweep.tasks.causal_lm import token_features

FORMATS = "rows with `messages`, or with `prompt` and `completion` (TRL's dataset types)"
ROW_COLUMNS = ("input_ids", "attention_mask", "labels")  # what a prepared row holds


def chat_template(template: Optional[str]):
    """`task_options.chat_template` as Jinja text (read from its file when it names one), or None: the tokenizer's."""
    if template and template.endswith((".jinja", ".j2")) and os.path.isfile(template):
        with open(template, encoding="utf-8") as f:
            return f.read()
    return template


def prompt_and_completion(example: dict) -> tuple:
    """An example's prompt and completion, TRL's way (ShareGPT converted to ChatML first)."""
    from trl.data_utils import maybe_convert_to_chatml

    example = maybe_convert_to_chatml(dict(example))
    if "messages" in example:
        return example["messages"][:-1], example["messages"][-1:]
    return example["prompt"], example["completion"]


def tokenize(example: dict, tokenizer, template, completion_only: bool, assistant_only: bool) -> dict:
    """input_ids and labels of one example: -100 on the prompt with `completion_only`, and on every
    token outside an assistant message with `assistant_only` (which, as in TRL, where a `messages`
    row has no completion, trains on all of a conversation's assistant messages, not its last only)."""
    from trl.data_utils import common_prefix_length, is_conversational

    prompt, completion = prompt_and_completion(example)
    if is_conversational({"prompt": prompt}):
        render = dict(chat_template=template, tokenize=True, return_dict=True)
        prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, **render)["input_ids"]
        ids = tokenizer.apply_chat_template(prompt + completion, **render)["input_ids"]
    elif assistant_only:
        raise ConfigError(
            "task_options.assistant_only_loss: trains on a conversation's assistant messages, and these "
            "rows are plain text; set task_options.assistant_only_loss=false."
        )
    else:  # plain text: the completion ends with EOS, as TRL adds it
        prompt_ids = tokenizer(prompt)["input_ids"]
        ids = tokenizer(prompt + completion + (tokenizer.eos_token or ""))["input_ids"]
    # a `messages` row: its last message is no completion here
    conversation = assistant_only and "prompt" not in example
    start = common_prefix_length(prompt_ids, ids) if completion_only and not conversation else 0
    labels = [IGNORED] * start + ids[start:]
    if assistant_only:
        mask = assistant_mask(prompt + completion, ids, tokenizer, render)
        labels = [label if trained else IGNORED for label, trained in zip(labels, mask)]
    return {"input_ids": ids, "labels": labels}


def assistant_mask(messages: list, ids: list, tokenizer, render: dict) -> list:
    """1 on the tokens of each assistant message (and its end-of-turn tokens), 0 elsewhere: what
    rendering `messages[:i+1]` adds to `messages[:i]` with the generation prompt. Any template whose
    renderings of a conversation's beginnings are prefixes of the whole one's works, without TRL's
    `{% generation %}` markers."""
    mask = [0] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True, **render)["input_ids"]
        through = tokenizer.apply_chat_template(messages[: i + 1], **render)["input_ids"]
        if through[: len(before)] != before or ids[: len(through)] != through:
            raise ConfigError(
                f"task_options.assistant_only_loss: the chat template renders a conversation's first {i + 1} messages "
                f"otherwise than the whole conversation does, so message {i + 1}'s tokens cannot be found; use a "
                f"template whose renderings of a conversation's beginnings are prefixes of the whole one's, or set "
                f"task_options.assistant_only_loss=false."
            )
        mask[len(before) : len(through)] = [1] * (len(through) - len(before))
    return mask


def truncate(row: dict, length: int) -> dict:
    return {key: values[:length] for key, values in row.items()}


def learns_something(row: dict) -> bool:
    """Whether any token is trained on: a prompt that fills max_length alone is dropped, as TRL drops it."""
    return any(label != IGNORED for label in row["labels"])


@dataclass
class SFT(Task):
    chat_template: Optional[str] = None  # Jinja text or a .jinja file rendering conversations; None: the tokenizer's
    completion_only_loss: bool = True  # train on the completion only (the prompt's labels are -100)
    assistant_only_loss: bool = False  # train on every assistant message of a conversation only (TRL's name)
    packing: bool = False  # pack examples into blocks of max_length (TRL's wrapped packing) instead of padding each

    name = "sft"
    reports_perplexity = True
    length_key = "max_length"
    loss_type = "ForCausalLM"

    def auto_model_class(self):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def prepare_tokenizer(self, tokenizer, data_cfg: DataConfig) -> None:
        if self.chat_template:  # the template the data was rendered with
            tokenizer.chat_template = chat_template(self.chat_template)

    def check_config(self, data_cfg: DataConfig) -> None:
        import importlib.util

        if importlib.util.find_spec("trl") is None:
            raise ConfigError(
                "model.task: sft prepares its data with TRL, which is not installed; pip install 'hfsweep[sft]'."
            )

    def texts(self, row: dict, data_cfg: DataConfig) -> list:
        """What a tokenizer trained on the data learns from: every message's or part's text."""
        parts = prompt_and_completion(row)
        return [
            m["content"] if isinstance(m, dict) else m
            for part in parts
            for m in (part if isinstance(part, list) else [part])
        ]

    def prepare_raw(self, raw, data_cfg: DataConfig):
        for split, ds in raw.items():
            names = set(ds.column_names)
            if not ({"messages"} <= names or {"conversations"} <= names or {"prompt", "completion"} <= names):
                raise ConfigError(
                    f"data: model.task=sft reads {FORMATS}; the {split} split has {', '.join(sorted(names))}."
                )
        return raw

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        from datasets import Features
        from trl.data_utils import pack_dataset

        length, template = data_cfg.max_length, chat_template(self.chat_template)
        if template is None and tokenizer.chat_template is None and "prompt" not in ds.column_names:
            raise ConfigError(
                "task_options.chat_template: the tokenizer has none, and conversations need one; "
                "set task_options.chat_template (Jinja text or a .jinja file)."
            )
        ds = ds.map(
            tokenize,
            fn_kwargs={
                "tokenizer": tokenizer,
                "template": template,
                "completion_only": self.completion_only_loss,
                "assistant_only": self.assistant_only_loss,
            },
            remove_columns=ds.column_names,
            desc=f"tokenize {split}",
        )
        if self.packing:
            ds = pack_dataset(ds, length, "wrapped")  # blocks of max_length, as run_clm's group_texts
        else:
            ds = ds.map(truncate, fn_kwargs={"length": length})
        ds = ds.filter(learns_something)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

        def padded(row: dict) -> dict:
            missing = length - len(row["input_ids"])
            return {
                "input_ids": row["input_ids"] + [pad] * missing,
                "attention_mask": [1] * len(row["input_ids"]) + [0] * missing,
                "labels": row["labels"] + [IGNORED] * missing,
            }

        features = Features(token_features(ROW_COLUMNS, length))
        return ds.map(padded, remove_columns=ds.column_names, features=features)


TASK = SFT()
