"""Extractive question answering, as transformers' run_qa.py: each question with its context cut
into features of `data.max_length` tokens that overlap by `task_options.doc_stride`; the answer's start
and end token as labels (the [CLS] token when the answer is not in the feature); predictions
mapped back to text spans of the context through the offsets, best of `n_best_size` start and end
logits per feature, at most `max_answer_length` tokens long, and with `version_2_with_negative`
the empty answer when the null score beats the best span by more than
`null_score_diff_threshold` (all `task_options.*`). Scored by `squad` or `squad_v2`.

Columns: `data.text_column` (question), `data.pair_column` (context), `data.label_column`
(answers: {text, answer_start}) and `id`. Local files: SQuAD's nested json (v1.1 and v2.0), read
by `read_squad` below, or flat json/jsonl in the hub dataset's columns.

The validation features keep `example_id` and `offset_mapping` for the post-processing, and the
start and end positions too, so eval_loss is reported like every task's.
"""

from __future__ import annotations

import collections
import functools
import os
from dataclasses import dataclass

import numpy as np

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import DataConfig, SweepConfig
from hfsweep.data.formats import read_with
from hfsweep.tasks.base import Task
from hfsweep.tasks.causal_lm import token_features
from hfsweep.tasks.local_metrics import ANSWERS
from hfsweep.tasks.metrics import parse_entry

EXAMPLES = "examples"  # beside the prepared validation features: the raw validation examples
MISPLACED_SHARE = 0.01  # more train answers than this whose answer_start misses their text: the file is refused


def is_squad_json(path: str) -> bool:
    """SQuAD's nested layout (`{"version": ..., "data": [{"paragraphs": [...]}]}`), told from
    json/jsonl records by its opening: one object whose first kilobytes name paragraphs."""
    with open(path, encoding="utf-8") as f:
        head = f.read(65536)
    return head.lstrip().startswith("{") and '"paragraphs"' in head and '"qas"' in head


def squad_examples(path: str, size: int, mtime: float):
    """SQuAD v1.1 or v2.0 json as the hub dataset's flat rows: id, title, context, question and
    answers {text, answer_start} (empty for v2's unanswerable questions)."""
    import json

    with open(path, encoding="utf-8") as f:
        articles = json.load(f)["data"]
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa["answers"]
                yield {
                    "id": qa["id"],
                    "title": article.get("title", ""),
                    "context": paragraph["context"],
                    "question": qa["question"],
                    "answers": {
                        "text": [a["text"] for a in answers],
                        "answer_start": [a["answer_start"] for a in answers],
                    },
                }


def read_squad(files: dict):
    """Each split's SQuAD json files as flat rows."""
    from datasets import Features, List, Value

    features = Features(
        {
            "id": Value("string"),
            "title": Value("string"),
            "context": Value("string"),
            "question": Value("string"),
            "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
        }
    )
    return read_with(squad_examples, features, files, "SQuAD questions")


def answer_positions(offsets: list, answers: dict, side: list) -> tuple[int, int]:
    """The start and end token of the first answer within one feature, or (0, 0), the [CLS]
    token, when the feature does not hold all of it (run_qa's labelling). `side[i]` is 1 for a
    context token."""
    if not answers["answer_start"]:
        return 0, 0
    start_char = answers["answer_start"][0]
    end_char = start_char + len(answers["text"][0])
    context = [i for i, s in enumerate(side) if s == 1]
    if not context or offsets[context[0]][0] > start_char or offsets[context[-1]][1] < end_char:
        return 0, 0
    start = next(i for i in context if offsets[i][1] > start_char)
    end = next(i for i in reversed(context) if offsets[i][0] < end_char)
    return start, end


@dataclass
class QuestionAnswering(Task):
    doc_stride: int = 128  # tokens shared by two features cut from one long context
    max_answer_length: int = 30  # the longest answer span predicted, in tokens
    n_best_size: int = 20  # start and end logits tried per feature
    version_2_with_negative: bool = False  # SQuAD v2: a question may have no answer
    null_score_diff_threshold: float = 0.0  # v2: how much the null answer must beat the best span by

    name = "question_answering"
    columns = ("text_column", "pair_column", "label_column")
    inputs = ANSWERS
    needs_whole_validation = True  # its predictions are matched to the features in order
    pads_batches = True

    def auto_model_class(self):
        from transformers import AutoModelForQuestionAnswering

        return AutoModelForQuestionAnswering

    def check_config(self, data_cfg: DataConfig) -> None:
        length = data_cfg.max_length
        if self.doc_stride >= length:
            raise ConfigError(
                f"task_options.doc_stride: {self.doc_stride} must be smaller than "
                f"data.max_length={length}; e.g. task_options.doc_stride={length // 3}."
            )

    def check_metrics(self, sweep: SweepConfig) -> None:
        """Its metric with its flag: squad_v2 reads the no-answer probability predicted only with
        `version_2_with_negative`, and squad (v1.1) scores against gold answers that v2's empty
        predictions and unanswerable questions do not have."""
        if sweep.compute_metrics:
            return
        names = {parse_entry(entry).name for entry in sweep.eval_metrics}
        if "squad_v2" in names and not self.version_2_with_negative:
            raise ConfigError(
                "eval_metrics: squad_v2 scores a no-answer probability, which is predicted only with "
                "task_options.version_2_with_negative=true; set it (SQuAD 2.0), "
                "or use eval_metrics=[squad]."
            )
        if "squad" in names and self.version_2_with_negative:
            raise ConfigError(
                "task_options.version_2_with_negative: predicts empty answers (SQuAD 2.0), which squad "
                "(v1.1) cannot score; use eval_metrics=[squad_v2] metric=eval_f1, or drop the flag."
            )

    def read_local(self, builder: str, files: dict):
        if builder == "json" and all(is_squad_json(f) for split_files in files.values() for f in split_files):
            return read_squad(files)
        return None

    def prepare_raw(self, raw, data_cfg: DataConfig):
        """The answers checked before they become token labels: unanswerable questions (SQuAD
        2.0's empty answers) in any split need `task_options.version_2_with_negative` (v1.1's
        scoring has no gold answer to compare with), and a train answer whose `answer_start` does
        not locate its text in the context is left out, or the file is refused when more than 1%
        of them are (wrong offsets, or a file re-encoded since)."""
        context, answers = data_cfg.pair_column, data_cfg.label_column
        for split, rows in raw.items():
            unanswerable = sum(1 for answer in rows[answers] if not answer["text"])
            if unanswerable and not self.version_2_with_negative:
                raise ConfigError(
                    f"task_options.version_2_with_negative: {unanswerable} of the {split} split's {rows.num_rows} "
                    f"questions have no answer (SQuAD 2.0's unanswerable ones); set "
                    f"task_options.version_2_with_negative=true eval_metrics=[squad_v2] to train and score them as "
                    f"run_qa.py --version_2_with_negative does."
                )
        train = raw["train"]
        misplaced = [
            i
            for i, (text, answer) in enumerate(zip(train[context], train[answers]))
            if answer["text"] and not text.startswith(answer["text"][0], answer["answer_start"][0])
        ]
        if len(misplaced) > MISPLACED_SHARE * train.num_rows:
            raise ConfigError(
                f"data.label_column: {len(misplaced)} of the train split's {train.num_rows} answers "
                f"({len(misplaced) / train.num_rows:.1%}) "
                f"are not where their answer_start says in the context (the first: id {train[misplaced[0]]['id']}); "
                f"fix the offsets (character positions in the context) or the file's encoding."
            )
        if misplaced:
            print(
                f"hfsweep: question answering: {len(misplaced)} of the train split's {train.num_rows} answers are "
                f"not where their answer_start says in the context (the first: id {train[misplaced[0]]['id']}); "
                f"left out of training."
            )
            raw["train"] = train.select(sorted(set(range(train.num_rows)) - set(misplaced)))
        return raw

    def label_names(self, train, data_cfg: DataConfig):
        return None  # start and end positions, not classes

    def preprocess(self, ds, tokenizer, data_cfg: DataConfig, split: str):
        from datasets import Features, List, Value

        question, context, answers = data_cfg.text_column, data_cfg.pair_column, data_cfg.label_column
        length = data_cfg.max_length
        padding, padded_length = self.padding(data_cfg)
        pad_right = tokenizer.padding_side == "right"
        if not pad_right and not data_cfg.pad_to_max_length:  # positions are set here, before a batch is padded
            raise ConfigError(
                "data.pad_to_max_length: this tokenizer pads on the left, and a batch padded on the left would "
                "shift every answer's start and end; set data.pad_to_max_length=true, as run_qa.py does."
            )

        def encode(batch: dict) -> dict:
            questions = [q.lstrip() for q in batch[question]]  # run_qa: leading spaces waste the budget
            first, second = (questions, batch[context]) if pad_right else (batch[context], questions)
            encoded = tokenizer(
                first,
                second,
                truncation="only_second" if pad_right else "only_first",
                max_length=length,
                stride=self.doc_stride,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
                padding=padding,
            )
            context_index = 1 if pad_right else 0
            starts, ends, example_ids, offsets = [], [], [], []
            for i, sample in enumerate(encoded.pop("overflow_to_sample_mapping")):
                sequence_ids = encoded.sequence_ids(i)
                side = [1 if s == context_index else (None if s is None else 0) for s in sequence_ids]
                start, end = answer_positions(encoded["offset_mapping"][i], batch[answers][sample], side)
                starts.append(start)
                ends.append(end)
                example_ids.append(batch["id"][sample])
                offsets.append([list(o) if s == 1 else [-1, -1] for o, s in zip(encoded["offset_mapping"][i], side)])
            encoded.pop("offset_mapping")
            out = {**encoded, "start_positions": starts, "end_positions": ends}
            if split == "validation":
                out.update(example_id=example_ids, offset_mapping=offsets)
            return out

        features = {
            **token_features(tokenizer.model_input_names, padded_length),
            "start_positions": Value("int64"),
            "end_positions": Value("int64"),
        }
        if split == "validation":
            features.update(
                example_id=Value("string"),
                offset_mapping=List(
                    List(Value("int64"), length=2), length=-1 if padded_length is None else padded_length
                ),
            )
        return ds.map(
            encode, batched=True, remove_columns=ds.column_names, features=Features(features), desc=f"tokenize {split}"
        )

    def collator(self, tokenizer, split: str, seed: int = 0):
        from transformers import DataCollatorWithPadding

        return DataCollatorWithPadding(tokenizer)

    def save_validation_examples(self, raw_validation, data_cfg: DataConfig, folder: str) -> None:
        """The raw examples (id, context, answers) the post-processing maps predictions back to."""
        keep = ["id", data_cfg.pair_column, data_cfg.label_column]
        raw_validation.select_columns(keep).save_to_disk(os.path.join(folder, EXAMPLES))

    def predictions_and_references(self, eval_pred, context):
        """run_qa's post-processing: per example, the best-scoring valid span over its features."""
        data_cfg = context.data_cfg
        start_logits, end_logits = eval_pred[0]
        examples, by_example, offsets = validation_layout(context.validation_path)
        predictions, references = [], []
        for example in examples:
            answer = best_answer(
                example[data_cfg.pair_column], by_example[example["id"]], start_logits, end_logits, offsets, self
            )
            prediction = {"id": example["id"], "prediction_text": answer}
            if self.version_2_with_negative:
                prediction["no_answer_probability"] = 0.0
            predictions.append(prediction)
            references.append({"id": example["id"], "answers": example[data_cfg.label_column]})
        return predictions, references, None


@functools.lru_cache(maxsize=2)
def validation_layout(validation_path: str) -> tuple:
    """The raw validation examples, each example's feature rows and every feature's offsets: read
    once per worker, not at every evaluation."""
    import datasets

    features = datasets.load_from_disk(validation_path)
    examples = datasets.load_from_disk(os.path.join(os.path.dirname(validation_path), EXAMPLES))
    by_example = collections.defaultdict(list)
    for i, example_id in enumerate(features["example_id"]):
        by_example[example_id].append(i)
    return examples, by_example, features["offset_mapping"]


def best_answer(
    context: str, feature_indices: list, start_logits, end_logits, offsets, options: QuestionAnswering
) -> str:
    """The best span's text over an example's features ("" when v2's null answer wins), by the task's options."""
    best_score, best_text, null_score = -np.inf, "", np.inf
    n_best, longest = options.n_best_size, options.max_answer_length
    for i in feature_indices:
        starts, ends, spans = start_logits[i], end_logits[i], offsets[i]
        null_score = min(null_score, starts[0] + ends[0])
        for s in np.argsort(starts)[-1 : -n_best - 1 : -1]:
            for e in np.argsort(ends)[-1 : -n_best - 1 : -1]:
                # beyond the feature's own tokens (logits padded to the longest feature), or outside its context
                if (
                    s >= len(spans)
                    or e >= len(spans)
                    or spans[s][0] < 0
                    or spans[e][0] < 0
                    or e < s
                    or e - s + 1 > longest
                ):
                    continue
                score = starts[s] + ends[e]
                if score > best_score:
                    best_score, best_text = score, context[spans[s][0] : spans[e][1]]
    if options.version_2_with_negative and null_score > best_score + options.null_score_diff_threshold:
        return ""
    return best_text


TASK = QuestionAnswering()
