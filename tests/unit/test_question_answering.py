"""Question answering's data and post-processing: SQuAD's nested json (v1.1 and v2.0), answer spans
as token labels across overlapping features, and logits mapped back to the best text span."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import Dataset

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, typed
from hfsweep.data.sources import load_raw
from hfsweep.data.tokenizers import TOKENIZER_TRAINERS
from hfsweep.tasks import with_options
from hfsweep.tasks.base import EvalContext
from hfsweep.tasks.question_answering import TASK, best_answer
from tests.conftest import resolved_config

CONTEXT = "The tower was built in Paris by Gustave Eiffel for the fair of 1889 and it still stands there today."
SQUAD_V2 = {
    "version": "v2.0",
    "data": [
        {
            "title": "Tower",
            "paragraphs": [
                {
                    "context": CONTEXT,
                    "qas": [
                        {
                            "id": "q1",
                            "question": "Who built the tower?",
                            "answers": [{"text": "Gustave Eiffel", "answer_start": 32}],
                            "is_impossible": False,
                        },
                        {
                            "id": "q2",
                            "question": "Who painted it?",
                            "answers": [],
                            "is_impossible": True,
                            "plausible_answers": [{"text": "Gustave Eiffel", "answer_start": 32}],
                        },
                    ],
                }
            ],
        }
    ],
}


def data_cfg(tmp_path, **overrides) -> DataConfig:
    cfg = resolved_config(
        ["+experiment=bert_squad_offline", f"data.path={tmp_path}"], tmp_path / "run", tmp_path / "cache"
    )
    return typed(DataConfig, {**cfg["data"], **overrides})


@pytest.fixture(scope="module")
def tokenizer():
    words = (CONTEXT + " Who built the tower? Who painted it? Where is the tower?").split() * 30
    return TOKENIZER_TRAINERS["wordpiece"](words, 200)


def test_squad_nested_json_is_read_as_flat_rows_with_unanswerable_questions_empty(tmp_path):
    for split in ("train", "validation"):
        (tmp_path / f"{split}.json").write_text(json.dumps(SQUAD_V2))
    raw = load_raw(data_cfg(tmp_path), str(tmp_path / "cache"), TASK)
    rows = raw["validation"].to_list()
    assert [r["id"] for r in rows] == ["q1", "q2"] and rows[0]["context"] == CONTEXT and rows[0]["title"] == "Tower"
    assert rows[0]["answers"] == {"text": ["Gustave Eiffel"], "answer_start": [32]}
    assert rows[1]["answers"] == {"text": [], "answer_start": []}  # plausible answers are not answers


def test_a_long_context_becomes_overlapping_features_and_only_those_holding_the_answer_point_at_it(tokenizer, tmp_path):
    cfg = data_cfg(tmp_path, max_length=24)
    row = {
        "id": "q1",
        "question": "Who built the tower?",
        "context": CONTEXT,
        "answers": {"text": ["Gustave Eiffel"], "answer_start": [32]},
    }
    features = with_options(TASK, {"doc_stride": 8}).preprocess(Dataset.from_list([row]), tokenizer, cfg, "validation")
    assert features.num_rows > 1 and set(features["example_id"]) == {"q1"}
    for feature in features:
        start, end = feature["start_positions"], feature["end_positions"]
        if start == 0:  # [CLS]: this feature does not hold the whole answer
            continue
        offsets = feature["offset_mapping"]
        assert CONTEXT[offsets[start][0] : offsets[end][1]] == "Gustave Eiffel"
    assert any(f["start_positions"] > 0 for f in features) and any(f["start_positions"] == 0 for f in features)
    question_tokens = [o for o, t in zip(features[0]["offset_mapping"], features[0]["token_type_ids"]) if t == 0]
    assert all(o == [-1, -1] for o in question_tokens)  # only context tokens map back to text


def test_a_left_padding_tokenizer_needs_each_feature_padded_to_max_length(tokenizer, tmp_path):
    """Answer positions are set when a feature is tokenized; a batch padded on the left afterwards
    would move every token but not them, so padding per batch is refused for such a tokenizer."""
    import copy

    left = copy.deepcopy(tokenizer)
    left.padding_side = "left"
    ds = Dataset.from_dict(
        {
            "id": ["q1"],
            "question": ["Who built the tower?"],
            "context": [CONTEXT],
            "answers": [{"text": ["Gustave Eiffel"], "answer_start": [CONTEXT.index("Gustave")]}],
        }
    )
    task = with_options(TASK, {"doc_stride": 8})
    with pytest.raises(ConfigError, match=r"^data\.pad_to_max_length: this tokenizer pads on the left"):
        task.preprocess(ds, left, data_cfg(tmp_path, max_length=24, pad_to_max_length=False), "train")
    assert len(task.preprocess(ds, left, data_cfg(tmp_path, max_length=24, pad_to_max_length=True), "train")) >= 1


def test_the_best_valid_span_wins_and_v2_answers_nothing_when_the_null_score_is_higher():
    offsets = [[[-1, -1], [0, 3], [4, 9], [10, 13], [14, 19]]]  # [CLS] then four context words
    context = "The tower was built"
    starts = np.array([[0.0, 1.0, 5.0, 0.0, 0.0]])
    ends = np.array([[0.0, 0.0, 1.0, 6.0, 0.0]])
    assert best_answer(context, [0], starts, ends, offsets, TASK) == "tower was"
    assert (
        best_answer(context, [0], starts, ends, offsets, with_options(TASK, {"max_answer_length": 1})) == "tower"
    )  # 2 tokens are too long
    null_first = (np.array([[20.0, 1.0, 5.0, 0.0, 0.0]]), ends)
    assert best_answer(context, [0], *null_first, offsets, with_options(TASK, {"version_2_with_negative": True})) == ""
    assert best_answer(context, [0], *null_first, offsets, TASK) == "tower was"  # v1: there is always an answer


def test_logits_pointing_at_the_answers_score_exact_match_100(tokenizer, tmp_path):
    """The whole path the Trainer's compute_metrics takes: prepared features and examples on disk."""
    cfg = data_cfg(tmp_path, max_length=24)
    row = {
        "id": "q1",
        "question": "Who built the tower?",
        "context": CONTEXT,
        "answers": {"text": ["Gustave Eiffel"], "answer_start": [32]},
    }
    raw = Dataset.from_list([row])
    features = with_options(TASK, {"doc_stride": 8}).preprocess(raw, tokenizer, cfg, "validation")
    features.save_to_disk(str(tmp_path / "prepared" / "validation"))
    TASK.save_validation_examples(raw, cfg, str(tmp_path / "prepared"))
    starts, ends = np.full((features.num_rows, 24), -10.0), np.full((features.num_rows, 24), -10.0)
    for i, feature in enumerate(features):
        starts[i, feature["start_positions"]] = ends[i, feature["end_positions"]] = (
            10.0 if feature["start_positions"] else -5.0
        )
    compute = TASK.compute_metrics(
        ["squad"], EvalContext(validation_path=str(tmp_path / "prepared" / "validation"), data_cfg=cfg)
    )
    assert compute(((starts, ends), None)) == {"exact_match": 100.0, "f1": 100.0}


def squad_rows(count: int, misplaced: int = 0, unanswerable: int = 0):
    """Flat SQuAD rows; the first `misplaced` answers' answer_start points one character off."""
    rows = []
    for i in range(count):
        start = 32 + (1 if i < misplaced else 0)
        answers = (
            {"text": [], "answer_start": []}
            if i >= count - unanswerable
            else {"text": ["Gustave Eiffel"], "answer_start": [start]}
        )
        rows.append({"id": f"q{i}", "question": "Who built the tower?", "context": CONTEXT, "answers": answers})
    return Dataset.from_list(rows)


def test_misplaced_answers_are_left_out_and_a_file_full_of_them_is_refused(tmp_path, capsys):
    cfg = data_cfg(tmp_path)
    raw = TASK.prepare_raw({"train": squad_rows(200, misplaced=2)}, cfg)  # 1%: left out, and said
    assert raw["train"].num_rows == 198 and "q0" not in raw["train"]["id"]
    assert (
        "2 of the train split's 200 answers are not where their answer_start says in the context (the first: id q0)"
        in capsys.readouterr().out
    )
    with pytest.raises(
        ConfigError,
        match=r"^data\.label_column: 3 of the train split's 200 answers \(1\.5%\) are not where their "
        r"answer_start says in the context \(the first: id q0\); fix the offsets",
    ):
        TASK.prepare_raw({"train": squad_rows(200, misplaced=3)}, cfg)


def test_unanswerable_questions_need_version_2_with_negative(tmp_path):
    with pytest.raises(
        ConfigError, match=r"^task_options\.version_2_with_negative: 1 of the train split's 3 questions have no answer"
    ):
        TASK.prepare_raw({"train": squad_rows(3, unanswerable=1)}, data_cfg(tmp_path))
    v2 = with_options(TASK, {"version_2_with_negative": True})
    raw = v2.prepare_raw({"train": squad_rows(3, unanswerable=1)}, data_cfg(tmp_path))
    assert raw["train"].num_rows == 3  # trained on, with the null answer as the label


def test_unanswerable_questions_in_validation_only_need_version_2_with_negative_too(tmp_path):
    """A v1.1 train file with a v2.0 dev file: squad's scoring would take max() of no gold answers."""
    refusal = r"^task_options\.version_2_with_negative: 2 of the validation split's 4 questions have no answer"
    with pytest.raises(ConfigError, match=refusal):
        TASK.prepare_raw({"train": squad_rows(3), "validation": squad_rows(4, unanswerable=2)}, data_cfg(tmp_path))


@pytest.mark.parametrize(
    "overrides, refusal",
    [
        (["eval_metrics=[squad_v2]", "metric=eval_f1"], r"^eval_metrics: squad_v2 scores a no-answer probability"),
        (
            ["task_options.version_2_with_negative=true"],
            r"^task_options\.version_2_with_negative: predicts empty answers",
        ),
    ],
)
def test_the_squad_metric_and_the_v2_flag_must_agree(overrides, refusal, tmp_path):
    from hfsweep.driver.preflight import preflight

    base = ["+experiment=bert_squad_offline", f"data.path={tmp_path}"]
    with pytest.raises(ConfigError, match=refusal):
        preflight(resolved_config([*base, *overrides], tmp_path / "run", tmp_path / "cache"))
    v2 = ["eval_metrics=[squad_v2]", "metric=eval_f1", "task_options.version_2_with_negative=true"]
    preflight(resolved_config([*base, *v2], tmp_path / "run", tmp_path / "cache"))
