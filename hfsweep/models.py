"""Model and tokenizer factories: a pretrained name or directory, or built offline from config."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Iterable

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedTokenizerFast,
)

from hfsweep.config import HubUnreachableError

# model.task -> the Auto class that builds and loads its models; a new task is one entry here
# (and its preprocessing in data.PREPROCESSORS).
AUTO_MODEL_CLASSES = {"causal_lm": AutoModelForCausalLM, "sequence_classification": AutoModelForSequenceClassification}
SPECIAL_TOKEN = "<|endoftext|>"
BERT_SPECIAL_TOKENS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}


def auto_model_class(task: str):
    return AUTO_MODEL_CLASSES[task]


def tokenizer_cache_key(tok_cfg: dict, corpus_fingerprint: str) -> str:
    blob = json.dumps({"tokenizer": tok_cfg, "corpus": corpus_fingerprint}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _byte_level_bpe(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """GPT-2-like: byte-level BPE with one special token for start, end and padding."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[SPECIAL_TOKEN])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token=SPECIAL_TOKEN,
        eos_token=SPECIAL_TOKEN,
        unk_token=SPECIAL_TOKEN,
        pad_token=SPECIAL_TOKEN,
    )


def _wordpiece(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """BERT-like (cased): WordPiece with [CLS] text [SEP] pair [SEP] and token type ids for pairs."""
    from tokenizers import processors
    from tokenizers.implementations import BertWordPieceTokenizer

    wordpiece = BertWordPieceTokenizer(lowercase=False)
    wordpiece.train_from_iterator(texts, vocab_size=vocab_size, special_tokens=list(BERT_SPECIAL_TOKENS.values()))
    # Trained from scratch, it has no post-processor yet: the ids of [CLS] and [SEP] were unknown.
    wordpiece.post_processor = processors.BertProcessing(
        ("[SEP]", wordpiece.token_to_id("[SEP]")), ("[CLS]", wordpiece.token_to_id("[CLS]"))
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=wordpiece._tokenizer,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        **BERT_SPECIAL_TOKENS,
    )


TOKENIZER_TRAINERS = {"byte_level_bpe": _byte_level_bpe, "wordpiece": _wordpiece}


def train_tokenizer(tok_cfg: dict, texts: Iterable[str], out_dir: str) -> str:
    """Train a tokenizer of `model.tokenizer.kind` on `texts` and save it (atomically) to out_dir."""
    if os.path.isdir(out_dir):
        return out_dir
    tokenizer = TOKENIZER_TRAINERS[tok_cfg["kind"]](texts, tok_cfg["vocab_size"])
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(out_dir))
    tokenizer.save_pretrained(tmp)
    try:
        os.replace(tmp, out_dir)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def load_tokenizer(name_or_path: str):
    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except OSError as err:
        raise HubUnreachableError(
            f"model.tokenizer.pretrained: cannot load '{name_or_path}' ({type(err).__name__}: offline or not "
            f"found); use a local directory, or model.tokenizer.pretrained=null to train one on the training split."
        ) from err


def check_pretrained_reachable(model_cfg: dict) -> None:
    """Fail on the driver, in one line, if a pretrained model's config cannot be loaded."""
    if not model_cfg["pretrained"]:
        return
    try:
        AutoConfig.from_pretrained(model_cfg["pretrained"])
    except OSError as err:
        raise HubUnreachableError(
            f"model.pretrained: cannot load '{model_cfg['pretrained']}' ({type(err).__name__}: offline or not "
            f"found); use a local directory, or model.pretrained=null to train the model.config architecture from scratch."
        ) from err


def build_model(model_cfg: dict, tokenizer, label_names: list[str] | None = None):
    """A pretrained model, or one built from `model.config` with the tokenizer's vocabulary; a
    classifier gets one output per class of the prepared data, named after it."""
    auto_class = auto_model_class(model_cfg["task"])
    labels = {}
    if label_names:
        labels = {"id2label": dict(enumerate(label_names)), "label2id": {name: i for i, name in enumerate(label_names)}}
    if model_cfg["pretrained"]:
        return auto_class.from_pretrained(model_cfg["pretrained"], **labels)
    arch = dict(model_cfg["config"])
    config = AutoConfig.for_model(
        arch.pop("model_type"),
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **arch,
        **labels,
    )
    return auto_class.from_config(config)


def weights_digest(model) -> str:
    """A hash of every parameter and buffer, to check that two models hold the same weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()
