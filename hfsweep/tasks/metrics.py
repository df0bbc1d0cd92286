"""Evaluation metrics named as `evaluate` names them.

An `eval_metrics` entry is
- a name (`accuracy`), or a name with a config and compute arguments (`{name: glue, config_name: mrpc}`,
  `{name: f1, average: micro}`);
- a local path to an `evaluate` module (a directory holding NAME.py, or the .py file);
- `{_target_: pkg.fn, ...arguments}`: a function `(predictions, references, **arguments) -> {name: value}`.

The common names are computed offline (`local_metrics`), with the libraries `evaluate`'s own modules
call and with the same results (`tests/unit/test_metrics.py` checks hand-computed values); every other name goes through
`evaluate.load`, which fetches the module from the hub (online) or its cache.

Results are flattened for Tune: a nested value becomes `OUTER_INNER` (seqeval's `PER_f1`), lists are
dropped, and a bare `score` takes the metric's name (sacrebleu's `score` is `sacrebleu`). The Trainer
then prefixes each with `eval_`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig
from hfsweep.contract.metrics import COST_METRICS, MFU, SAMPLES_PER_SECOND, TOKENS_PER_SECOND
from hfsweep.tasks.local_metrics import GLUE_CONFIGS, LABELS, LOCAL_METRICS, PERPLEXITY, LocalMetric

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
        if "average" in spec.kwargs and spec.kwargs["average"] is None:  # evaluate's per-class mode
            raise ConfigError(
                f"eval_metrics: {spec.name} with average: null gives one score per class, and a trial reports one "
                f"number per metric; give average: macro, micro, weighted or binary."
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
