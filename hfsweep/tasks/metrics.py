"""Evaluation metrics named as `evaluate` names them.

An `eval_metrics` entry is
- a name (`accuracy`), or a name with a config and compute arguments (`{name: glue, config_name: mrpc}`,
  `{name: f1, average: micro}`);
- a local path to an `evaluate` module (a directory holding NAME.py, or the .py file);
- `{_target_: pkg.fn, ...arguments}`: a function `(predictions, references, **arguments) -> {name: value}`.

The common names are computed here, offline, with the libraries `evaluate`'s own modules call
(scikit-learn, scipy, seqeval, rouge_score, sacrebleu) and with the same results
(`tests/unit/test_metrics.py` checks hand-computed values); every other name goes through
`evaluate.load`, which fetches the module from the hub (online) or its cache.

Results are flattened for Tune: a nested value becomes `OUTER_INNER` (seqeval's `PER_f1`), lists are
dropped, and a bare `score` takes the metric's name (sacrebleu's `score` is `sacrebleu`). The Trainer
then prefixes each with `eval_`.
"""

from __future__ import annotations

import collections
import os
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.metrics import COST_METRICS, MFU, SAMPLES_PER_SECOND, TOKENS_PER_SECOND

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


# ---- entries from config ------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    label: str  # how errors and logs name it
    name: Optional[str] = None  # an `evaluate` name or local module path
    config_name: Optional[str] = None
    target: Optional[str] = None
    kwargs: dict = field(default_factory=dict)

    @property
    def local(self) -> Optional[LocalMetric]:
        return LOCAL_METRICS.get(self.name) if self.name and not is_module_path(self.name) else None


def is_module_path(name: str) -> bool:
    """A local module (what exists here, or is written as a path), not a hub name like `org/metric`."""
    return os.path.exists(name) or name.endswith(".py") or name.startswith((".", "/", "~"))


def parse_entry(entry: Any) -> MetricSpec:
    if isinstance(entry, str):
        return MetricSpec(label=entry, name=entry)
    if isinstance(entry, dict) and "_target_" in entry:
        return MetricSpec(
            label=entry["_target_"],
            target=entry["_target_"],
            kwargs={k: v for k, v in entry.items() if k != "_target_"},
        )
    if isinstance(entry, dict) and isinstance(entry.get("name"), str):
        kwargs = {k: v for k, v in entry.items() if k not in ("name", "config_name")}
        label = entry["name"] + (f"/{entry['config_name']}" if entry.get("config_name") else "")
        return MetricSpec(label=label, name=entry["name"], config_name=entry.get("config_name"), kwargs=kwargs)
    raise ConfigError(
        f"eval_metrics: {entry!r} is not a metric; give a name (accuracy), {{name: glue, config_name: mrpc}}, "
        f"a path to an evaluate module, or {{_target_: pkg.function}}."
    )


def fitting_names(task_inputs: Optional[str], perplexity: bool) -> str:
    """The locally computed metrics a task's predictions fit (and perplexity where its loss is a
    token loss), for error messages."""
    names = sorted(n for n, m in LOCAL_METRICS.items() if m.inputs == task_inputs)
    return ", ".join([*names, PERPLEXITY] if perplexity else names)


def check_entry(entry: Any, task_inputs: Optional[str], perplexity: bool) -> MetricSpec:
    """Refuse, in one line and before Ray starts, a metric that cannot be loaded or that scores
    predictions of another kind than the task's (`perplexity`: whether the task reports one)."""
    spec = parse_entry(entry)
    if spec.name == PERPLEXITY:
        if not perplexity:
            raise ConfigError(
                f"eval_metrics: 'perplexity' is exp(eval_loss) of a language model's token loss, "
                f"which this task's loss is not; use {fitting_names(task_inputs, False)}."
            )
        return spec
    if spec.local:
        if spec.local.inputs != task_inputs:
            raise ConfigError(
                f"eval_metrics: '{spec.name}' scores {spec.local.inputs}, and this task predicts "
                f"{task_inputs or 'none of them'}; use {fitting_names(task_inputs, perplexity)}."
            )
        if spec.name == "glue" and spec.config_name not in GLUE_CONFIGS:
            raise ConfigError(
                f"eval_metrics: glue needs config_name, one of {', '.join(GLUE_CONFIGS)}; "
                "e.g. {name: glue, config_name: mrpc}."
            )
        return spec
    if spec.target:
        from hfsweep.config.loading import import_object

        try:
            import_object(spec.target)
        except ImportError as err:
            raise ConfigError(
                f"eval_metrics: cannot import '{spec.target}' ({err}); fix the _target_ or make its module importable."
            ) from err
        return spec
    _load_evaluate_module(spec, task_inputs, perplexity)
    return spec


def _load_evaluate_module(spec: MetricSpec, task_inputs: Optional[str] = None, perplexity: bool = True):
    import evaluate

    try:
        return evaluate.load(spec.name, spec.config_name)
    except Exception as err:  # evaluate raises FileNotFoundError, ImportError, ConnectionError, KeyError...
        if is_module_path(spec.name):
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ConfigError(
                f"eval_metrics: '{spec.label}' is not an evaluate module ({reason}); give the folder holding NAME.py, "
                "or the .py file."
            ) from err
        offline = "; HF_HUB_OFFLINE is set" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise ConfigError(
            f"eval_metrics: '{spec.label}' is not computed locally and evaluate.load cannot load it "
            f"({type(err).__name__}{offline}); use {fitting_names(task_inputs, perplexity)}, or a path to an "
            "evaluate module."
        ) from err


def reported_names(spec: MetricSpec) -> Optional[tuple]:
    """The flattened names a metric reports, or None when only its results will tell."""
    if spec.name == PERPLEXITY:
        return ("perplexity",)
    if spec.name == "glue":
        return GLUE_CONFIGS.get(spec.config_name)
    if spec.name == "seqeval":
        if spec.kwargs.get("per_entity"):
            return None  # one per entity type of the data
        return ("overall_precision", "overall_recall", "overall_f1", "overall_accuracy")
    if spec.name == "squad_v2":
        return (
            "exact",
            "f1",
            "total",
            "HasAns_exact",
            "HasAns_f1",
            "HasAns_total",
            "NoAns_exact",
            "NoAns_f1",
            "NoAns_total",
        )
    if spec.name == "rouge":
        return tuple(spec.kwargs.get("rouge_types") or ("rouge1", "rouge2", "rougeL", "rougeLsum"))
    return spec.local.outputs if spec.local else None


# ---- computing ----------------------------------------------------------------------------------


def flatten(name: str, result: dict) -> dict:
    """One scalar per key, for Tune: nested dicts joined with `_`, lists dropped, `score` renamed."""
    import numbers

    def scalar(value) -> bool:
        return isinstance(value, numbers.Number) or getattr(value, "shape", None) == ()  # numpy's too

    flat = {}
    for key, value in result.items():
        if isinstance(value, dict):
            flat.update({f"{key}_{k}": float(v) for k, v in value.items() if scalar(v)})
        elif scalar(value):
            flat[name if key == "score" else key] = float(value)
    return flat


def load_metric(entry: Any) -> Optional[Callable]:
    """A function `(predictions, references, num_classes=None) -> {name: float}` for one entry;
    None for perplexity, which the trial reports from the loss."""
    spec = parse_entry(entry)
    if spec.name == PERPLEXITY:
        return None
    base_name = (
        os.path.basename(spec.name.rstrip("/")).removesuffix(".py") if spec.name else spec.target.rsplit(".", 1)[-1]
    )
    if spec.local:
        local, extra = spec.local, ({"config_name": spec.config_name} if spec.name == "glue" else {})

        def compute(predictions, references, num_classes=None):
            context = {"num_classes": num_classes} if local.inputs == LABELS else {}
            return flatten(base_name, local.compute(predictions, references, **extra, **context, **spec.kwargs))

        return compute
    if spec.target:
        from hfsweep.config.loading import import_object

        function = import_object(spec.target)
        return lambda predictions, references, num_classes=None: flatten(
            base_name, function(predictions, references, **spec.kwargs)
        )
    module = _load_evaluate_module(spec)
    return lambda predictions, references, num_classes=None: flatten(
        base_name, module.compute(predictions=list(predictions), references=list(references), **spec.kwargs)
    )


def metrics_function(entries: list, predictions_and_references: Callable) -> Optional[Callable]:
    """The Trainer's `compute_metrics`: the task turns the evaluation output into predictions and
    references (and the number of classes, if any), and each metric scores them."""
    metrics = [m for m in (load_metric(e) for e in entries) if m is not None]
    if not metrics:
        return None

    def compute_metrics(eval_pred) -> dict:
        predictions, references, num_classes = predictions_and_references(eval_pred)
        results = {}
        for metric in metrics:
            results.update(metric(predictions, references, num_classes=num_classes))
        return results

    return compute_metrics


def reported_metrics(task) -> tuple:
    """What every trial of `task` reports besides eval_<eval_metrics>: time_total_s is Tune's, the
    trial's running time; the cost metrics are `hfsweep.contract.metrics`'s; eval_perplexity where the
    task's loss is a token loss."""
    perplexity = ("eval_perplexity",) if task.reports_perplexity else ()
    return ("eval_loss", *perplexity, "loss", "time_total_s", *COST_METRICS)


def check_objective_metric(sweep: SweepConfig, task, metric: str) -> None:
    """Every eval metric loads and fits the task's predictions, and `metric` (an objective) is
    reported. Where only the results will tell a metric's names (a `compute_metrics` or metric of
    the user's), the sweep metric need only be eval_*."""
    if metric == TOKENS_PER_SECOND and not task.counts_tokens:
        raise ConfigError(f"metric: model.task={task.name} trains on no tokens; use {SAMPLES_PER_SECOND}.")
    if metric == MFU and not sweep.cluster.use_gpu:
        raise ConfigError(
            f"metric: {MFU} is estimated on GPUs only; set cluster.use_gpu=true, or use {TOKENS_PER_SECOND}."
        )
    eval_metrics = sweep.eval_metrics
    if sweep.compute_metrics:
        _check_reported(metric, None, task)
        return
    if task.metrics:  # a task computing metrics of its own names
        for name in eval_metrics:
            if name not in task.metrics:
                raise ConfigError(f"eval_metrics: '{name}' is not one of {', '.join(task.metrics)}.")
        bare = metric.removeprefix("eval_")
        if bare in task.metrics and bare not in eval_metrics:
            raise ConfigError(
                f"metric: {metric} is never computed; add it, e.g. eval_metrics=[{','.join([*eval_metrics, bare])}]."
            )
        _check_reported(metric, list(eval_metrics), task)
        return
    names = []
    for entry in eval_metrics:
        reported = reported_names(check_entry(entry, task.inputs, task.reports_perplexity))
        if reported is None:
            _check_reported(metric, None, task)
            return
        names.extend(reported)
    bare = metric.removeprefix("eval_")
    if bare not in names and bare in LOCAL_METRICS and LOCAL_METRICS[bare].inputs == task.inputs:
        raise ConfigError(
            f"metric: {metric} is never computed; add it, e.g. "
            f"eval_metrics=[{','.join([*map(str, eval_metrics), bare])}]."
        )
    _check_reported(metric, names, task)


def _check_reported(metric: str, names: Optional[list], task) -> None:
    """`names`: what the eval metrics report (before the Trainer's `eval_`), or None if unknown."""
    always = reported_metrics(task)
    if names is None:
        if not metric.startswith("eval_") and metric not in always:
            raise ConfigError(f"metric: '{metric}' is not reported; eval metrics are reported as eval_NAME.")
        return
    reported = [*always, *(f"eval_{name}" for name in names if f"eval_{name}" not in always)]
    if metric not in reported:
        raise ConfigError(f"metric: no trial reports '{metric}'; choose one of {', '.join(reported)}.")
