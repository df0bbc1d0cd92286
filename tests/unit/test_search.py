"""Search-space compilation: every sampler, every error, merging sampled values."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import ValidationError
from ray.tune.search.sample import Categorical, Float, Integer, LogUniform, Quantized

from hfsweep.config.errors import ConfigError
from hfsweep.config.schema import SweepConfig, merged, typed
from hfsweep.driver.search.search_space import compile_search_space

BASE = typed(SweepConfig, {"training": {"learning_rate": 1e-3, "warmup_steps": 0}, "model": {"config": {"n_layer": 2}}})


def compiled(spec: dict, path: str = "training.learning_rate"):
    *parents, leaf = path.split(".")
    space: dict = {}
    node = space
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = spec
    result = compile_search_space(space, BASE)
    for part in path.split("."):
        result = result[part]
    return result


def test_grid_becomes_grid_search():
    assert compiled({"sampler": "grid", "values": [1, 2]}) == {"grid_search": [1, 2]}


def test_choice():
    domain = compiled({"sampler": "choice", "values": [1e-3, 1e-4]})
    assert isinstance(domain, Categorical) and domain.categories == [1e-3, 1e-4]


@pytest.mark.parametrize(
    "spec, kind, bounds",
    [
        ({"sampler": "uniform", "low": 0.1, "high": 0.5}, Float, (0.1, 0.5)),
        ({"sampler": "quniform", "low": 0.0, "high": 1.0, "q": 0.1}, Float, (0.0, 1.0)),
        ({"sampler": "loguniform", "low": 1e-5, "high": 1e-2}, Float, (1e-5, 1e-2)),
        ({"sampler": "qloguniform", "low": 1e-4, "high": 1e-1, "q": 1e-4}, Float, (1e-4, 1e-1)),
        ({"sampler": "randint", "low": 1, "high": 8}, Integer, (1, 8)),
        ({"sampler": "qrandint", "low": 2, "high": 16, "q": 2}, Integer, (2, 16)),
        ({"sampler": "lograndint", "low": 1, "high": 64}, Integer, (1, 64)),
    ],
)
def test_numeric_samplers(spec, kind, bounds):
    domain = compiled(spec)
    assert isinstance(domain, kind)
    assert (domain.lower, domain.upper) == bounds
    sampler = domain.get_sampler()
    if spec["sampler"].startswith("log"):
        assert isinstance(sampler, LogUniform)
    if spec["sampler"].startswith("q"):
        assert isinstance(sampler, Quantized) and sampler.q == spec["q"]
    for value in domain.sample(size=20):
        assert bounds[0] <= value <= bounds[1]


def test_nested_model_key_is_searchable():
    assert compiled({"sampler": "grid", "values": [2, 4]}, "model.config.n_layer") == {"grid_search": [2, 4]}


@pytest.mark.parametrize(
    "space, message",
    [
        (
            {"training": {"learning_rat": {"sampler": "grid", "values": [1]}}},
            r"search_space\.training\.learning_rat: 'training\.learning_rat' is not a key of the composed config",
        ),
        ({"training": {"learning_rate": {"sampler": "normal", "low": 0, "high": 1}}}, r"unknown sampler 'normal'"),
        (
            {"training": {"learning_rate": {"sampler": "uniform", "low": 1, "high": 1}}},
            r"low \(1\) must be below high \(1\)",
        ),
        (
            {"training": {"learning_rate": {"sampler": "loguniform", "low": 0, "high": 1}}},
            r"sampler 'loguniform' needs low > 0, got 0",
        ),
        ({"training": {"learning_rate": {"sampler": "uniform", "low": 0}}}, r"sampler 'uniform' needs low and high"),
        ({"training": {"learning_rate": {"sampler": "choice", "values": []}}}, r"needs a non-empty list of values"),
        (
            {"training": {"learning_rate": 0.1}},
            r"search_space\.training\.learning_rate: expected \{sampler: NAME, \.\.\.\}",
        ),
        (
            {"training": {"learning_rate": {"sampler": "quniform", "low": 1e-4, "high": 1e-2}}},
            r"^search_space\.training\.learning_rate\.q: quniform rounds every sample to a multiple of q; give it "
            r"\(above 0\), or use uniform for samples unrounded\.$",
        ),
        (
            {"training": {"learning_rate": {"sampler": "quniform", "low": 0.25, "high": 0.9, "q": 0.1}}},
            r"^search_space\.training\.learning_rate: Tune refuses this range \(.*divisible.*\); fix low, high or q\.$",
        ),
        (
            {"training": {"learning_rate": {"sampler": "grid", "values": [1e-3], "low": 1e-5, "high": 1e-3}}},
            r"^search_space\.training\.learning_rate: sampler 'grid' reads values, not low, high; set "
            r"search_space\.training\.learning_rate\.sampler=loguniform \(or uniform\) to sample the range, or remove "
            r"~search_space\.training\.learning_rate\.low ~search_space\.training\.learning_rate\.high to keep the "
            r"values\.$",
        ),
    ],
)
def test_search_space_errors(space, message):
    with pytest.raises(ConfigError, match=message):
        compile_search_space(space, BASE)


def test_a_trials_sampled_values_merge_into_a_typed_copy_of_the_sweeps_config():
    sweep = typed(SweepConfig, {"training": {"learning_rate": 1e-3, "warmup_steps": 0}})
    trial = merged(sweep, {"training": {"learning_rate": 0.5}, "cluster": {"num_workers": np.int64(3)}})
    assert trial.training == {"learning_rate": 0.5, "warmup_steps": 0}
    assert trial.cluster.num_workers == 3 and type(trial.cluster.num_workers) is int  # a searcher's numpy value
    assert sweep.training["learning_rate"] == 1e-3 and sweep.cluster.num_workers == 2
    with pytest.raises(ValidationError):  # checked against its field
        merged(sweep, {"cluster": {"num_workers": "two"}})
