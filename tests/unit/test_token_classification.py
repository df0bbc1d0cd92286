"""Token classification's data: CoNLL files as distributed, json with tokens and tags, and the
labels aligned to sub-tokens as run_ner aligns them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from datasets import Dataset, DatasetDict

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, typed
from hfsweep.data.sources import load_raw
from hfsweep.data.tokenizers import BERT_SPECIAL_TOKENS
from hfsweep.tasks import with_options
from hfsweep.tasks.data_hooks import batches_collator
from hfsweep.tasks.token_classification import IGNORED, TASK
from tests.conftest import resolved_config

CONLL_TRAIN = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter\tNNP\tB-NP\tB-PER
Blackburn\tNNP\tB-NP\tI-PER
"""  # CoNLL-2003's four columns, then tabs, and no blank line at the end
CONLL_VALIDATION = "-DOCSTART- O\n\nBrussels B-LOC\nvisits O\n"  # two columns are as good as four


def local_data_cfg(tmp_path, files: dict, **overrides) -> DataConfig:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cfg = resolved_config(
        ["+experiment=bert_conll2003_offline", f"data.path={tmp_path}"], tmp_path / "run", tmp_path / "cache"
    )
    return typed(DataConfig, {**cfg["data"], **overrides})


def test_conll_files_are_read_as_sentences_of_tokens_and_tags(tmp_path):
    data_cfg = local_data_cfg(tmp_path, {"train.txt": CONLL_TRAIN, "validation.txt": CONLL_VALIDATION})
    raw = load_raw(data_cfg, str(tmp_path / "cache"), TASK)
    assert raw["train"]["tokens"] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert raw["train"]["ner_tags"] == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]
    assert raw["validation"]["tokens"] == [["Brussels", "visits"]]


def test_the_tag_list_comes_from_the_training_split(tmp_path):
    data_cfg = local_data_cfg(tmp_path, {"train.txt": CONLL_TRAIN, "validation.txt": "Peter B-PER\n"})
    raw = TASK.prepare_raw(load_raw(data_cfg, str(tmp_path / "cache"), TASK), data_cfg)
    assert TASK.label_names(raw["train"], data_cfg) == ["B-MISC", "B-ORG", "B-PER", "I-PER", "O"]
    assert raw["validation"]["ner_tags"] == [[2]]


def test_a_validation_tag_the_training_split_lacks_is_refused(tmp_path):
    data_cfg = local_data_cfg(tmp_path, {"train.txt": CONLL_TRAIN, "validation.txt": CONLL_VALIDATION})
    with pytest.raises(
        ConfigError,
        match=(
            r"^data\.label_column: the validation split has tags the train split lacks \(B-LOC\); add them to train\.$"
        ),
    ):
        TASK.prepare_raw(load_raw(data_cfg, str(tmp_path / "cache"), TASK), data_cfg)


def test_a_test_split_tag_the_training_split_lacks_is_refused(tmp_path):
    files = {"train.txt": CONLL_TRAIN, "validation.txt": "Peter B-PER\n", "test.txt": CONLL_VALIDATION}
    data_cfg = local_data_cfg(tmp_path, files, test_split="test")
    with pytest.raises(
        ConfigError, match=r"^data\.label_column: the test split has tags the train split lacks \(B-LOC\)"
    ):
        TASK.prepare_raw(load_raw(data_cfg, str(tmp_path / "cache"), TASK), data_cfg)


def test_a_validation_set_carved_from_train_takes_the_training_splits_tags(tmp_path):
    """With data.validation_split_percentage no validation file is read: the tags are checked on
    the splits there are, and the carve is made from the encoded train split."""
    from hfsweep.data.prepare import raw_splits

    sentences = "".join(f"Peter{i} B-PER\nvisits O\n\n" for i in range(20))
    data_cfg = local_data_cfg(tmp_path, {"train.txt": sentences}, validation_split_percentage=20)
    raw = raw_splits(data_cfg, str(tmp_path / "cache"), TASK)
    assert (len(raw["train"]), len(raw["validation"])) == (16, 4)
    assert raw["validation"].features["ner_tags"] == raw["train"].features["ner_tags"]


def test_a_line_without_a_tag_is_refused_with_its_file_and_line(tmp_path):
    data_cfg = local_data_cfg(tmp_path, {"train.txt": "EU B-ORG\nrejects\n", "validation.txt": CONLL_VALIDATION})
    with pytest.raises(
        ConfigError, match=r"^data\.path: '.*/train\.txt' line 2 is not CoNLL: 'rejects' has no tag column; "
    ):
        load_raw(data_cfg, str(tmp_path / "cache"), TASK)


def test_jsonl_with_tokens_and_tags_is_read_by_datasets(tmp_path):
    rows = [{"tokens": ["Peter", "runs"], "ner_tags": ["B-PER", "O"]}]
    jsonl = "\n".join(json.dumps(r) for r in rows) + "\n"
    data_cfg = local_data_cfg(tmp_path, {"train.jsonl": jsonl, "validation.jsonl": jsonl})
    raw = TASK.prepare_raw(load_raw(data_cfg, str(tmp_path / "cache"), TASK), data_cfg)
    assert raw["train"]["tokens"] == [["Peter", "runs"]] and raw["train"]["ner_tags"] == [[0, 1]]


def wordpiece_tokenizer(words: list[str]):
    """A BERT tokenizer whose vocabulary is exactly `words` (and the special tokens)."""
    from tokenizers import processors
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*BERT_SPECIAL_TOKENS.values(), *words])}
    wordpiece = BertWordPieceTokenizer(vocab, lowercase=False)
    wordpiece.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    return PreTrainedTokenizerFast(tokenizer_object=wordpiece._tokenizer, **BERT_SPECIAL_TOKENS)


@pytest.mark.parametrize(
    ("label_all_tokens", "expected"), [(False, ["B-PER", None, "O"]), (True, ["B-PER", "I-PER", "O"])]
)
def test_a_words_tag_goes_on_its_first_sub_token_or_on_all_of_them(label_all_tokens, expected):
    tokenizer = wordpiece_tokenizer(["Black", "##burn", "runs"])
    rows = {
        "tokens": [["Blackburn", "runs"], ["runs", "Blackburn"], ["runs"]],
        "ner_tags": [["B-PER", "O"], ["O", "I-PER"], ["O"]],
    }
    raw = DatasetDict(train=Dataset.from_dict(rows))
    raw["validation"] = raw["train"]
    data_cfg = typed(DataConfig, {"text_column": "tokens", "label_column": "ner_tags", "max_length": 8})
    raw = TASK.prepare_raw(raw, data_cfg)
    prepared = with_options(TASK, {"label_all_tokens": label_all_tokens}).preprocess(
        raw["train"], tokenizer, data_cfg, "train"
    )
    names = raw["train"].features["ner_tags"].feature.names
    tokens = tokenizer.convert_ids_to_tokens(prepared[0]["input_ids"])
    assert tokens == ["[CLS]", "Black", "##burn", "runs", "[SEP]"]  # "Blackburn" is two sub-tokens; no padding stored
    labels = [None if label == IGNORED else names[label] for label in prepared[0]["labels"]]
    assert labels[0] is None and labels[1:4] == expected and labels[4] is None  # [CLS] and [SEP] ignored
    # the workers' collator pads each batch to its longest row, labels with -100
    batch = batches_collator(TASK, None, tokenizer, "train")(prepared.with_format("numpy")[[0, 2]])
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 5)
    assert batch["attention_mask"][1].tolist() == [1, 1, 1, 0, 0] and batch["labels"][1, 3:].tolist() == [
        IGNORED,
        IGNORED,
    ]
    padded = TASK.preprocess(raw["train"], tokenizer, replace(data_cfg, pad_to_max_length=True), "train")
    assert len(padded[0]["input_ids"]) == len(padded[0]["labels"]) == 8  # data.pad_to_max_length: run_ner's padding


def test_a_configured_data_collator_collates_the_workers_training_and_validation_batches():
    """`data_collator: {_target_: ...}` replaces the task's collator on the workers too (it reached
    only the Trainer's evaluation before): transformers' collator with `pad_to_multiple_of=8` pads
    each batch of 5 tokens to 8 where the task's pads to 5."""
    tokenizer = wordpiece_tokenizer(["Black", "##burn", "runs"])
    raw = DatasetDict(
        train=Dataset.from_dict({"tokens": [["Blackburn", "runs"], ["runs"]], "ner_tags": [["B-PER", "O"], ["O"]]})
    )
    data_cfg = typed(DataConfig, {"text_column": "tokens", "label_column": "ner_tags", "max_length": 8})
    raw["validation"] = raw["train"]
    raw = TASK.prepare_raw(raw, data_cfg)
    batch = TASK.preprocess(raw["train"], tokenizer, data_cfg, "train").with_format("numpy")[:]
    configured = {"_target_": "transformers.DataCollatorForTokenClassification", "pad_to_multiple_of": 8}
    for split in ("train", "validation"):
        assert batches_collator(TASK, None, tokenizer, split)(batch)["input_ids"].shape == (2, 5)
        assert batches_collator(TASK, configured, tokenizer, split)(batch)["input_ids"].shape == (2, 8)


def test_files_named_as_conll_2003_ships_them_are_read_through_data_files(tmp_path):
    (tmp_path / "eng.train").write_text(CONLL_TRAIN)
    (tmp_path / "eng.testa").write_text(CONLL_VALIDATION)
    cfg = resolved_config(
        [
            "+experiment=bert_conll2003_offline",
            f"data.path={tmp_path}",
            "+data.data_files.train=eng.train",
            "+data.data_files.validation=eng.testa",
        ],
        tmp_path / "run",
        tmp_path / "cache",
    )
    raw = load_raw(typed(DataConfig, cfg["data"]), str(tmp_path / "cache"), TASK)
    assert raw["train"].num_rows == 2 and raw["validation"]["tokens"] == [["Brussels", "visits"]]
    with pytest.raises(
        ConfigError, match=r"^data\.data_files: '.*/eng\.testb' is not a file; names are relative to data\.path\.$"
    ):
        load_raw(
            typed(DataConfig, {**cfg["data"], "data_files": {"train": "eng.train", "validation": "eng.testb"}}),
            str(tmp_path / "cache"),
            TASK,
        )
