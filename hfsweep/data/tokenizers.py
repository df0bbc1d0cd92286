"""Tokenizers: a pretrained one by name or directory, or one trained on the training split with
the `tokenizers` library (byte-level BPE as GPT-2's or RoBERTa's, WordPiece as BERT's), cached by
content."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable

from hfsweep.compat import dataset_fingerprint
from hfsweep.config.errors import HubUnreachableError
from hfsweep.config.schema import TokenizerConfig, plain
from hfsweep.data.cache import atomic_dir

SPECIAL_TOKEN = "<|endoftext|>"
BERT_SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}


def _byte_level_bpe(texts: Iterable[str], vocab_size: int):
    """GPT-2-like: byte-level BPE with one special token for start, end and padding."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[SPECIAL_TOKEN])
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token=SPECIAL_TOKEN,
        eos_token=SPECIAL_TOKEN,
        unk_token=SPECIAL_TOKEN,
        pad_token=SPECIAL_TOKEN,
    )


def _wordpiece(texts: Iterable[str], vocab_size: int):
    """BERT-like (cased): WordPiece with [CLS] text [SEP] pair [SEP] and token type ids for pairs."""
    from tokenizers import processors
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import PreTrainedTokenizerFast

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


ROBERTA_SPECIAL_TOKENS = {
    "bos_token": "<s>",
    "pad_token": "<pad>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "mask_token": "<mask>",
}


def _roberta_bpe(texts: Iterable[str], vocab_size: int):
    """RoBERTa-like: byte-level BPE with <s> text </s>, padding and a <mask> token for masked LM.
    Words after the first are told apart by their leading space (add_prefix_space, so that a
    pre-split word gets one too, as token classification needs)."""
    from tokenizers import ByteLevelBPETokenizer, processors
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=True)
    bpe.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=2, special_tokens=list(ROBERTA_SPECIAL_TOKENS.values())
    )
    bpe.post_processor = processors.RobertaProcessing(
        ("</s>", bpe.token_to_id("</s>")), ("<s>", bpe.token_to_id("<s>")), add_prefix_space=True
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, model_input_names=["input_ids", "attention_mask"], **ROBERTA_SPECIAL_TOKENS
    )


T5_SPECIAL_TOKENS = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}  # ids 0, 1, 2, as T5's


def _unigram(texts: Iterable[str], vocab_size: int):
    """T5-like: a SentencePiece Unigram model, </s> after every text, <pad> as id 0 (T5's decoder
    start token)."""
    from tokenizers import SentencePieceUnigramTokenizer, processors
    from transformers import PreTrainedTokenizerFast

    unigram = SentencePieceUnigramTokenizer()
    unigram.train_from_iterator(
        texts, vocab_size=vocab_size, special_tokens=list(T5_SPECIAL_TOKENS.values()), unk_token="<unk>"
    )
    unigram.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=unigram._tokenizer, model_input_names=["input_ids", "attention_mask"], **T5_SPECIAL_TOKENS
    )


TOKENIZER_TRAINERS = {
    "byte_level_bpe": _byte_level_bpe,
    "wordpiece": _wordpiece,
    "roberta_bpe": _roberta_bpe,
    "unigram": _unigram,
}
# The kinds whose trained tokenizer has a mask token (masked LM needs one to mask with).
TRAINED_WITH_MASK_TOKEN = ("wordpiece", "roberta_bpe")


def tokenizer_for(tok_cfg: TokenizerConfig, train, texts_of: Callable, read_from: list, cache_dir: str) -> str:
    """A pretrained tokenizer's name, or the path of one trained on the training split's texts
    (`texts_of(row)`: the texts of one row, as the task reads them), cached by the tokenizer
    settings, the split's content and `read_from` (what names the texts taken)."""
    if tok_cfg.pretrained:
        return tok_cfg.pretrained
    # the key as the resolved config names the tokenizer (its kind by name), so caches stay valid
    named = {"tokenizer": plain(tok_cfg), "corpus": dataset_fingerprint(train), "texts": read_from}
    blob = json.dumps(named, sort_keys=True)
    out_dir = os.path.join(cache_dir, "tokenizers", hashlib.sha256(blob.encode()).hexdigest()[:16])

    def write(tmp: str) -> None:
        texts = (text for row in train for text in texts_of(row))
        TOKENIZER_TRAINERS[tok_cfg.kind.name](texts, tok_cfg.vocab_size).save_pretrained(tmp)

    return atomic_dir(out_dir, write)


def load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except OSError as err:
        raise HubUnreachableError(
            f"model.tokenizer.pretrained: cannot load '{name_or_path}' ({type(err).__name__}: offline or not "
            f"found); use a local directory, or model.tokenizer.pretrained=null to train one on the training split."
        ) from err


def token_ids(tokenizer, texts: list) -> list:
    """`tokenizer(texts)["input_ids"]`, straight from the Rust tokenizer when nothing else would
    differ: transformers' conversion of every text's encoding to Python lists (attention mask,
    offsets) costs about a third of tokenizing a corpus. Any other tokenizer, or one whose
    backend truncates or pads, goes through transformers."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    direct = (
        backend is not None
        and backend.truncation is None
        and backend.padding is None
        and backend.encode_special_tokens == bool(getattr(tokenizer, "split_special_tokens", False))
    )
    if not direct:
        return tokenizer(texts)["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch_fast(texts)]
