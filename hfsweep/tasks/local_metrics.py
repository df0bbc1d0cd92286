"""The common `evaluate` names computed here, offline, with the libraries `evaluate`'s own modules
call (scikit-learn, scipy, seqeval, rouge_score, sacrebleu) and with the same results: apart from
how `metrics` reads an entry, checks it and hands the Trainer its `compute_metrics`."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

# What a task's predictions are, so that a metric is only paired with a task that can feed it.
LABELS, TAGS, ANSWERS, TEXTS = "labels", "tags", "answers", "texts"

GLUE_CONFIGS = {
    "cola": ("matthews_correlation",),
    "sst2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    "stsb": ("pearson", "spearmanr"),
    "mnli": ("accuracy",),
    "mnli_matched": ("accuracy",),
    "mnli_mismatched": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "hans": ("accuracy",),
}


# ---- the computations, one per `evaluate` module ------------------------------------------------


def _average(kwargs: dict, num_classes: Optional[int]) -> dict:
    """`evaluate`'s f1/precision/recall default to `average="binary"`, which fails on more than two
    classes; hfsweep keeps binary for two and macro-averages over more, unless configured."""
    if "average" not in kwargs:
        kwargs = {**kwargs, "average": "binary" if (num_classes or 2) <= 2 else "macro"}
    return kwargs


def _accuracy(predictions, references, num_classes=None, **kwargs):
    from sklearn.metrics import accuracy_score

    return {"accuracy": float(accuracy_score(references, predictions, **kwargs))}


def _sklearn_score(name: str):
    def compute(predictions, references, num_classes=None, **kwargs):
        from sklearn import metrics

        kwargs = _average(kwargs, num_classes)
        if name != "f1":
            kwargs.setdefault("zero_division", 0)
        score = getattr(metrics, f"{name}_score")(references, predictions, **kwargs)
        return {name: score.tolist() if getattr(score, "size", 1) > 1 else float(score)}

    return compute


def _matthews_correlation(predictions, references, num_classes=None, **kwargs):
    from sklearn.metrics import matthews_corrcoef

    return {"matthews_correlation": float(matthews_corrcoef(references, predictions, **kwargs))}


def _pearsonr(predictions, references, num_classes=None):
    from scipy.stats import pearsonr

    return {"pearsonr": float(pearsonr(references, predictions)[0])}


def _spearmanr(predictions, references, num_classes=None):
    from scipy.stats import spearmanr

    return {"spearmanr": float(spearmanr(references, predictions)[0])}


def _glue(predictions, references, config_name=None, num_classes=None):
    import numpy as np
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score, matthews_corrcoef

    predictions, references = np.asarray(predictions), np.asarray(references)
    if config_name == "cola":
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions))}
    if config_name == "stsb":
        return {
            "pearson": float(pearsonr(predictions, references)[0]),
            "spearmanr": float(spearmanr(predictions, references)[0]),
        }
    result = {"accuracy": float((predictions == references).mean())}
    if config_name in ("mrpc", "qqp"):
        result["f1"] = float(f1_score(references, predictions))
    return result


def _seqeval(predictions, references, per_entity: bool = False, **kwargs):
    """`evaluate`'s seqeval; the per-entity scores only with `per_entity` (run_ner's
    `return_entity_level_metrics`), as they are a column per entity type and score."""
    from seqeval.metrics import accuracy_score, classification_report

    if kwargs.get("scheme"):
        import seqeval.scheme

        kwargs["scheme"] = getattr(seqeval.scheme, kwargs["scheme"])
    kwargs.setdefault("zero_division", 0)
    report = classification_report(y_true=references, y_pred=predictions, output_dict=True, **kwargs)
    report.pop("macro avg"), report.pop("weighted avg")
    overall = report.pop("micro avg")
    scores = {
        entity: {"precision": s["precision"], "recall": s["recall"], "f1": s["f1-score"], "number": s["support"]}
        for entity, s in report.items()
        if per_entity
    }
    scores.update(
        overall_precision=overall["precision"],
        overall_recall=overall["recall"],
        overall_f1=overall["f1-score"],
        overall_accuracy=accuracy_score(y_true=references, y_pred=predictions),
    )
    return scores


def normalize_answer(text: str) -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _answer_f1(gold: str, prediction: str, empty_agrees: bool) -> float:
    gold_tokens, predicted_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    if empty_agrees and not (gold_tokens and predicted_tokens):  # v2: a no-answer scores 1 only against no-answer
        return float(gold_tokens == predicted_tokens)
    same = sum((collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _squad(predictions, references):
    """SQuAD v1.1: exact match and token F1 against the best of the gold answers, in percent."""
    predicted = {p["id"]: p["prediction_text"] for p in predictions}
    exact = f1 = 0.0
    for reference in references:
        golds, prediction = reference["answers"]["text"], predicted[reference["id"]]
        exact += max(float(normalize_answer(g) == normalize_answer(prediction)) for g in golds)
        f1 += max(_answer_f1(g, prediction, empty_agrees=False) for g in golds)
    return {"exact_match": 100.0 * exact / len(references), "f1": 100.0 * f1 / len(references)}


def _squad_v2(predictions, references, no_answer_threshold: float = 1.0):
    """SQuAD v2.0: as v1.1, where a question with no answer is right only when none is predicted
    (or its no-answer probability is above the threshold); overall, answerable and unanswerable."""
    predicted = {p["id"]: p for p in predictions}
    exact, f1, has_answer = {}, {}, {}
    for reference in references:
        qid = reference["id"]
        golds = [g for g in reference["answers"]["text"] if normalize_answer(g)] or [""]
        has_answer[qid] = bool(reference["answers"]["text"])
        prediction = predicted[qid]
        if prediction["no_answer_probability"] > no_answer_threshold:
            exact[qid] = f1[qid] = float(not has_answer[qid])
        else:
            text = prediction["prediction_text"]
            exact[qid] = max(float(normalize_answer(g) == normalize_answer(text)) for g in golds)
            f1[qid] = max(_answer_f1(g, text, empty_agrees=True) for g in golds)

    def summary(qids: list) -> dict:
        return {
            "exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
            "total": len(qids),
        }

    result = summary(list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact if has_answer[q] is wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})
    return result


def _rouge(predictions, references, rouge_types=None, use_stemmer=False):
    """The mid F-measure of rouge_score's bootstrap aggregate, per ROUGE type."""

    import numpy as np
    from rouge_score import rouge_scorer, scoring

    rouge_types = rouge_types or ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    scorer = rouge_scorer.RougeScorer(rouge_types=rouge_types, use_stemmer=use_stemmer)
    aggregator = scoring.BootstrapAggregator()
    for reference, prediction in zip(references, predictions):
        aggregator.add_scores(
            scorer.score_multi(reference, prediction)
            if isinstance(reference, list)
            else scorer.score(reference, prediction)
        )
    state = np.random.get_state()  # the bootstrap draws from numpy's global generator: seeded, so reruns agree
    np.random.seed(0)
    try:
        return {key: float(value.mid.fmeasure) for key, value in aggregator.aggregate().items()}
    finally:
        np.random.set_state(state)


def _sacrebleu(predictions, references, **kwargs):
    import sacrebleu

    references = [[r] if isinstance(r, str) else r for r in references]
    streams = [[refs[i] for refs in references] for i in range(len(references[0]))]
    bleu = sacrebleu.corpus_bleu(predictions, streams, **kwargs)
    return {
        "score": bleu.score,
        "counts": bleu.counts,
        "totals": bleu.totals,
        "precisions": bleu.precisions,
        "bp": bleu.bp,
        "sys_len": bleu.sys_len,
        "ref_len": bleu.ref_len,
    }


@dataclass(frozen=True)
class LocalMetric:
    compute: Callable
    inputs: str  # LABELS, TAGS, ANSWERS or TEXTS
    outputs: Optional[tuple] = None  # the flattened names it reports; None: known only from the data


LOCAL_METRICS = {
    "accuracy": LocalMetric(_accuracy, LABELS, ("accuracy",)),
    "f1": LocalMetric(_sklearn_score("f1"), LABELS, ("f1",)),
    "precision": LocalMetric(_sklearn_score("precision"), LABELS, ("precision",)),
    "recall": LocalMetric(_sklearn_score("recall"), LABELS, ("recall",)),
    "matthews_correlation": LocalMetric(_matthews_correlation, LABELS, ("matthews_correlation",)),
    "pearsonr": LocalMetric(_pearsonr, LABELS, ("pearsonr",)),
    "spearmanr": LocalMetric(_spearmanr, LABELS, ("spearmanr",)),
    "glue": LocalMetric(_glue, LABELS),
    "seqeval": LocalMetric(_seqeval, TAGS),
    "squad": LocalMetric(_squad, ANSWERS, ("exact_match", "f1")),
    "squad_v2": LocalMetric(_squad_v2, ANSWERS),
    "rouge": LocalMetric(_rouge, TEXTS),
    "sacrebleu": LocalMetric(_sacrebleu, TEXTS, ("sacrebleu", "bp", "sys_len", "ref_len")),
}
# `perplexity` is exp(eval_loss), which every trial reports as eval_perplexity; `evaluate`'s module
# of that name scores texts under a hub model, a different measurement.
PERPLEXITY = "perplexity"
