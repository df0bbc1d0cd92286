"""Data loading from local files and pydoc prose, tokenizer training, packing and encoding,
caching, and the offline proxy classification data."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import datasets
import pyarrow.parquet
import pytest
from omegaconf import OmegaConf

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, ModelConfig, SweepConfig, typed
from hfsweep.data import offline as datasets_offline
from hfsweep.data.tokenizers import load_tokenizer
from hfsweep.tasks.causal_lm import group_texts
from tests.conftest import prepare_data, write_glue_pairs


def data_config(cache, task="causal_lm", tokenizer="byte_level_bpe", **data):
    return {
        "data": {
            **OmegaConf.to_container(OmegaConf.structured(DataConfig), enum_to_str=True),
            "block_size": 32,
            **data,
        },
        "model": {"task": task, "tokenizer": {"pretrained": None, "kind": tokenizer, "vocab_size": 300}},
        "cache_dir": str(cache),
    }


def classification_config(cache, path, **data):
    return data_config(
        cache, "sequence_classification", "wordpiece", source="local", path=str(path), max_length=48, **data
    )


@pytest.fixture(scope="module")
def proxy_data(tmp_path_factory):
    return datasets_offline.write(str(tmp_path_factory.mktemp("offline")))


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_group_texts_packs_full_blocks_with_labels():
    out = group_texts([[1, 2, 3], [4, 5, 6, 7]], block_size=3)
    assert out["input_ids"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert out["labels"].tolist() == out["input_ids"].tolist()
    assert out["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 1]]


def test_pydoc_prose_is_prepared_once_and_cached(tmp_path, monkeypatch):
    from hfsweep.tasks.causal_lm import TASK

    tokenized = []
    preprocess = TASK.preprocess
    monkeypatch.setattr(TASK, "preprocess", lambda *args: tokenized.append(args[-1]) or preprocess(*args))
    first = prepare_data(data_config(tmp_path, num_proc=1))  # in this process, where the counter is
    assert tokenized[-1] == "validation" and set(tokenized) == {"train", "validation"}
    assert first.num_train_blocks > 10 * first.num_validation_blocks > 0
    tokenizer = load_tokenizer(first.tokenizer_path)
    assert len(tokenizer) == 300
    validation = datasets.load_from_disk(first.validation_path)
    assert validation.column_names == ["input_ids", "attention_mask", "labels"]
    assert all(len(row) == 32 for row in validation["input_ids"])
    calls = len(tokenized)
    again = prepare_data(data_config(tmp_path))  # num_proc is not part of the data
    assert again == first
    assert len(tokenized) == calls, "the second sweep on the same data tokenized it again"


def test_local_text_files_with_wikitext_names(tmp_path):
    folder = tmp_path / "wikitext"
    folder.mkdir()
    prose = "The quick brown fox jumps over the lazy dog. " * 40
    (folder / "wiki.train.raw").write_text("\n".join([prose] * 20))
    (folder / "wiki.valid.raw").write_text(prose)
    prepared = prepare_data(data_config(tmp_path / "cache", source="local", path=str(folder)))
    assert prepared.num_train_blocks > prepared.num_validation_blocks > 0


def test_the_wikitext_proxy_is_the_default_prose_in_wikitext_file_names(proxy_data, tmp_path):
    proxy = prepare_data(data_config(tmp_path / "cache", source="local", path=str(proxy_data["wikitext_proxy"])))
    pydoc = prepare_data(data_config(tmp_path / "cache"))
    assert (proxy.num_train_blocks, proxy.num_validation_blocks) == (
        pydoc.num_train_blocks,
        pydoc.num_validation_blocks,
    )
    assert (
        datasets.load_from_disk(proxy.validation_path)["input_ids"]
        == datasets.load_from_disk(pydoc.validation_path)["input_ids"]
    )


def test_local_csv_with_a_missing_text_column_names_the_key(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    for split in ("train", "validation"):
        (folder / f"{split}.csv").write_text("sentence,label\nhello there,1\n")
    with pytest.raises(
        ConfigError, match=r"data\.text_column: 'text' is not a column of the \w+ split \(columns: sentence, label\)"
    ):
        prepare_data(data_config(tmp_path / "cache", source="local", path=str(folder)))


def test_local_folder_without_validation_file(tmp_path):
    (tmp_path / "train.txt").write_text("hello")
    with pytest.raises(ConfigError, match=r"data\.path: '.*' has no validation file"):
        prepare_data(data_config(tmp_path / "cache", source="local", path=str(tmp_path)))


def write_imbalanced_csv(folder, rows: int = 200) -> Path:
    """Unique sentences, one in ten of class 1, as train.csv, validation.csv and test.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, offset in (("train", 0), ("validation", 10_000), ("test", 20_000)):
        lines = ["text,label", *[f"sentence number {offset + i},{int(i % 10 == 0)}" for i in range(rows)]]
        (folder / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return folder


def held_out_splits(tmp_path, **data):
    from hfsweep.data.prepare import raw_splits
    from hfsweep.tasks.sequence_classification import TASK

    folder = tmp_path / "imbalanced"
    cfg = classification_config(tmp_path / "cache", folder if folder.exists() else write_imbalanced_csv(folder), **data)
    return raw_splits(typed(DataConfig, cfg["data"]), str(tmp_path / "cache"), TASK)


def test_a_validation_share_is_carved_from_train_seeded_stratified_and_disjoint(tmp_path):
    raw = held_out_splits(tmp_path, validation_split_percentage=25, test_split="validation")
    train, validation, test = (raw[split]["text"] for split in ("train", "validation", "test"))
    assert len(validation) == 50 and len(train) == 150
    assert set(train).isdisjoint(validation) and set(train) | set(validation) == {
        f"sentence number {i}" for i in range(200)
    }, "the carve splits the train split, nothing else"
    assert raw["validation"]["label"].count(1) == 5, "stratified: the validation set keeps the 10% of class 1"
    assert test == [f"sentence number {10_000 + i}" for i in range(200)], "the named split is the test split, whole"
    again = held_out_splits(tmp_path, validation_split_percentage=25, test_split="validation")
    assert again["validation"]["text"] == validation, "seeded by data.split_seed"
    other = held_out_splits(tmp_path, validation_split_percentage=25, split_seed=7)
    assert other["validation"]["text"] != validation and "test" not in other


def test_an_image_carve_is_stratified_by_the_tasks_own_label_column(tmp_path):
    """Image classification names its label column as a task option (data.label_column is the
    text tasks'): the carve keeps the shares of that column's classes, here 10% of class 1."""
    from hfsweep.data.prepare import carve_validation
    from hfsweep.tasks.image_classification import ImageClassification

    digits = datasets.Features({"pixels": datasets.Value("int64"), "digit": datasets.ClassLabel(names=["0", "1"])})
    rows = {"pixels": list(range(200)), "digit": [int(i % 10 == 0) for i in range(200)]}
    raw = datasets.DatasetDict(train=datasets.Dataset.from_dict(rows, features=digits))
    data_cfg = typed(DataConfig, {**data_config(tmp_path)["data"], "validation_split_percentage": 25})
    carved = carve_validation(raw, data_cfg, ImageClassification(image_column="pixels", label_column="digit"))
    assert carved["validation"]["digit"].count(1) == 5 and carved["train"]["digit"].count(1) == 15


def test_image_labels_are_the_train_splits_classes_in_every_split():
    """A validation split without one of train's classes (no 'dog') keeps train's ids for the
    others: 'fish' is class 2 in both, as the model's label names say."""
    from hfsweep.tasks.image_classification import ImageClassification

    raw = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"image": [0, 1, 2], "label": ["cat", "dog", "fish"]}),
        validation=datasets.Dataset.from_dict({"image": [0, 1], "label": ["cat", "fish"]}),
    )
    encoded = ImageClassification().prepare_raw(raw, typed(DataConfig, {}))
    assert encoded["validation"].features["label"].names == ["cat", "dog", "fish"]
    assert encoded["validation"]["label"] == [0, 2]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_an_example_without_a_label_is_refused_in_one_line_naming_its_row(tmp_path, split):
    """A blank label cell: in train it would make the column floats and the task a regression on a
    NaN target; in validation, a traceback from the class check."""
    folder = tmp_path / "blank"
    folder.mkdir()
    rows = {
        name: "text,label\n" + "".join(f"sentence {i},{i % 2}\n" for i in range(10)) for name in ("train", "validation")
    }
    rows[split] += "a sentence without a label,\n"
    for name, text in rows.items():
        (folder / f"{name}.csv").write_text(text)
    with pytest.raises(
        ConfigError,
        match=rf"^data\.label_column: 'label' of the {split} split is empty in 1 of its examples \(10, counting",
    ):
        prepare_data(classification_config(tmp_path / "cache", folder))


def test_a_tokenizer_retrained_into_the_same_folder_prepares_the_data_anew(tmp_path):
    """The cache key holds what a local tokenizer folder's files hold, not only its path."""
    from hfsweep.data.tokenizers import _wordpiece

    folder = write_imbalanced_csv(tmp_path / "data", rows=40)
    texts = [f"sentence number {i}" for i in range(40)]
    tokenizer = tmp_path / "tokenizer"
    _wordpiece(iter(texts), 40).save_pretrained(tokenizer)
    cfg = classification_config(tmp_path / "cache", folder)
    cfg["model"]["tokenizer"]["pretrained"] = str(tokenizer)
    first = prepare_data(cfg)
    _wordpiece(iter(texts), 200).save_pretrained(tokenizer)
    second = prepare_data(cfg)
    assert second.validation_path != first.validation_path
    encoded = datasets.load_from_disk(second.validation_path)[0]["input_ids"]
    assert (
        encoded == load_tokenizer(str(tokenizer))("sentence number 10000", truncation=True, max_length=48)["input_ids"]
    )


def test_csv_and_tsv_files_in_one_folder_are_refused_as_a_mix(tmp_path):
    """One delimiter reads every file of a folder, so a tab-separated dev set beside a train.csv
    would be read with commas."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "train.csv").write_text("text,label\na b,1\nc d,0\n")
    (folder / "validation.tsv").write_text("text\tlabel\na b\t1\n")
    with pytest.raises(ConfigError, match=r"^data\.path: '.*mixed' mixes file types \['\.csv', '\.tsv'\]; use one"):
        prepare_data(classification_config(tmp_path / "cache", folder))


def test_a_test_split_is_read_beside_train_and_validation_and_a_missing_one_is_refused(tmp_path):
    raw = held_out_splits(tmp_path, test_split="test", max_eval_samples=20)
    assert [raw[split].num_rows for split in ("train", "validation", "test")] == [200, 20, 200]
    assert raw["test"][0]["text"] == "sentence number 20000"
    (tmp_path / "imbalanced" / "test.csv").unlink()
    with pytest.raises(ConfigError, match=r"^data\.test_split: 'test' is not a split of the files of data\.path"):
        held_out_splits(tmp_path, test_split="test")


def test_a_hub_datasets_test_split_is_read_by_name_and_a_missing_one_is_refused(tmp_path, monkeypatch):
    """As for GLUE on the hub: `datasets.load_dataset` hands back every split, the config names the roles."""
    from datasets import Dataset, DatasetDict

    from hfsweep.data import sources

    splits = DatasetDict({name: Dataset.from_dict({"text": [name]}) for name in ("train", "validation", "test")})
    monkeypatch.setattr(sources.datasets, "load_dataset", lambda *args, **kwargs: splits)
    hub = {"source": "hub", "name": "glue", "config_name": "mrpc"}
    raw = sources.load_raw(typed(DataConfig, {**hub, "test_split": "test"}), str(tmp_path))
    assert {role: raw[role]["text"] for role in raw} == {
        "train": ["train"],
        "validation": ["validation"],
        "test": ["test"],
    }
    carved = sources.load_raw(
        typed(DataConfig, {**hub, "test_split": "validation", "validation_split_percentage": 20}), ""
    )
    assert sorted(carved) == ["test", "train"] and carved["test"]["text"] == ["validation"]
    with pytest.raises(ConfigError) as refused:
        sources.load_raw(typed(DataConfig, {**hub, "test_split": "test_matched"}), str(tmp_path))
    assert str(refused.value) == (
        "data.test_split: 'test_matched' is not a split of 'glue' (splits: train, validation, test); "
        "set data.test_split."
    )


OFFLINE_PRESETS = sorted(  # those that name their stand-in data (SWAG's own files have none: test_config)
    p.stem
    for p in (Path(__file__).parents[2] / "conf" / "experiment").glob("*_offline.yaml")
    if "\n  proxy:" in p.read_text()
)


@pytest.mark.parametrize("preset", OFFLINE_PRESETS)
def test_an_offline_preset_writes_its_own_data_into_the_cache_on_first_use(preset, tmp_path_factory):
    """`python -m hfsweep +experiment=NAME_offline` as the experiments' READMEs run it: the preflight
    writes the preset's `data.proxy` into cache_dir (once; every preset of a cache shares it)."""
    from hfsweep.driver.preflight import preflight
    from tests.conftest import resolved_config

    cache = tmp_path_factory.getbasetemp() / "offline_presets_cache"
    checked = preflight(resolved_config([f"+experiment={preset}"], tmp_path_factory.mktemp(preset), cache))
    path = checked.sweep.data.path
    assert path.startswith(str(cache)) and path.endswith(checked.sweep.data.proxy)
    assert len(os.listdir(path)) >= 2, "a train and a validation file"


def test_a_data_path_wins_over_the_proxy_and_an_unknown_proxy_is_refused(tmp_path):
    from hfsweep.driver.preflight import preflight
    from tests.conftest import resolved_config

    given = write_glue_pairs(tmp_path / "pairs")
    checked = preflight(
        resolved_config(["+experiment=bert_mrpc_offline", f"data.path={given}"], tmp_path, tmp_path / "cache")
    )
    assert checked.sweep.data.path == str(given) and not (tmp_path / "cache" / "offline_data").exists()
    with pytest.raises(ConfigError, match=r"^data.proxy: no stand-in data named 'mrpc'; choose one of mrpc_proxy, "):
        preflight(resolved_config(["+experiment=bert_mrpc_offline", "data.proxy=mrpc"], tmp_path, tmp_path / "cache"))


def test_proxy_data_has_the_real_columns_balanced_pairs_and_disjoint_splits(proxy_data):
    pairs = {split: read_csv(f"{proxy_data['mrpc_proxy']}/{split}.csv") for split in ("train", "validation")}
    assert list(pairs["train"][0]) == ["sentence1", "sentence2", "label"]
    assert [r["label"] for r in pairs["validation"]].count("1") == len(pairs["validation"]) // 2
    sentences = {split: {r["sentence1"] for r in rows} for split, rows in pairs.items()}
    assert not sentences["train"] & sentences["validation"]
    single = read_csv(f"{proxy_data['yelp_proxy']}/train.csv")
    assert list(single[0]) == ["text", "label"] and {r["label"] for r in single} == {"0", "1", "2", "3", "4"}
    datasets_offline.write(str(proxy_data["mrpc_proxy"]) + "_again")  # the same files every time
    assert read_csv(f"{proxy_data['mrpc_proxy']}_again/mrpc_proxy/train.csv") == pairs["train"]


def test_padding_each_batch_gives_the_same_eval_loss_as_padding_to_max_length(proxy_data, tmp_path):
    """The rows keep their own lengths and the task's collator pads each batch; the model's loss is
    what it is with every example padded to data.max_length (run_glue's pad_to_max_length)."""
    import transformers

    from hfsweep.driver.results.evaluation import evaluate_model
    from hfsweep.models import build_model
    from hfsweep.tasks import get_task

    losses, stored = {}, {}
    for padded in (True, False):
        cfg = classification_config(
            tmp_path / "cache",
            proxy_data["mrpc_proxy"],
            text_column="sentence1",
            pair_column="sentence2",
            pad_to_max_length=padded,
            max_eval_samples=64,
        )
        cfg["data"]["max_length"] = 256  # longer than every pair: each batch pads less
        cfg["model"].update(
            config={
                "model_type": "bert",
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "initializer_range": 0.5,
            },
            pretrained=None,
        )  # far from chance
        prepared = prepare_data(cfg)
        tokenizer = load_tokenizer(prepared.tokenizer_path)
        transformers.set_seed(0)
        model = build_model(
            typed(ModelConfig, cfg["model"]), tokenizer, prepared.label_names, task=get_task(cfg["model"]["task"])
        )
        collator = get_task("sequence_classification").collator(tokenizer, "validation")
        losses[padded] = evaluate_model(
            model, tokenizer, prepared.validation_path, batch_size=8, data_collator=collator
        )
        stored[padded] = sum(len(ids) for ids in datasets.load_from_disk(prepared.validation_path)["input_ids"])
    assert losses[False] == pytest.approx(losses[True], rel=1e-5)
    assert stored[True] == 64 * 256 and stored[False] < stored[True], stored  # no padding stored


def test_sentence_pairs_are_encoded_for_bert_with_their_classes(proxy_data, tmp_path):
    prepared = prepare_data(
        classification_config(tmp_path, proxy_data["mrpc_proxy"], text_column="sentence1", pair_column="sentence2")
    )
    assert prepared.label_names == ["0", "1"]
    validation = datasets.load_from_disk(prepared.validation_path)
    assert validation.column_names == ["input_ids", "token_type_ids", "attention_mask", "labels"]
    assert validation.features["labels"].names == ["0", "1"]
    lengths = [len(ids) for ids in validation["input_ids"]]
    assert max(lengths) <= 48 and min(lengths) < max(lengths), "truncated to data.max_length, not padded to it"
    assert all(sum(mask) == len(mask) for mask in validation["attention_mask"]), "no padding stored"
    tokenizer = load_tokenizer(prepared.tokenizer_path)
    tokens = tokenizer.convert_ids_to_tokens(validation[0]["input_ids"])
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
    assert 1 in validation[0]["token_type_ids"]  # the second sentence is segment 1
    train = pyarrow.parquet.read_table(prepared.train_path)
    assert train.num_rows == prepared.num_train_blocks == 4000


def test_string_labels_become_named_classes_and_subsets_apply(tmp_path):
    folder = tmp_path / "reviews"
    folder.mkdir()
    rows = [
        "text,stars",
        *[f"review number {i} was {'great' if i % 2 else 'bad'},{'good' if i % 2 else 'poor'}" for i in range(30)],
    ]
    for split in ("train", "validation"):
        (folder / f"{split}.csv").write_text("\n".join(rows))
    cfg = classification_config(
        tmp_path / "cache", folder, label_column="stars", max_train_samples=10, max_eval_samples=5
    )
    prepared = prepare_data(cfg)
    assert prepared.label_names == ["good", "poor"]
    assert (prepared.num_train_blocks, prepared.num_validation_blocks) == (10, 5)
    with pytest.raises(ConfigError, match=r"data\.num_labels: 3, but 'stars' holds 2 classes"):
        prepare_data({**cfg, "data": {**cfg["data"], "num_labels": 3}})


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"label_column": "score"},
            r"data\.label_column: 'score' is not a column of the \w+ split \(columns: text, label\); set "
            r"data\.label_column",
        ),
        ({"pair_column": "sentence2"}, r"data\.pair_column: 'sentence2' is not a column"),
        ({"text_column": "review"}, r"data\.text_column: 'review' is not a column"),
    ],
)
def test_a_missing_classification_column_names_the_key(proxy_data, tmp_path, data, message):
    with pytest.raises(ConfigError, match=message):
        prepare_data(classification_config(tmp_path, proxy_data["yelp_proxy"], **data))


def test_glue_tsv_is_refused_in_one_line_without_quoting_and_read_with_it(tmp_path):
    folder = write_glue_pairs(tmp_path / "mrpc", counts={"train": 20, "dev": 10})
    columns = {"text_column": "#1 String", "pair_column": "#2 String", "label_column": "Quality"}
    with pytest.raises(ConfigError) as refused:
        prepare_data(classification_config(tmp_path / "cache", folder, **columns))
    assert str(refused.value) == (
        f"data.path: cannot parse '{folder}/train.tsv' as csv (ParserError: Error tokenizing data. C error: EOF inside "
        "string starting at row 11); quote characters inside unquoted fields (as in GLUE's TSVs): "
        "+data.load_kwargs.quoting=3; "
        "other pandas.read_csv options (delimiter, column_names, skiprows, encoding) go in data.load_kwargs too."
    )
    prepared = prepare_data(classification_config(tmp_path / "cache", folder, load_kwargs={"quoting": 3}, **columns))
    assert (
        prepared.label_names == ["0", "1"] and prepared.num_train_blocks == 20 and prepared.num_validation_blocks == 10
    )


@pytest.mark.process
def test_a_file_the_reader_cannot_parse_is_refused_by_the_cli_in_one_line_before_ray(tmp_path):
    import subprocess
    import sys

    folder = write_glue_pairs(tmp_path / "mrpc", counts={"train": 20, "dev": 10})
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hfsweep",
            "+experiment=bert_mrpc_offline",
            f"data.path={folder}",
            "data.text_column='#1 String'",
            "data.pair_column='#2 String'",
            "data.label_column=Quality",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and not run_dir.exists()
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"hfsweep: error: data.path: cannot parse '{folder}/train.tsv' as csv (ParserError: ")
    assert line.endswith(
        "+data.load_kwargs.quoting=3; other pandas.read_csv options (delimiter, column_names, skiprows, encoding) go "
        "in data.load_kwargs too."
    )


def write_prose_folder(folder, lines: int = 400):
    """Numbered lines of prose (each line a document) as train.txt and validation.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    words = "the quick brown fox jumps over the lazy dog while a sweep tunes its learning rate".split()
    (folder / "train.txt").write_text(
        "\n".join(f"{i} " + " ".join(words[i % 7 :] + words[: i % 7]) for i in range(lines))
    )
    (folder / "validation.txt").write_text("\n".join(" ".join(words) for _ in range(20)))
    return folder


def shard_tables(prepared) -> list:
    import glob

    return [pyarrow.parquet.read_table(p) for p in sorted(glob.glob(f"{prepared.train_path}/*.parquet"))]


@pytest.mark.process
def test_the_train_split_is_tokenized_in_chunks_into_the_same_shards_by_one_process_or_two(tmp_path):
    folder = write_prose_folder(tmp_path / "prose")
    by = {
        n: prepare_data(
            data_config(tmp_path / f"cache{n}", source="local", path=str(folder), chunk_rows=50, num_proc=n)
        )
        for n in (1, 2)
    }
    one, two = shard_tables(by[1]), shard_tables(by[2])
    assert len(one) == len(two) == 8  # 400 lines / 50 per chunk
    assert all(a.equals(b) for a, b in zip(one, two))
    assert by[1].num_train_blocks == by[2].num_train_blocks == sum(t.num_rows for t in one) > 0
    assert by[1].num_train_tokens == 32 * by[1].num_train_blocks  # packed blocks: every token is real


def test_a_token_budget_stops_preparation_once_the_shards_hold_that_many_tokens(tmp_path):
    folder = write_prose_folder(tmp_path / "prose")
    whole = prepare_data(data_config(tmp_path / "cache", source="local", path=str(folder), chunk_rows=50, num_proc=1))
    budget = prepare_data(
        data_config(
            tmp_path / "cache", source="local", path=str(folder), chunk_rows=50, num_proc=1, max_train_tokens=1000
        )
    )
    assert budget.num_train_tokens == 1024 and budget.num_train_blocks == 32  # the 32-token block that reaches 1000
    tables = shard_tables(budget)
    assert sum(t.num_rows for t in tables) == 32 < whole.num_train_blocks
    assert tables[0].equals(shard_tables(whole)[0].slice(0, tables[0].num_rows)), "a budget keeps the split's beginning"


@pytest.mark.process
def test_a_streamed_split_is_prepared_by_the_pool_as_the_same_shards_as_the_file_read_whole(tmp_path, monkeypatch):
    """Two pool processes tokenize the stream, which is read at most 2 chunks per process (4)
    ahead of the shards written: each chunk read records the pool's processes and the shards
    on disk at that moment."""
    import contextlib

    import psutil

    from hfsweep.data import shards

    folder = write_prose_folder(tmp_path / "prose")
    whole = prepare_data(data_config(tmp_path / "cache", source="local", path=str(folder), chunk_rows=50, num_proc=1))
    streamed_cfg = data_config(
        tmp_path / "streamed", source="local", path=str(folder), chunk_rows=50, num_proc=2, streaming=True
    )
    streamed_cfg["model"]["tokenizer"]["pretrained"] = whole.tokenizer_path
    reads = []  # per chunk read: (pool processes alive, shards written)

    def pool_processes() -> int:  # this process's children started by multiprocessing's spawn
        alive = 0
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.NoSuchProcess):  # one that ended meanwhile
                alive += "spawn_main" in " ".join(child.cmdline())
        return alive

    def recorded_chunks(split, chunk_rows):
        for chunk in chunks(split, chunk_rows):
            reads.append((pool_processes(), len(list((tmp_path / "streamed").glob("**/part-*.parquet")))))
            yield chunk

    chunks = shards._chunks
    monkeypatch.setattr(shards, "_chunks", recorded_chunks)
    streamed = prepare_data(streamed_cfg)
    assert streamed.train_path != whole.train_path
    assert [t.to_pydict() for t in shard_tables(streamed)] == [t.to_pydict() for t in shard_tables(whole)]
    assert streamed.num_validation_blocks == whole.num_validation_blocks
    assert len(reads) == 8 and max(alive for alive, _ in reads) == 2, reads
    assert all(written >= index - 4 + 1 for index, (_, written) in enumerate(reads)), (
        f"more than 4 chunks read ahead: {reads}"
    )


@pytest.mark.parametrize("kind", ["byte_level_bpe", "wordpiece", "roberta_bpe", "unigram"])
def test_token_ids_are_the_tokenizers_own_input_ids_and_a_truncating_backend_goes_through_transformers(tmp_path, kind):
    from hfsweep.data.tokenizers import token_ids

    folder = write_prose_folder(tmp_path / "prose")
    tokenizer = load_tokenizer(
        prepare_data(data_config(tmp_path / "cache", tokenizer=kind, source="local", path=str(folder))).tokenizer_path
    )
    texts = (folder / "train.txt").read_text().splitlines()[:50] + ["", "<|endoftext|> [SEP] </s> unseen wörds ☃"]
    assert token_ids(tokenizer, texts) == tokenizer(texts)["input_ids"]
    tokenizer.backend_tokenizer.enable_truncation(
        max_length=4
    )  # transformers turns it off for a call without truncation
    assert (
        token_ids(tokenizer, texts) == tokenizer(texts)["input_ids"] != [ids[:4] for ids in token_ids(tokenizer, texts)]
    )


@pytest.mark.parametrize("experiment", ["bert_squad_offline", "t5_wmt16_ro_en_offline", "gpt2_wikitext_offline"])
def test_the_typed_data_config_names_the_prepared_data_as_the_resolved_dict_does(experiment, tmp_path):
    """The data layer reads `data.*` typed (`DataConfig`, enum members for the closed sets), yet the
    prepared data's cache key holds the same plain values as the resolved config: a sweep prepared
    before finds its cache, and what a trial compares to decide whether to prepare anew is the same."""
    from hfsweep.config.schema import DataSource
    from hfsweep.data.prepared import NOT_PREPARED, what_is_prepared
    from tests.conftest import resolved_config

    cfg = resolved_config([f"+experiment={experiment}"], tmp_path / "run", tmp_path / "cache")
    data_cfg = typed(DataConfig, cfg["data"])
    assert isinstance(data_cfg.source, DataSource) and data_cfg.max_length == cfg["data"]["max_length"]
    assert what_is_prepared(data_cfg) == {k: v for k, v in cfg["data"].items() if k not in NOT_PREPARED}


@pytest.mark.parametrize("kind", ["byte_level_bpe", "wordpiece"])
def test_the_typed_tokenizer_config_finds_the_tokenizer_the_resolved_dict_named(tmp_path, kind):
    """`tokenizer_for` reads `model.tokenizer` typed (its kind an enum member), yet a tokenizer trained
    by an earlier version, cached under the hash of the plain settings, is found, not trained anew."""
    import hashlib
    import json

    from hfsweep.compat import dataset_fingerprint
    from hfsweep.config.schema import TokenizerConfig
    from hfsweep.data.tokenizers import tokenizer_for

    settings = {"pretrained": None, "kind": kind, "vocab_size": 300}
    train = datasets.Dataset.from_dict({"text": ["a tokenizer learns from these words", "and from these"] * 20})
    blob = json.dumps({"tokenizer": settings, "corpus": dataset_fingerprint(train), "texts": ["text"]}, sort_keys=True)
    cached = tmp_path / "tokenizers" / hashlib.sha256(blob.encode()).hexdigest()[:16]
    path = tokenizer_for(typed(TokenizerConfig, settings), train, lambda row: [row["text"]], ["text"], str(tmp_path))
    assert path == str(cached) and load_tokenizer(path).tokenize("these words")


def prepare_apart_data(cfg: dict):
    """The sweep's data prepared as `sweep.run` prepares it on the driver: in a spawned process."""
    from hfsweep.data.prepare import prepare_apart
    from hfsweep.driver.preflight import task_of

    sweep = typed(SweepConfig, cfg)
    return prepare_apart(sweep.data, sweep.model, sweep.cache_dir, task_of(sweep))


@pytest.mark.process
def test_the_driver_prepares_apart_gaining_no_thread_and_a_refusal_comes_back_whole(tmp_path):
    """`prepare_apart` tokenizes in a spawned process, so the driver holds no tokenizer thread when
    it starts Ray (its fork with a `preexec_fn` is unsafe beside threads): in a fresh process, as
    the CLI's driver, its threads are as many after as before. The data is the one `prepare` makes
    in process, and a refusal raised in the spawned process comes back as the same ConfigError."""
    import subprocess
    import sys

    code = (
        "import os; from tests.unit.test_data import data_config, prepare_apart_data; "
        "before = len(os.listdir('/proc/self/task')); "
        f"prepare_apart_data(data_config({str(tmp_path)!r}, num_proc=2)); "
        "print(len(os.listdir('/proc/self/task')) - before)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "0", "tokenizing started threads in the driver"
    assert prepare_data(data_config(tmp_path)) == prepare_apart_data(data_config(tmp_path))  # one cached data

    folder = write_glue_pairs(tmp_path / "mrpc", counts={"train": 20, "dev": 10})
    columns = {"text_column": "#1 String", "pair_column": "#2 String", "label_column": "Quality"}
    with pytest.raises(ConfigError, match=r"^data\.path: cannot parse '.*/train\.tsv' as csv \(ParserError: "):
        prepare_apart_data(classification_config(tmp_path / "cache", folder, **columns))
