"""Ray starts in a driver that runs no threads of its own work, with whole logical CPUs, and a Ray
that does not start says where to look (the trust issue's item 6: on a 16-core machine `ray.init`
timed out; the cause, found on an H200 node, was the float num_cpus)."""

from __future__ import annotations

import pytest

from hfsweep.config.errors import ConfigError, RayStartError
from hfsweep.config.schema import ClusterConfig, typed
from hfsweep.driver import ray_cluster


def test_a_ray_that_never_registers_its_raylet_is_refused_in_one_line_naming_its_output(monkeypatch):
    def timed_out():
        raise Exception(
            "The current node timed out during startup. This could happen because some of the "
            "raylet failed to startup or the GCS has become overloaded."
        )

    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kwargs: timed_out())
    cluster = typed(ClusterConfig, {"num_cpus": 8})
    with pytest.raises(RayStartError) as refused:
        ray_cluster.start_local_ray(cluster, {}, {})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Ray did not start") and "RAY_LOG_TO_STDERR=1" in message and "raylet.err" in message


def test_a_local_ray_is_given_whole_logical_cpus_and_a_fraction_is_refused(monkeypatch):
    """OmegaConf gives cluster.num_cpus as 8.0; Ray hands its raylet min(cores, num_cpus) as an int
    flag, and on a 16-core GPU node the raylet refused '8.0' and never registered."""
    given = []
    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kwargs: given.append(kwargs))
    ray_cluster.start_local_ray(typed(ClusterConfig, {"num_cpus": 8.0}), {}, {})
    assert given[0]["num_cpus"] == 8 and isinstance(given[0]["num_cpus"], int)
    with pytest.raises(ConfigError, match=r"^cluster.num_cpus: 2.5 logical CPUs .* whole number"):
        ray_cluster.start_local_ray(typed(ClusterConfig, {"num_cpus": 2.5}), {}, {})


@pytest.mark.parametrize("in_checkout", [True, False])
def test_a_checkout_run_in_its_folder_puts_itself_on_the_local_workers_path(in_checkout, monkeypatch, tmp_path):
    """`python -m hfsweep` in a checkout imports that checkout; a local Ray's workers start elsewhere
    and, with another copy installed (a worktree beside the installed checkout), ran that copy's code
    in every trial. Elsewhere (an installed hfsweep) the workers' path is left alone."""
    import os

    import hfsweep

    checkout = os.path.dirname(os.path.abspath(hfsweep.__path__[0]))
    monkeypatch.chdir(checkout if in_checkout else tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    given = []
    monkeypatch.setattr(ray_cluster.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_cluster.ray, "init", lambda **kwargs: given.append(kwargs))
    ray_cluster.init_ray(typed(ClusterConfig, {"num_cpus": 2}))
    path = given[0]["runtime_env"]["env_vars"].get("PYTHONPATH")
    assert path == (f"{checkout}{os.pathsep}/elsewhere" if in_checkout else None)


@pytest.mark.parametrize("ray_up", [True, False], ids=["ray up", "ray to start"])
def test_the_data_is_prepared_in_a_spawned_process_only_when_this_driver_starts_ray_after_it(
    ray_up, monkeypatch, tmp_path, cache_dir
):
    """The spawned process keeps tokenizer threads out of a driver that then starts Ray by fork.
    With Ray already up (a notebook, a benchmark, a test module) nothing forks, and the spawn's
    seconds are saved: the driver prepares in its own process."""
    from hfsweep.driver import tuner
    from hfsweep.driver.preflight import task_of
    from tests.conftest import sweep_config

    sweep = sweep_config(["data.max_train_samples=50"], tmp_path, cache_dir)
    ways = []
    monkeypatch.setattr(tuner.ray, "is_initialized", lambda: ray_up)
    monkeypatch.setattr(tuner, "prepare", lambda *args: ways.append("here"))
    monkeypatch.setattr(tuner, "prepare_apart", lambda *args: ways.append("apart"))
    tuner.plan_sweep(sweep, task_of(sweep))
    assert ways == (["here"] if ray_up else ["apart"])
