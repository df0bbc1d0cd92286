"""`python tools/wheelhouse.py`'s own logic, without the network: what the target has (a freeze or
names), the platform tags a manylinux target takes, which of pip's resolution the wheelhouse keeps,
and --slim's rewrite of a wheel, installed by the real pip from a tiny fake wheel."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

TOOL = Path(__file__).resolve().parents[2] / "tools" / "wheelhouse.py"
sys.path.insert(0, str(TOOL.parent))  # tools/ holds scripts run from a clone, not a package
from wheelhouse import WheelhouseError, expand_platforms, marker_environment, needed, read_target, slim_wheel, stand_in


def test_a_pip_freeze_and_a_list_of_names_both_say_what_the_target_has():
    have = read_target(
        [
            "# the GPU node",
            "torch==2.13.0+cpu",  # a local version label: ==2.13.0 matches it
            "typing_extensions==4.16.0",
            "Jinja2",  # a bare name: version unknown
            "peft @ file:///tmp/peft-0.18.0-py3-none-any.whl",
            "-e git+https://example.invalid/x.git@abc#egg=my_pkg",
            "",
        ]
    )
    assert have == {"torch": "2.13.0", "typing-extensions": "4.16.0", "jinja2": None, "peft": None, "my-pkg": None}


def test_a_line_that_is_no_package_is_refused_naming_it():
    with pytest.raises(WheelhouseError, match=r"line 2 \('torch >= 2'\)"):
        read_target(["numpy", "torch >= 2"])


@pytest.mark.process
def test_a_bad_have_file_is_refused_in_one_line_with_status_2(tmp_path):
    have = tmp_path / "have.txt"
    have.write_text("numpy\nnot a package!\n")
    ran = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path / "wh"), "--have", str(have)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.splitlines() == [
        f"wheelhouse: error: --have {have}: line 2 ('not a package!') is neither a package name nor `name==version`"
    ]
    assert not (tmp_path / "wh").exists()


def test_a_manylinux_platform_takes_every_older_glibc_and_the_legacy_names():
    tags = expand_platforms(["manylinux_2_28_x86_64"])
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_5_x86_64" in tags and "manylinux_2_4_x86_64" not in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    legacy = expand_platforms(["manylinux2014_x86_64"])
    assert "manylinux_2_17_x86_64" in legacy and "manylinux_2_18_x86_64" not in legacy
    assert expand_platforms(["win_amd64"]) == ["win_amd64"]


def item(name, version, *requires):
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)}}


def test_the_wheelhouse_keeps_what_hfsweep_needs_through_packages_the_target_lacks():
    report = {
        "install": [
            item(
                "hfsweep",
                "0.1.0",
                "ray[default,train]>=2.60",
                "torch>=2.4",
                "datasets>=4",
                "colorama; sys_platform == 'win32'",
                "optuna; extra == 'search'",
            ),
            item(
                "ray",
                "2.60.0",
                "click",
                "aiohttp-cors; extra == 'default'",
                "pydantic<3; extra == 'train'",
                "gymnasium; extra == 'rllib'",
                "pyarrow; python_version < '3.12'",
            ),
            item("torch", "2.11.0", "nvidia-cublas; platform_system == 'Linux'", "sympy"),
            item("datasets", "4.1.0", "dill<0.4", "Fsspec[http]<=2025.9"),
            item("aiohttp-cors", "0.8.1", "aiohttp"),
            item("pydantic", "2.14.0", "pydantic-core==2.50"),
            item("pydantic-core", "2.50.0"),
            item("click", "8.3.0"),
            item("dill", "0.3.8"),
            item("fsspec", "2025.9.0"),
            item("nvidia-cublas", "13.0"),
            item("sympy", "1.14"),
            item("aiohttp", "3.12"),
            item("colorama", "0.4"),
            item("optuna", "4.0"),
            item("gymnasium", "1.0"),
            item("pyarrow", "20.0"),
        ]
    }
    have = {"torch": "2.11.0", "click": None, "fsspec": None, "aiohttp": None}
    keep = needed(report, [Requirement("hfsweep")], have, marker_environment("3.12", ["manylinux_2_28_x86_64"]))
    # torch's own needs (nvidia-cublas, sympy) are the target's; markers are the target's (Linux, 3.12);
    # only the extras asked for (ray's default and train, not hfsweep's search or ray's rllib)
    assert sorted(keep) == ["aiohttp-cors", "datasets", "dill", "hfsweep", "pydantic", "pydantic-core", "ray"]
    on_311 = needed(report, [Requirement("hfsweep")], have, marker_environment("3.11", ["manylinux_2_28_x86_64"]))
    assert "pyarrow" in on_311
    with_extra = needed(
        report, [Requirement("hfsweep[search]")], have, marker_environment("3.12", ["manylinux_2_28_x86_64"])
    )
    assert "optuna" in with_extra
    # a version the target has that a requirement excludes is shipped: ray[default] needs aiohttp>=3.14.4,
    # and the GPU machine's image held 3.14.3 (its `pip install --no-index` failed on that)
    report["install"][4] = item("aiohttp-cors", "0.8.1", "aiohttp>=3.14.4")
    older = needed(
        report,
        [Requirement("hfsweep")],
        {**have, "aiohttp": "3.14.3"},
        marker_environment("3.12", ["manylinux_2_28_x86_64"]),
    )
    newer = needed(
        report,
        [Requirement("hfsweep")],
        {**have, "aiohttp": "3.14.4"},
        marker_environment("3.12", ["manylinux_2_28_x86_64"]),
    )
    assert "aiohttp" in older and "aiohttp" not in newer


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def fake_ray_wheel(folder):
    """A tiny wheel laid out as Ray's: a jar under ray/jars/ and a Python module that names Java."""
    files = {
        "ray/__init__.py": b"VERSION = '9.9.9'\n",
        "ray/jars/ray_dist.jar": b"PK" + bytes(range(256)) * 400,
        "ray/_private/runtime_env/java_jars.py": b"# imported by every runtime env\n",
        "ray-9.9.9.dist-info/METADATA": b"Metadata-Version: 2.1\nName: ray\nVersion: 9.9.9\n",
        "ray-9.9.9.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
        ),
    }
    record = "".join(record_line(name, data) for name, data in files.items()) + "ray-9.9.9.dist-info/RECORD,,\n"
    wheel = folder / "ray-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("ray-9.9.9.dist-info/RECORD", record)
    return wheel


@pytest.mark.process
def test_slim_leaves_the_jars_out_of_the_wheel_and_its_record_and_pip_installs_it(tmp_path):
    wheel = fake_ray_wheel(tmp_path)
    size = wheel.stat().st_size
    saved = slim_wheel(wheel, ("ray/jars/",))
    assert saved > 0 and wheel.stat().st_size == size - saved
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = zf.read("ray-9.9.9.dist-info/RECORD").decode()
    assert "ray/jars/ray_dist.jar" not in names and "ray/_private/runtime_env/java_jars.py" in names
    assert "ray/jars/" not in record and "ray/__init__.py,sha256=" in record
    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert installed.returncode == 0, installed.stderr
    assert (target / "ray" / "__init__.py").is_file() and not (target / "ray" / "jars").exists()
    installed_record = (target / "ray-9.9.9.dist-info" / "RECORD").read_text()
    assert "ray/jars/" not in installed_record and "ray/__init__.py" in installed_record


def test_slim_refuses_a_file_that_is_no_wheel(tmp_path):
    bogus = tmp_path / "ray-1-py3-none-any.whl"
    with zipfile.ZipFile(bogus, "w") as zf:
        zf.writestr("ray/__init__.py", "")
    with pytest.raises(WheelhouseError, match="not a wheel"):
        slim_wheel(bogus, ("ray/jars/",))


@pytest.mark.process
def test_a_left_out_requirement_is_a_metadata_only_stand_in_that_pip_resolves(tmp_path):
    wheel = fake_ray_wheel(tmp_path)
    assert stand_in(wheel) > 0
    with zipfile.ZipFile(wheel) as zf:
        assert sorted(zf.namelist()) == [
            "ray-9.9.9.dist-info/METADATA",
            "ray-9.9.9.dist-info/RECORD",
            "ray-9.9.9.dist-info/WHEEL",
        ]
    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(tmp_path),
            "--target",
            str(target),
            "ray==9.9.9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert installed.returncode == 0, installed.stderr
    assert (target / "ray-9.9.9.dist-info").is_dir() and not (target / "ray").exists()
