"""The content-addressed cache under `cache_dir`: a folder is written whole or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile


def atomic_dir(final: str, write) -> str:
    """Run write(tmp_dir) unless `final` exists, then move it to `final` in one rename, so a crash
    never leaves half a cache entry (and a failed write leaves nothing)."""
    if os.path.isdir(final):
        return final
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(final))
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, final)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return final
