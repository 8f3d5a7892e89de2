"""A small disk to fill, for the tests of what a full disk does: a tmpfs mounted for the test.

Mounting needs root (CI and the development machines run as root); elsewhere the test is
skipped, saying why.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A RAM file system of `size` (e.g. "1m") at `directory`; unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
            check=True,
            capture_output=True,
        )
    except (PermissionError, FileNotFoundError) as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    except subprocess.CalledProcessError as e:
        stderr = e.stderr.lower()
        if b"permission" in stderr or b"only root" in stderr:
            pytest.skip(f"cannot mount a tmpfs here: {e.stderr.decode()}")
        raise
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)
