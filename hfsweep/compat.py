"""Every private API of Ray, torch, transformers, datasets and W&B that hfsweep touches (and the one library
print silenced where it is first imported), each guarded, in one place to mend on an upgrade.
Where one has gone, hfsweep degrades (a log line stays loud, a
cache key is computed the slow way) and nothing fails; `tests/unit/test_compat.py` fails instead, so
the upgrade is noticed."""

from __future__ import annotations

import builtins
import contextlib
import csv
import importlib.abc
import importlib.util
import io
import logging
import os
import pickle
import sys
from collections import defaultdict

log = logging.getLogger(__name__)


def quiet_train_report_log() -> bool:
    """Silence Train V2's per-report "Reporting training result" line, logged under its module's
    file path. Returns whether the module was found."""
    try:
        from ray.train.v2._internal.execution import context
    except ImportError:
        return False
    logging.getLogger(context.__file__).setLevel(logging.WARNING)
    return True


RAY_AUTH_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def quiet_ray_auth_notice() -> None:
    """Ray 2.5x's notice at every `ray.init` that token authentication is enabled: a local Ray
    started for one sweep has nothing for the user to act on (the logger is a private module's)."""
    logging.getLogger(RAY_AUTH_NOTICE_LOGGER).setLevel(logging.ERROR)


PLACEMENT_GROUP_CLEANER_LOGGER = "ray.train.v2._internal.execution.controller.placement_group_cleaner"


def quiet_ray_process() -> None:
    """Ray's `worker_process_setup_hook` for a sweep: Train V2's placement-group cleaner warns each
    time a scheduler stops a multi-worker trial that the trial's controller is dead and that it
    removes its placement group: Tune's own stop, nothing for the user to act on."""
    logging.getLogger(PLACEMENT_GROUP_CLEANER_LOGGER).setLevel(logging.ERROR)


BITSANDBYTES_CPU_LOGGER = "bitsandbytes.backends.cpu.ops"


def quiet_bitsandbytes_cpu_notice() -> None:
    """bitsandbytes, imported by peft wherever transformers' Trainer is (peft is imported if
    installed), warns on CPU that it "Failed to load CPU gemm_4bit_forward": a 4-bit kernel that a
    CPU sweep never uses (a quantized base needs a CUDA GPU), once per worker, nothing to act on."""
    logging.getLogger(BITSANDBYTES_CPU_LOGGER).setLevel(logging.ERROR)


GCS_PORT_ENV = "RAY_GCS_SERVER_PORT"  # read by `ray.init` when it starts a new local Ray


@contextlib.contextmanager
def gcs_port(port: int):
    """Have a local Ray started inside this block listen for its GCS on `port`."""
    previous = os.environ.get(GCS_PORT_ENV)
    os.environ[GCS_PORT_ENV] = str(port)
    try:
        yield
    finally:
        if previous is None:
            del os.environ[GCS_PORT_ENV]
        else:
            os.environ[GCS_PORT_ENV] = previous


def wandb_logging_actor_class():
    """Ray's private actor class that runs one W&B run per trial, or None if it is gone."""
    try:
        from ray.air.integrations.wandb import _WandbLoggingActor
    except ImportError:
        return None
    return _WandbLoggingActor


RESTORE_FROM_REMOTE = "_restore_from_remote"  # Tune's logger callbacks: copy a trial's file back from storage


def logger_restores_from_remote(logger_class) -> bool:
    return callable(getattr(logger_class, RESTORE_FROM_REMOTE, None))


CSV_SETUP_TRIAL = "_setup_trial"  # Tune's CSV logger: open a trial's progress.csv, appending when it has rows


def csv_logger_sets_up_trials(logger_class) -> bool:
    return callable(getattr(logger_class, CSV_SETUP_TRIAL, None))


def write_rows_under(csv_logger, trial, header: list[str]) -> None:
    """Have Tune's CSV logger write `trial`'s rows under `header` (Tune's own writer takes its
    columns from the first result it gets and, appending, writes no header of its own)."""
    csv_logger._trial_csv[trial] = csv.DictWriter(csv_logger._trial_files[trial], header)


TBX_LOG_HPARAMS = "_try_log_hparams"  # Tune's TensorBoard logger: write a trial's HParams session as it ends


def tbx_logs_hparams(logger_class) -> bool:
    return callable(getattr(logger_class, TBX_LOG_HPARAMS, None))


def lr_factors(lr_scheduler):
    """A LambdaLR's multiplicative factors at its current step, or None for other schedulers."""
    lambdas = getattr(lr_scheduler, "lr_lambdas", None)
    if lambdas is None:
        return None
    return [fn(lr_scheduler.last_epoch) for fn in lambdas]


def set_last_lr(lr_scheduler, lrs: list[float]) -> None:
    """Make `get_last_lr()` return `lrs`, as it would after the scheduler set them itself."""
    if hasattr(lr_scheduler, "_last_lr"):
        lr_scheduler._last_lr = list(lrs)


def dataset_fingerprint(dataset) -> str:
    """A `datasets.Dataset`'s content fingerprint (kept up to date through map, select...);
    without it, a hash of its Arrow table (slower: reads the data)."""
    fingerprint = getattr(dataset, "_fingerprint", None)
    if fingerprint:
        return fingerprint
    from datasets.fingerprint import Hasher

    return Hasher.hash(dataset.data.table)


def classic_parquet_reader(context) -> None:
    """Ray Data's file-datasource V1 for `read_parquet`: in Ray 2.60 the V2 path (ListFiles →
    ReadFilesParquetV2) took 14-17 s to read a 350 KB shard on this project's 2-core machine, V1
    0.3-0.6 s (see BENCHMARKS.md, worker ingest). A no-op once the switch is gone."""
    if hasattr(context, "use_datasource_v2"):
        context.use_datasource_v2 = False


def ray_data_iterable(make_iterator):
    """An iterable of batches that `ray.train.huggingface.transformers.prepare_trainer` hands to
    the Trainer as it hands Ray Data's own (one batch per step, no re-batching): Ray marks its
    batch iterables with the private `_IterableFromIterator`, which calls `make_iterator` once per
    epoch. Used for batches hfsweep forms itself (grouped by length)."""
    from ray.data.iterator import _IterableFromIterator

    return _IterableFromIterator(make_iterator)


def hide_from_result_tables(keys) -> bool:
    """Leave `keys` out of the table Tune prints when a trial ends (its output engine's private set
    of keys it never prints); every result and file still holds them. Returns whether it was found."""
    try:
        from ray.tune.experimental.output import BLACKLISTED_KEYS
    except ImportError:
        return False
    BLACKLISTED_KEYS.update(keys)
    return True


def restored_callbacks(tuner) -> list:
    """The callbacks of a Tuner built by `Tuner.restore`: its RunConfig, callbacks included, is
    unpickled from the experiment (Tune then restores their saved state into them), and only
    Tune's private `TunerInternal` holds it. Empty when that has moved: `sweep.resume` then
    refuses a budgeted sweep rather than resume it with a budget nothing counts."""
    local = getattr(tuner, "_local_tuner", None)
    get_run_config = getattr(local, "get_run_config", None)
    return list(get_run_config().callbacks or []) if get_run_config else []


def saved_callback_states(experiment_dir: str) -> list[dict]:
    """What Tune last saved of an experiment's stateful callbacks (each one's `get_state`), read from
    its callback-states file with Ray's private `_load_newest_checkpoint`. Empty where Tune saved none,
    or where that has moved: the caller then counts from Tune's trial records instead."""
    try:
        from ray.tune.callback import CallbackList
        from ray.tune.utils.util import _load_newest_checkpoint
    except ImportError:
        return []
    saved = _load_newest_checkpoint(experiment_dir, CallbackList.CKPT_FILE_TMPL.format("*"))
    return [state for state in (saved or {}).values() if state]


def in_creation_order(trials: list) -> list:
    """Tune's trials in the order its searcher created them. An experiment Tune restored lists them
    in another order; each trial's `experiment_tag` starts with the searcher's count (Ray's
    SearchGenerator and BasicVariantGenerator), which Tune saves and restores. Trials of a Ray whose
    tags say otherwise keep the order given."""
    counts = [str(getattr(trial, "experiment_tag", "")).split("_", 1)[0] for trial in trials]
    if not all(count.isdigit() for count in counts):
        return list(trials)
    return [trial for _, trial in sorted(zip(map(int, counts), trials), key=lambda pair: pair[0])]


def forget_points_to_evaluate(tuner) -> None:
    """Hand the searcher of a Tuner built by `Tuner.restore` no `points_to_evaluate`: `fit` sets
    the unpickled searcher up anew, and Ray's OptunaSearch then enqueues its points into the stored
    study it loads, which holds them already (a resumed sweep ran its defaults trial twice). Tune
    restores the searcher's saved state after that. Raises when Tune's private TunerInternal has moved."""
    searcher = tuner._local_tuner._tune_config.search_alg
    searcher = getattr(searcher, "searcher", searcher)  # inside a ConcurrencyLimiter
    if not hasattr(searcher, "_points_to_evaluate"):
        raise RuntimeError(
            f"resume: {type(searcher).__name__} keeps its points_to_evaluate elsewhere in this Ray; pin ray to the "
            f"version in provenance.json to resume this sweep."
        )
    searcher._points_to_evaluate = []


def scheduler_records(scheduler) -> bytes:
    """A Tune scheduler's records (its attributes but the functions it was built with): Tune saves
    its searcher and callbacks with the experiment, never its scheduler, and most schedulers have
    no save of their own. A `Trial` is pickled as its id, and PBT's handle on a checkpoint still
    being written (a Ray future) as None; a defaultdict as a dict (its factory may hold the
    scheduler itself, as MedianStoppingRule's does)."""
    import cloudpickle
    from ray.tune.experiment import Trial

    class TrialsAsIds(cloudpickle.CloudPickler):
        def persistent_id(self, obj):
            if isinstance(obj, Trial):
                return ("trial", obj.trial_id)
            if type(obj).__name__ == "_FutureTrainingResult":
                return ("being written", None)
            return None

    buffer = io.BytesIO()
    kept = {name: value for name, value in vars(scheduler).items() if not callable(value)}
    TrialsAsIds(buffer).dump({name: dict(v) if isinstance(v, defaultdict) else v for name, v in kept.items()})
    return buffer.getvalue()


def restore_scheduler_records(scheduler, records: bytes, trials) -> None:
    """Put `scheduler_records`' records back into `scheduler`, each trial id as the restored
    `Trial` of that id. A table keyed by trial is merged: a trial the save did not know keeps the
    record the scheduler gave it when Tune added it."""
    by_id = {trial.trial_id: trial for trial in trials}

    class IdsAsTrials(pickle.Unpickler):
        def persistent_load(self, pid):
            kind, trial_id = pid
            return by_id[trial_id] if kind == "trial" else None

    saved = IdsAsTrials(io.BytesIO(records)).load()
    for name, value in saved.items():
        current = vars(scheduler).get(name)
        if isinstance(current, dict) and isinstance(value, dict):
            current.update(value)
        else:
            setattr(scheduler, name, value)


INTEGRATIONS = "transformers.integrations.integration_utils"


class _SilentImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds one module through the other finders and runs its code with `print` silenced."""

    def __init__(self, name: str):
        self.name, self.loader = name, None

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once, and the search below must not find this finder again
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        original, builtins.print = builtins.print, lambda *args, **kwargs: None
        try:
            self.loader.exec_module(module)
        finally:
            builtins.print = original


def quiet_transformers_integrations() -> None:
    """transformers' integrations module prints "[INFO] Running in WANDB offline mode" when first
    imported with WANDB_MODE=offline: in the CLI before a refusal, and on every Ray Train worker
    (11 lines in the default run) where no user can act on it. Its import, wherever it happens
    (it costs ten seconds, so it is not forced here), runs with `print` silenced: Ray Train's workers
    replace the builtin print by one that writes past a redirected stdout."""
    if os.environ.get("WANDB_MODE") != "offline" or INTEGRATIONS in sys.modules:
        return
    if not any(isinstance(finder, _SilentImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SilentImport(INTEGRATIONS))


BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def basic_sweep_jobs(master_config) -> list[list[str]] | None:
    """The overrides of every job Hydra's basic sweeper will launch for a multirun's master config
    (its `hydra.sweeper.params` and command line, split as the sweeper splits them), or None under
    another sweeper, whose jobs are its own to choose."""
    if master_config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    params = master_config.hydra.sweeper.get("params")
    params = {} if params is None else OmegaConf.to_container(params, resolve=False)
    task = OmegaConf.to_container(master_config.hydra.overrides.task, resolve=False)  # `${...}` as typed
    arguments = [*(f"{key}={value}" for key, value in params.items()), *task]
    (jobs,) = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), None)
    return jobs


def auto_class_builds(auto_class, config_class) -> bool | None:
    """Whether a transformers Auto class (AutoModelForMaskedLM) has a model class for a config
    class, registered ones included, by its private lazy mapping; None where that has moved, or for
    a class that is no Auto class (nothing is refused then)."""
    mapping = getattr(auto_class, "_model_mapping", None)
    return config_class in mapping if hasattr(mapping, "__contains__") else None


def decay_parameter_names(model) -> list[str]:
    """The names of the parameters the Trainer puts under weight decay, by its own rule
    (`Trainer.get_decay_parameter_names`: no biases, no norms by type or name), which reads nothing
    of the Trainer it is a method of, so none is built; should it come to read one, the parameters
    of two or more dimensions (the rule's gist: biases and norm weights are vectors)."""
    from transformers import Trainer

    try:
        return Trainer.get_decay_parameter_names(None, model)
    except AttributeError:
        return [name for name, parameter in model.named_parameters() if parameter.ndim >= 2]


# The private class flag by which a transformers model class says it has an attention kernel (eager: every class).
ATTENTION_FLAGS = {"sdpa": "_supports_sdpa", "flash_attention_2": "_supports_flash_attn"}


def supports_attention(auto_class, config_class, attention: str) -> bool:
    """Whether the model class a transformers Auto class builds for a config class has the
    `attention` kernel (asking one it lacks raises); False where the mapping or the flag has moved."""
    if not auto_class_builds(auto_class, config_class):
        return False
    flag = ATTENTION_FLAGS.get(attention)
    return flag is None or getattr(auto_class._model_mapping[config_class], flag, False) is True


def loss_drops_item_count(model) -> bool:
    """Whether the model's `forward` takes `**kwargs` but never hands them to `self.loss_function`
    (BERT's classification, token and question-answering heads compute their own mean loss): the
    Trainer then reads `**kwargs` as "the model normalises by num_items_in_batch" and neither
    divides its loss by the accumulation steps nor undoes DDP's gradient averaging on it, so the
    loss and the gradients come out accumulation steps × workers too large
    (huggingface/transformers#47688, open). Read from the class's own source, not a private flag;
    a class that says `accepts_loss_kwargs` itself is taken at its word."""
    import ast
    import inspect
    import textwrap

    forward = type(model).forward
    if hasattr(type(model), "accepts_loss_kwargs"):
        return False
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(forward).parameters.values()):
        return False  # the Trainer then passes nothing and divides the loss itself
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (OSError, TypeError, SyntaxError):  # no source to read: leave the Trainer's own reading
        return False
    return not any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "loss_function"
        and any(k.arg is None or k.arg == "num_items_in_batch" for k in node.keywords)
        for node in ast.walk(tree)
    )
