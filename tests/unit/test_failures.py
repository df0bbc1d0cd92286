"""Bad cluster and storage settings fail fast, in one line, before any trial starts."""

from __future__ import annotations

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
