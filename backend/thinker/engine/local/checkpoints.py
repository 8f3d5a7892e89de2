"""Checkpoint paths and atomic writes for the local engine.

`thinker://<run>/weights/<name>` is a training state (adapter + optimizer + step);
`thinker://<run>/sampler_weights/<name>` is a sampler checkpoint (adapter only, PEFT format).
Both resolve to `<storage_dir>/<run>/<kind>/<name>/`. A checkpoint directory is written
under a temporary name and renamed into place, so a crash never leaves a half-written one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from thinker.errors import CheckpointError

SCHEME = "thinker://"
STATE_FILE = "thinker_checkpoint.json"
CheckpointKind = Literal["weights", "sampler_weights"]
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class CheckpointPath:
    run_id: str
    kind: CheckpointKind
    name: str

    def __str__(self) -> str:
        return f"{SCHEME}{self.run_id}/{self.kind}/{self.name}"

    def directory(self, storage_dir: Path) -> Path:
        return storage_dir / self.run_id / self.kind / self.name


def check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise CheckpointError(
            f"invalid checkpoint name {name!r}: use letters, digits, '.', '_' and '-'"
        )


def parse(path: str) -> CheckpointPath:
    if not path.startswith(SCHEME):
        raise CheckpointError(f"not a thinker:// path: {path!r}")
    parts = path[len(SCHEME) :].split("/")
    if len(parts) != 3 or parts[1] not in ("weights", "sampler_weights"):
        raise CheckpointError(
            f"malformed checkpoint path {path!r}: expected "
            "thinker://<run>/weights/<name> or thinker://<run>/sampler_weights/<name>"
        )
    check_name(parts[0])
    check_name(parts[2])
    return CheckpointPath(parts[0], parts[1], parts[2])  # type: ignore[arg-type]


def resolve(path: str, storage_dir: Path) -> Path:
    """The directory of a checkpoint given as a thinker:// path or a plain local directory."""
    directory = parse(path).directory(storage_dir) if path.startswith(SCHEME) else Path(path)
    if not (directory / STATE_FILE).is_file():
        raise CheckpointError(f"no checkpoint at {path!r} (looked in {directory})")
    return directory


def read_meta(directory: Path) -> dict[str, Any]:
    return json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))


def write_atomically(
    target: Path, write: Callable[[Path], None], meta: dict[str, Any], overwrite: bool = False
) -> None:
    """Call `write(tmp_dir)`, add the metadata file, then rename tmp_dir to `target`."""
    if target.exists() and not overwrite:
        raise CheckpointError(f"checkpoint {target} already exists (pass overwrite=True)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        write(tmp)
        (tmp / STATE_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        _fsync_dir(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    for f in directory.iterdir():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
