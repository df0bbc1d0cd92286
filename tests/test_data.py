"""Data loading from local files and pydoc prose, tokenizer training, packing, caching."""

from __future__ import annotations

import datasets
import pytest

from hfsweep.config import ConfigError
from hfsweep.data import group_texts, prepare
from hfsweep.models import load_tokenizer


def data_config(cache, **data):
    base = dict(source="pydoc", name=None, config_name=None, path=None, text_column="text", block_size=32, max_train_samples=None)
    return {
        "data": {**base, **data},
        "model": {"tokenizer": {"pretrained": None, "kind": "byte_level_bpe", "vocab_size": 300}},
        "cache_dir": str(cache),
    }


def test_group_texts_packs_full_blocks_with_labels():
    out = group_texts({"input_ids": [[1, 2, 3], [4, 5, 6, 7]], "attention_mask": [[1] * 3, [1] * 4]}, block_size=3)
    assert out["input_ids"] == [[1, 2, 3], [4, 5, 6]]
    assert out["labels"] == out["input_ids"]


def test_pydoc_prose_is_prepared_once_and_cached(tmp_path):
    first = prepare(data_config(tmp_path))
    assert first.num_train_blocks > 10 * first.num_validation_blocks > 0
    tokenizer = load_tokenizer(first.tokenizer_path)
    assert len(tokenizer) == 300
    validation = datasets.load_from_disk(first.validation_path)
    assert validation.column_names == ["input_ids", "attention_mask", "labels"]
    assert all(len(row) == 32 for row in validation["input_ids"])
    again = prepare(data_config(tmp_path))
    assert again == first


def test_local_text_files_with_wikitext_names(tmp_path):
    folder = tmp_path / "wikitext"
    folder.mkdir()
    prose = "The quick brown fox jumps over the lazy dog. " * 40
    (folder / "wiki.train.raw").write_text("\n".join([prose] * 20))
    (folder / "wiki.valid.raw").write_text(prose)
    prepared = prepare(data_config(tmp_path / "cache", source="local", path=str(folder)))
    assert prepared.num_train_blocks > prepared.num_validation_blocks > 0


def test_local_csv_with_a_missing_text_column_names_the_key(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    for split in ("train", "validation"):
        (folder / f"{split}.csv").write_text("sentence,label\nhello there,1\n")
    with pytest.raises(ConfigError, match=r"data\.text_column: 'text' is not a column of the \w+ split \(columns: sentence, label\)"):
        prepare(data_config(tmp_path / "cache", source="local", path=str(folder)))


def test_local_folder_without_validation_file(tmp_path):
    (tmp_path / "train.txt").write_text("hello")
    with pytest.raises(ConfigError, match=r"data\.path: '.*' has no validation file"):
        prepare(data_config(tmp_path / "cache", source="local", path=str(tmp_path)))
