"""provenance.json: what it takes to reproduce a run (code version, packages, hardware, seeds)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from hfsweep.config.schema import SweepConfig
from hfsweep.run_dir import PROVENANCE_FILE

PROVENANCE_PACKAGES = (
    "torch",
    "transformers",
    "ray",
    "hydra-core",
    "omegaconf",
    "datasets",
    "accelerate",
    "tokenizers",
    "numpy",
)


def _git(*args: str) -> str:
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def code_version() -> dict:
    """The hfsweep commit that ran, and whether uncommitted changes were in the tree."""
    try:
        diff = _git("diff", "HEAD")
        return {
            "commit": _git("rev-parse", "HEAD").strip(),
            "dirty": bool(diff or _git("status", "--porcelain").strip()),
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        }
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "diff_sha256": None}  # installed without its git tree


def hardware() -> dict:
    import torch

    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
        cpu = names[0] if names else cpu
    gpus = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "gpus": gpus,
        "gpu_count": len(gpus),
        "platform": platform.platform(),
    }


def write_provenance(run_dir: str, sweep: SweepConfig) -> None:
    """provenance.json: what it takes to reproduce this run (code, packages, hardware, seeds)."""
    manifest = {
        "command": sys.argv,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "code": code_version(),
        "python": sys.version.split()[0],
        "packages": {name: _version(name) for name in PROVENANCE_PACKAGES},
        "hardware": hardware(),
        "seeds": {
            "seed": sweep.seed,
            "search_alg": sweep.search_alg.get("seed", sweep.search_alg.get("random_state")),
        },
    }
    with open(os.path.join(run_dir, PROVENANCE_FILE), "w") as f:
        json.dump(manifest, f, indent=2)


def _version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
