"""How a command starts and ends: bad cluster and storage settings fail fast, in one line, before
any trial starts; a command that ran a sweep leaves its heap frozen, so that it exits fast."""

from __future__ import annotations

import sys

import pytest

from hfsweep.config.errors import ConfigError
from hfsweep.driver import sweep
from hfsweep.driver.preflight import preflight
from hfsweep.driver.ray_cluster import check_reachable
from tests.conftest import resolved_config


def test_unreachable_cluster_address_is_refused_by_a_probe_before_ray_init():
    with pytest.raises(
        ConfigError, match=r"^cluster\.address: cannot reach a Ray head at '127\.0\.0\.1:1' \(ConnectionRefusedError\)"
    ):
        check_reachable("127.0.0.1:1")


def test_malformed_cluster_address_names_the_form():
    with pytest.raises(ConfigError, match=r"HOST:PORT"):
        check_reachable("ray://head-without-port")


@pytest.mark.process
def test_unwritable_storage_path_fails_before_ray(tmp_path, cache_dir):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = resolved_config([], blocker / "run", cache_dir)
    with pytest.raises(
        ConfigError, match=r"^cluster\.storage_path: cannot write to '.*/a-file/run' \(NotADirectoryError"
    ):
        sweep.run(preflight(cfg))


@pytest.mark.parametrize("entry", ["hfsweep", "hfsweep.resume", "hfsweep.replay"])
def test_a_command_that_ran_a_sweep_leaves_its_heap_frozen_for_a_fast_exit(entry, monkeypatch):
    """`hfsweep.cli.leave_heap_to_exit`: after the sweep, the interpreter's exit would collect the
    whole heap the sweep left (19-106 s on 2 cores). Each command that runs sweeps freezes it; here
    with the sweep itself stubbed out, as `python -m ENTRY` runs the module."""
    import gc
    import runpy

    import hfsweep.__main__
    import hfsweep.cli.replay
    import hfsweep.cli.resume

    gc.unfreeze()
    monkeypatch.setattr(hfsweep.__main__, "main", lambda: None)
    monkeypatch.setattr(hfsweep.cli.resume, "main", lambda: 0)
    monkeypatch.setattr(hfsweep.cli.replay, "main", lambda: 0)
    monkeypatch.setattr(sys, "argv", [entry])
    try:
        if entry == "hfsweep":
            hfsweep.__main__.cli()
        else:
            with pytest.raises(SystemExit) as exit:
                runpy.run_module(entry, run_name="__main__")
            assert exit.value.code == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
