"""A wheelhouse for a machine without network: hfsweep's wheel and the wheels of every dependency
the target environment lacks, for the target's Python and platform, so that

    pip install --no-index --find-links WH hfsweep

installs it there. Run it where PyPI is reachable:

    python tools/wheelhouse.py WH --have target-freeze.txt                     # this machine's Python
    python tools/wheelhouse.py WH --python-version 3.12 --platform manylinux_2_28_x86_64 \\
        --have benchmarks/gpu_target_packages.txt --slim \\
        --leave-out virtualenv --leave-out py-spy                               # an air-gapped GPU node

How: pip resolves hfsweep (with `--extra`s and `--with` requirements) for the target
(`pip install --dry-run --report` with `--only-binary=:all: --python-version --platform`), pinning
the versions the target has (`--have`: a `pip freeze` of it, or bare names where the version is not
known). Of the result, only what hfsweep needs through packages the target lacks is kept: a package
the target has is neither downloaded nor followed into its own requirements. Requirements published
only as source (antlr4-python3-runtime for Hydra, seqeval, rouge-score) are built here as pure-Python
wheels (`pip wheel --no-deps`); one that compiles code is refused, since it would be built for this
machine's Python. `--slim` rewrites Ray's wheel without its Java jars (`ray/jars/`, 31 MB of its
79: Ray's Java workers, which a Python user never starts) and drops their lines from the wheel's
RECORD, so pip installs it as any other wheel.

Only the standard library and pip are used (`packaging` from pip's vendored copy when it is not
installed), so it runs from a clone, the source tree it builds hfsweep's wheel from, with nothing installed.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

try:
    from packaging.markers import Marker  # noqa: F401
    from packaging.requirements import Requirement
except ImportError:  # pragma: no cover - pip always carries it
    from pip._vendor.packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]

# What --slim leaves out of a wheel, by the wheel's project: paths under these prefixes. Ray's only
# Java-only content is its jar (ray/jars/ray_dist.jar); ray/_private/runtime_env/java_jars.py is a
# Python module every runtime environment imports, so it stays.
SLIM = {"ray": ("ray/jars/",)}

# Legacy manylinux names and the glibc they stand for.
MANYLINUX_ALIASES = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


class WheelhouseError(Exception):
    """A problem the user can fix: printed as one line, exit status 2."""


def record_digest(data: bytes) -> str:
    """A file's hash as a wheel's RECORD writes it (PEP 376: urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def canonical(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_target(lines) -> dict[str, str | None]:
    """The packages a target environment has: canonical name -> version (None where only the name
    is given). Takes `pip freeze` output (`name==version`, `name @ URL`, `-e` lines) and plain lists
    of names; `#` starts a comment. A local version label (`2.13.0+cpu`) is dropped, as PEP 440
    matches `==2.13.0` against it."""
    have: dict[str, str | None] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-e ", "--editable")):
            egg = re.search(r"#egg=([A-Za-z0-9._-]+)", raw)
            if egg:
                have[canonical(egg.group(1))] = None
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:(?:===?)\s*([^\s;]+)|@\s*\S+)?", line)
        if not match:
            raise WheelhouseError(f"line {number} ({line!r}) is neither a package name nor `name==version`")
        version = match.group(2)
        have[canonical(match.group(1))] = version.split("+", 1)[0] if version else None
    return have


def expand_platforms(platforms: list[str]) -> list[str]:
    """Every platform tag a target of these platforms installs, as pip's own tag list holds them on
    such a machine: `manylinux_2_28_x86_64` also takes manylinux_2_27 ... manylinux_2_5 and the
    legacy names (manylinux2014 = 2_17, manylinux2010 = 2_12, manylinux1 = 2_5). pip matches a given
    --platform exactly, so the older ones are spelt out. Other tags pass through."""
    tags: list[str] = []
    for platform in platforms:
        legacy = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)", platform)
        modern = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
        if not legacy and not modern:
            tags.append(platform)
            continue
        (major, minor), arch = (
            (MANYLINUX_ALIASES[legacy.group(1)], legacy.group(2))
            if legacy
            else ((int(modern.group(1)), int(modern.group(2))), modern.group(3))
        )
        tags += [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
        tags += [f"{alias}_{arch}" for alias, (_, m) in MANYLINUX_ALIASES.items() if m <= minor]
    return list(dict.fromkeys(tags))


def this_platform() -> str:
    """This machine's manylinux tag (its glibc), the default --platform."""
    import platform

    libc, version = platform.libc_ver()
    match = re.match(r"(\d+)\.(\d+)", version or "")
    if libc != "glibc" or not match:
        return f"manylinux2014_{platform.machine()}"
    return f"manylinux_{match.group(1)}_{match.group(2)}_{platform.machine()}"


def marker_environment(python_version: str, platforms: list[str]) -> dict[str, str]:
    """PEP 508 marker values of the target: CPython `python_version` on Linux (or what the
    platform tag names)."""
    arch = re.search(r"(x86_64|aarch64|ppc64le|s390x|i686|armv7l)$", platforms[0])
    system = "Windows" if platforms[0].startswith("win") else "Darwin" if platforms[0].startswith("macosx") else "Linux"
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "implementation_version": f"{python_version}.0",
        "sys_platform": {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}[system],
        "platform_system": system,
        "os_name": "nt" if system == "Windows" else "posix",
        "platform_machine": arch.group(1) if arch else "x86_64",
        "platform_release": "",
        "platform_version": "",
    }


def needed(report: dict, roots: list[Requirement], have: dict, environment: dict) -> dict[str, dict]:
    """Of pip's resolution (`report`, its --report JSON), what the roots need through packages the
    target lacks, or has at a version a requirement excludes: canonical name -> the report's item.
    A package the target has at a fitting version ends the walk there: its own requirements are
    the target's, already met."""
    items = {canonical(item["metadata"]["name"]): item for item in report["install"]}
    root_names = {canonical(r.name) for r in roots}
    keep: dict[str, dict] = {}
    todo = [(root, set(root.extras)) for root in roots]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        requirement, extras = todo.pop()
        name = canonical(requirement.name)
        fits = name in have and (have[name] is None or requirement.specifier.contains(have[name], prereleases=True))
        if (name, frozenset(extras)) in seen or (fits and name not in root_names):
            continue
        seen.add((name, frozenset(extras)))
        if name not in items:
            raise WheelhouseError(f"{name} is required but pip's resolution does not hold it")
        keep[name] = items[name]
        for spec in items[name]["metadata"].get("requires_dist", []):
            requirement = Requirement(spec)
            if requirement.marker is None or any(
                requirement.marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras)
            ):
                todo.append((requirement, set(requirement.extras)))
    return keep


def slim_wheel(path: Path, drop: tuple[str, ...]) -> int:
    """Rewrite the wheel at `path` without the entries under the `drop` prefixes, and without their
    lines in its RECORD, so that RECORD lists exactly the files the wheel holds, as the wheel spec
    asks (pip writes the installed RECORD from it). The kept files' hashes are unchanged. Returns
    the bytes saved; the wheel's name stays."""
    before = path.stat().st_size
    tmp = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        records = [n for n in src.namelist() if re.fullmatch(r"[^/]+\.dist-info/RECORD", n)]
        if len(records) != 1:
            raise WheelhouseError(f"{path.name}: not a wheel (it holds {len(records)} .dist-info/RECORD files)")
        dropped = {n for n in src.namelist() if n.startswith(drop)}
        for info in src.infolist():
            if info.filename in dropped:
                continue
            data = src.read(info.filename)
            if info.filename == records[0]:
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",", 1)[0] not in dropped).encode()
            info.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(info, data, compresslevel=9)
    tmp.replace(path)
    return before - path.stat().st_size


def stand_in(wheel: Path) -> int:
    """Replace `wheel` with a metadata-only wheel of the same name and version (no requirements, no
    code), so pip's resolution on the target is met while the package itself stays behind:
    importing it there fails. For requirements hfsweep never runs (`--leave-out`). Returns the bytes
    saved."""
    before = wheel.stat().st_size
    name, version = wheel.name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(wheel) as src:
        metadata = src.read(f"{info}/METADATA").decode()
    kept = [
        line
        for line in metadata.split("\n\n", 1)[0].splitlines()
        if line.split(":", 1)[0] in ("Metadata-Version", "Name", "Version", "Requires-Python")
    ]
    files = {
        f"{info}/METADATA": "\n".join([*kept, "Summary: stand-in left out by hfsweep.wheelhouse --leave-out", ""]),
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hfsweep.wheelhouse\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{n},sha256={record_digest(d.encode())},{len(d.encode())}\n" for n, d in files.items())
    record += f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as dst:
        for n, d in {**files, f"{info}/RECORD": record}.items():
            dst.writestr(n, d)
    return before - wheel.stat().st_size


def run_pip(args: list[str], what: str) -> subprocess.CompletedProcess:
    ran = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if ran.returncode:
        raise WheelhouseError(f"{what} failed: {pip_error(ran.stderr)}")
    return ran


def pip_error(stderr: str) -> str:
    """pip's error in one line: its conflict's causes where it names them, else its ERROR lines."""
    causes = re.search(r"The conflict is caused by:\n(.*?)\n\n", stderr, re.S)
    if causes:
        return "conflicting requirements: " + "; ".join(line.strip() for line in causes.group(1).splitlines())
    lines = [line for line in stderr.splitlines() if line.startswith("ERROR")] or stderr.strip().splitlines()[-1:]
    return " ".join(lines)


def unavailable(stderr: str) -> str | None:
    """The requirement pip found no (binary) distribution for, from its error output."""
    match = re.search(r"No matching distribution found for (\S+)", stderr)
    return match.group(1) if match else None


def build_pure_wheel(spec: str, into: Path) -> Path:
    """A py3-none-any wheel of `spec`, which PyPI has only as source; one that compiles is refused."""
    with tempfile.TemporaryDirectory() as out:
        run_pip(["wheel", "--no-deps", "--no-cache-dir", "-q", "-w", out, spec], f"building a wheel of {spec}")
        (wheel,) = Path(out).glob("*.whl")
        if not wheel.name.endswith("-none-any.whl"):
            raise WheelhouseError(
                f"{spec} is published only as source and compiles code ({wheel.name}): "
                "build it on a machine of the target's Python and platform"
            )
        return Path(shutil.move(str(wheel), into / wheel.name))


def actionable(spec: str, built: set, pins: dict) -> bool:
    """A requirement pip could not meet that the next round can act on: one to build here, or one
    whose name the target pins at a version (which is then unpinned)."""
    name = canonical(Requirement(spec).name)
    return name not in built and (name not in pins or bool(pins[name]))


def resolve(roots: list[str], python_version: str, tags: list[str], have: dict, house: Path, log) -> dict:
    """pip's resolution of `roots` for the target, building pure wheels of source-only needs as
    they come up; a pinned target version PyPI has no wheel of is unpinned (with a note)."""
    pins = dict(have)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(20):
            constraints = Path(tmp, "constraints.txt")
            constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items() if version))
            report = Path(tmp, "report.json")
            platform_args = [arg for tag in tags for arg in ("--platform", tag)]
            ran = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--dry-run",
                    "--ignore-installed",
                    "--report",
                    str(report),
                    "--only-binary=:all:",
                    "--python-version",
                    python_version,
                    *platform_args,
                    "--target",
                    str(Path(tmp, "t")),
                    "--find-links",
                    str(house),
                    "-c",
                    str(constraints),
                    *roots,
                ],
                capture_output=True,
                text=True,
            )
            if ran.returncode == 0:
                return json.loads(report.read_text())
            output = ran.stdout + ran.stderr  # pip prints a conflict's causes on stdout
            built = {canonical(w.name.split("-")[0]) for w in house.glob("*.whl")}
            specs = (
                [unavailable(output)]
                if unavailable(output)
                else [spec for spec in re.findall(r"depends on ([^\s;]+)", output) if actionable(spec, built, pins)]
            )
            if not specs:
                raise WheelhouseError(
                    f"pip could not resolve {' '.join(roots)} for Python {python_version}: {pip_error(output)}"
                )
            spec = specs[0]
            name = canonical(Requirement(spec).name)
            if pins.get(name):
                log(
                    f"  the target's {name}=={pins[name]} does not meet {spec}, or has no wheel for this "
                    "Python/platform on the index: left unpinned, and the wheelhouse ships the version pip resolves"
                )
                pins[name] = None
                continue
            if name in built:
                raise WheelhouseError(
                    f"pip could not resolve {spec} for Python {python_version} even with a wheel of it built here"
                )
            log(f"  {spec}: no wheel for the target on the index, building a pure-Python one")
            try:
                build_pure_wheel(spec, house)
            except WheelhouseError as error:
                raise WheelhouseError(
                    f"pip could not resolve {' '.join(roots)} for Python {python_version}: "
                    f"{pip_error(output)} ({error})"
                ) from None
    raise WheelhouseError("pip's resolution did not settle after 20 rounds of building source-only requirements")


def build(
    out: Path,
    project: Path,
    extras: list[str],
    also: list[str],
    python_version: str,
    platforms: list[str],
    have: dict,
    slim: bool,
    log=print,
    leave_out: tuple[str, ...] = (),
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise WheelhouseError(f"{out} is not empty: give a new folder")
    log(f"building hfsweep's wheel from {project}")
    run_pip(["wheel", "--no-deps", "-q", "-w", str(out), str(project)], "building hfsweep's wheel")
    root = f"hfsweep[{','.join(extras)}]" if extras else "hfsweep"
    roots = [root, *also]
    tags = expand_platforms(platforms)
    log(
        f"resolving {' '.join(roots)} for Python {python_version} on {platforms[0]}; "
        f"the target has {len(have)} packages ({sum(1 for v in have.values() if v)} with versions)"
    )
    report = resolve(roots, python_version, tags, have, out, log)
    keep = needed(report, [Requirement(r) for r in roots], have, marker_environment(python_version, platforms))
    local = {canonical(w.name.split("-")[0]) for w in out.glob("*.whl")}
    download = sorted(
        f"{item['metadata']['name']}=={item['metadata']['version']}" for name, item in keep.items() if name not in local
    )
    for wheel in out.glob("*.whl"):  # pure wheels built on the way that turned out not to be needed
        if canonical(wheel.name.split("-")[0]) not in keep:
            wheel.unlink()
    if download:
        log(f"downloading {len(download)} wheels")
        platform_args = [arg for tag in tags for arg in ("--platform", tag)]
        run_pip(
            [
                "download",
                "--no-deps",
                "-q",
                "--only-binary=:all:",
                "--python-version",
                python_version,
                *platform_args,
                "-d",
                str(out),
                *download,
            ],
            "downloading the wheels",
        )
    if slim:
        for project_name, prefixes in SLIM.items():
            for wheel in out.glob("*.whl"):
                if canonical(wheel.name.split("-")[0]) == project_name:
                    saved = slim_wheel(wheel, prefixes)
                    log(f"--slim: {wheel.name} without {', '.join(prefixes)}: {saved / 2**20:.1f} MiB less")
    for wheel in out.glob("*.whl"):
        if canonical(wheel.name.split("-")[0]) in {canonical(n) for n in leave_out}:
            saved = stand_in(wheel)
            log(f"--leave-out: {wheel.name} is a metadata-only stand-in: {saved / 2**20:.1f} MiB less")
    return sorted(out.glob("*.whl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/wheelhouse.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", type=Path, help="the wheelhouse folder to create (new or empty)")
    parser.add_argument("--project", type=Path, default=ROOT, help="hfsweep's source tree (default: this one)")
    parser.add_argument(
        "--extra", action="append", default=[], help="an extra of hfsweep to include, e.g. gpu (repeatable)"
    )
    parser.add_argument(
        "--with",
        dest="also",
        action="append",
        default=[],
        metavar="REQ",
        help="another requirement to include, e.g. pytest (repeatable)",
    )
    parser.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="the target's Python, e.g. 3.12 (default: this one's)",
    )
    parser.add_argument(
        "--platform",
        action="append",
        default=None,
        help="the target's platform tag, e.g. manylinux_2_28_x86_64 (glibc 2.28), which also takes older glibcs' "
        "wheels "
        f"(default: this machine's, {this_platform()})",
    )
    parser.add_argument(
        "--have",
        action="append",
        type=Path,
        default=[],
        help="what the target already has: a `pip freeze` of it or a list of names (repeatable)",
    )
    parser.add_argument("--slim", action="store_true", help="leave Ray's Java jars out of its wheel")
    parser.add_argument(
        "--leave-out",
        action="append",
        default=[],
        metavar="NAME",
        help="a requirement hfsweep never runs (e.g. virtualenv, py-spy: Ray's runtime-env and "
        "profiling tools) shipped as a metadata-only stand-in wheel (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        if not re.fullmatch(r"3\.\d+", args.python_version):
            raise WheelhouseError(f"--python-version {args.python_version!r}: give MAJOR.MINOR, e.g. 3.12")
        pip_major = int(run_pip(["--version"], "pip --version").stdout.split()[1].split(".")[0])
        if args.python_version != f"{sys.version_info.major}.{sys.version_info.minor}" and pip_major < 24:
            raise WheelhouseError(
                f"pip {pip_major} checks a package's Requires-Python against this Python, not "
                f"--python-version {args.python_version} (pip 26 does not); run python -m pip install -U pip"
            )
        if not (args.project / "pyproject.toml").is_file():
            raise WheelhouseError(f"--project {args.project}: no pyproject.toml there; give hfsweep's source tree")
        have: dict[str, str | None] = {}
        for path in args.have:
            if not path.is_file():
                raise WheelhouseError(f"--have {path}: no such file")
            try:
                have.update(read_target(path.read_text().splitlines()))
            except WheelhouseError as error:
                raise WheelhouseError(f"--have {path}: {error}") from None
        wheels = build(
            args.out,
            args.project,
            args.extra,
            args.also,
            args.python_version,
            args.platform or [this_platform()],
            have,
            args.slim,
            leave_out=tuple(args.leave_out),
        )
    except WheelhouseError as error:
        print(f"wheelhouse: error: {error}", file=sys.stderr)
        return 2
    total = sum(w.stat().st_size for w in wheels)
    for wheel in sorted(wheels, key=lambda w: -w.stat().st_size):
        print(f"{wheel.stat().st_size / 2**20:8.2f} MiB  {wheel.name}")
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {args.out}")
    print(f"on the target: pip install --no-index --find-links {args.out} hfsweep")
    return 0


if __name__ == "__main__":
    sys.exit(main())
