"""The package's layering: each module imports only its own layer and the layers below it (the
docs/architecture.md lists them), so a decision's owner never reaches up to a caller."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hfsweep"

# Top to bottom. A module's layer is that of its longest listed prefix.
LAYERS = [
    (
        "hfsweep.__main__",
        "hfsweep.cli",
        "hfsweep.glue",
        "hfsweep.replay",
        "hfsweep.report",
        "hfsweep.resume",
        "hfsweep.simulate",
        "hfsweep.datasets_offline",
    ),
    ("hfsweep.driver",),
    ("hfsweep.trial",),
    ("hfsweep.loops",),
    ("hfsweep.tasks",),
    ("hfsweep.data", "hfsweep.models"),
    ("hfsweep.config", "hfsweep.conf"),
    # the schema is the typed config every layer reads (it imports nothing of hfsweep)
    ("hfsweep.contract", "hfsweep.config.schema", "hfsweep.run_dir", "hfsweep.compat", "hfsweep"),
]


def layer_of(module: str) -> int:
    matches = [
        (len(prefix), depth)
        for depth, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every hfsweep import in the file, function-level ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("hfsweep")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hfsweep"):
            found += [
                (node.lineno, f"{node.module}.{alias.name}")
                if f"{node.module}.{alias.name}".replace(".", "/") in SUBMODULES
                else (node.lineno, node.module)
                for alias in node.names
            ]
    return found


SUBMODULES = {str(p.relative_to(PACKAGE.parent).with_suffix("")) for p in PACKAGE.rglob("*.py")}
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert MODULES
    for path in MODULES:
        layer_of(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_only_go_down(path):
    own = layer_of(module_name(path))
    upward = [
        f"line {line}: {module} ({LAYERS[layer_of(module)][0]})"
        for line, module in imported_modules(path)
        if layer_of(module) < own
    ]
    assert not upward, f"{module_name(path)} ({LAYERS[own][0]}) imports a layer above it: {'; '.join(upward)}"


def test_every_task_family_is_what_data_and_models_annotate():
    """`contract.protocols.DataTask` and `contract.protocols.ModelTask` are the one description of what `hfsweep.data`
    and `hfsweep.models` use of a Task: each family has all of it (and `MetricTask`), and they use nothing else."""
    from typing_extensions import get_protocol_members  # typing has it from Python 3.13

    from hfsweep.contract.protocols import DataTask, MetricTask, ModelTask
    from hfsweep.tasks import get_task, task_names

    for name in task_names():
        assert all(isinstance(get_task(name), protocol) for protocol in (DataTask, ModelTask, MetricTask)), name
    for protocol, paths in ((DataTask, (PACKAGE / "data").glob("*.py")), (ModelTask, [PACKAGE / "models.py"])):
        used = {
            node.attr
            for path in paths
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "task"
        }
        assert used == set(get_protocol_members(protocol)), protocol.__name__


def test_modules_moved_into_sub_packages_still_import_by_their_old_names():
    """A saved sweep names the driver's modules by their paths before search/ existed (classes
    pickled in Tune's state, `_target_`s in resolved_config.yaml); tests/unit/test_cost.py unpickles
    one such budget."""
    import importlib

    from hfsweep.config.loading import import_object
    from hfsweep.driver import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    assert import_object("hfsweep.driver.schedulers.ThresholdStopper").__module__ == "hfsweep.driver.search.schedulers"


def test_every_package_ships_in_the_wheel():
    """pyproject.toml lists hfsweep's packages by hand; one left out installs (non-editable) without
    it, which only the slow wheel test would notice."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(PACKAGE.parent).parts) for init in PACKAGE.rglob("__init__.py")} | {
        "hfsweep.conf"
    }
    assert found == listed


BELOW_THE_TRIAL = ("hfsweep.loops", "hfsweep.tasks", "hfsweep.data", "hfsweep.models", "hfsweep.contract")


def test_below_the_trial_nothing_reads_the_whole_config():
    """The loops take a `TrainJob`, the checks the preflight's typed `SweepConfig`, data and models
    the sub-config they need: a parameter `cfg` (the resolved config, read by key) is none of them."""
    readers = [
        f"{module_name(path)}.{node.name}"
        for path in MODULES
        if module_name(path).startswith(BELOW_THE_TRIAL)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and any(arg.arg == "cfg" for arg in (*node.args.args, *node.args.kwonlyargs))
    ]
    assert not readers, f"these read the whole config; give them the sub-config they need: {', '.join(readers)}"


# In the driver and the trial a config is the typed `SweepConfig` (or a sub-config of it); a dict
# config is taken only where a dict is what there is: the resolved config the preflight checks and
# types, and a recorded sweep's config, which may be partial (a bare Tune experiment's).
DICT_CONFIG_TAKERS = {
    "hfsweep.driver.preflight.preflight",
    "hfsweep.driver.search.simulate.build_simulated_scheduler",
}


def test_the_driver_takes_the_typed_config_not_a_dict():
    takers = {
        f"{module_name(path)}.{node.name}"
        for path in MODULES
        if module_name(path).startswith(("hfsweep.driver", "hfsweep.trial"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        for arg in (*node.args.args, *node.args.kwonlyargs)
        if arg.arg.endswith("cfg") and isinstance(arg.annotation, ast.Name) and arg.annotation.id == "dict"
    }
    assert takers <= DICT_CONFIG_TAKERS, f"take the typed SweepConfig: {', '.join(sorted(takers - DICT_CONFIG_TAKERS))}"


def test_a_dict_becomes_a_typed_config_in_the_config_layer_and_the_preflight_alone():
    """`typed` is called where a config enters: the preflight (a resolved config) and the config
    layer (a saved one); everything after takes the typed config or a sub-config of it."""
    callers = [
        f"{module_name(path)}:{node.lineno}"
        for path in MODULES
        if not module_name(path).startswith(("hfsweep.config", "hfsweep.driver.preflight"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "typed"
    ]
    assert not callers, f"pass the typed config on instead of typing a dict again: {', '.join(callers)}"


@pytest.mark.process
def test_a_trial_process_imports_no_datasets_library(tmp_path):
    """A worker-group trial starts a fresh process per trial: what it imports and unpickles (the
    trainable's module, every built-in Task, the sweep's config and `PreparedData`) leaves the
    `datasets` library, a second or more of each trial's start on 2 cores, to the workers and to
    `prepare`. Checked in a fresh interpreter, as the trial's process is."""
    import pickle
    import subprocess
    import sys

    from hfsweep.data.prepared import PreparedData
    from hfsweep.tasks import get_task, task_names
    from tests.conftest import sweep_config

    sent = tmp_path / "sent.pkl"
    sweep = sweep_config([], tmp_path / "runs", tmp_path / "cache")
    tasks = [get_task(name) for name in task_names()]
    sent.write_bytes(pickle.dumps((sweep, tasks, PreparedData("t", "a", "b", 1, 1))))
    child = (
        "import pickle, sys; import hfsweep.trial.trainable; "
        f"pickle.loads(open({str(sent)!r}, 'rb').read()); print('datasets' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"
