"""Checkpoint paths and atomic writes for the local engine.

`tinker://<run>/weights/<name>` is a training state (adapter + optimizer + step);
`tinker://<run>/sampler_weights/<name>` is a sampler checkpoint (adapter only, PEFT format):
the form Tinker gives its checkpoints, which the tinker SDK's own parser
(`ParsedCheckpointTinkerPath`) reads. Paths of the older `thinker://` form resolve the same.
Both resolve to `<storage_dir>/<run>/<kind>/<name>/`. A checkpoint directory is written
under a temporary name and renamed into place, so a crash never leaves a half-written one.
Its `SHA256SUMS` (the format `sha256sum -c` reads) holds the checksum of every other file;
`verify` checks them before a checkpoint is loaded or served, so that bytes changed on disk
are refused by name rather than loaded as weights.

A checkpoint saved with a TTL (`ttl_seconds`, as on Tinker) expires: once its time has come,
it is deleted when it is next resolved (loaded, sampled, copied) or listed, and the path is
refused with the time it expired. The expiry lives in its own file beside the checksums
(EXPIRY_FILE), since a TTL may be changed after saving (`set_ttl`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from thinker.errors import CheckpointError, ConflictError, DamagedError
from thinker.files import is_disk_full, nearly_full, no_space_left

SCHEME = "tinker://"  # what new checkpoints are called
SCHEMES = (SCHEME, "thinker://")  # what resolves: the older form too
STATE_FILE = "thinker_checkpoint.json"
MANIFEST_FILE = "SHA256SUMS"
EXPIRY_FILE = "expires_at.json"  # outside the checksums: a TTL may change after saving
PUBLIC_FILE = "public"  # present: the checkpoint is published (likewise outside the checksums)
clock = time.time  # the time checkpoints expire by (a test moves it)
log = logging.getLogger("thinker.engine")
CheckpointKind = Literal["weights", "sampler_weights", "external_weights"]
_KINDS: dict[str, CheckpointKind] = {
    "weights": "weights",
    "sampler_weights": "sampler_weights",
    "external_weights": "external_weights",  # a whole model, Hugging Face format
}
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


def is_path(path: str) -> bool:
    """Whether `path` names a checkpoint by run (tinker://, or the older thinker://)."""
    return path.startswith(SCHEMES)


def parse(path: str) -> CheckpointPath:
    scheme = next((s for s in SCHEMES if path.startswith(s)), None)
    if scheme is None:
        raise CheckpointError(f"not a tinker:// path: {path!r}")
    parts = path[len(scheme) :].split("/")
    kind = _KINDS.get(parts[1]) if len(parts) == 3 else None
    if kind is None:
        raise CheckpointError(
            f"malformed checkpoint path {path!r}: expected tinker://<run>/weights/<name>, "
            "tinker://<run>/sampler_weights/<name> or tinker://<run>/external_weights/<name>"
        )
    check_name(parts[0])
    check_name(parts[2])
    return CheckpointPath(parts[0], kind, parts[2])


def resolve(path: str, storage_dir: Path) -> Path:
    """The directory of a checkpoint given as a tinker:// path or a plain local directory.

    Raises:
        CheckpointError: There is none, or it has expired (it is deleted then).
    """
    directory = parse(path).directory(storage_dir) if is_path(path) else Path(path)
    if not (directory / STATE_FILE).is_file():
        raise CheckpointError(f"no checkpoint at {path!r} (looked in {directory})")
    if expire_if_due(directory):
        raise CheckpointError(
            f"checkpoint {path!r} has expired: its TTL ran out and it was deleted"
        )
    return directory


def check_ttl(ttl_seconds: int | None) -> None:
    if ttl_seconds is not None and (isinstance(ttl_seconds, bool) or ttl_seconds < 1):
        raise CheckpointError(f"ttl_seconds={ttl_seconds!r}: a TTL is a number of seconds >= 1")


def set_ttl(directory: Path, ttl_seconds: int | None) -> None:
    """Expire the checkpoint in `directory` `ttl_seconds` from now; None: never."""
    check_ttl(ttl_seconds)
    target = directory / EXPIRY_FILE
    if ttl_seconds is None:
        target.unlink(missing_ok=True)
        return
    tmp = directory / f".{EXPIRY_FILE}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps({"expires_at": clock() + ttl_seconds}), encoding="utf-8")
    os.replace(tmp, target)


def set_public(directory: Path, public: bool) -> None:
    """Publish (`public`) or unpublish the checkpoint in `directory`, as the SDK's RestClient
    does; ConflictError when it already is, as on Tinker (409)."""
    target = directory / PUBLIC_FILE
    if target.exists() == public:
        state = "public" if public else "not public"
        raise ConflictError(f"checkpoint {directory.name} is already {state}")
    if public:
        target.write_bytes(b"")
    else:
        target.unlink()


def is_public(directory: Path) -> bool:
    return (directory / PUBLIC_FILE).exists()


def expires_at(directory: Path) -> datetime | None:
    """When the checkpoint in `directory` expires; None: never."""
    try:
        value = json.loads((directory / EXPIRY_FILE).read_text(encoding="utf-8"))["expires_at"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise DamagedError(f"checkpoint {directory}: {EXPIRY_FILE} is damaged") from e
    return datetime.fromtimestamp(float(value), UTC)


def expire_if_due(directory: Path) -> bool:
    """Delete the checkpoint in `directory` if its TTL has run out; whether it did."""
    due = expires_at(directory)
    if due is None or due.timestamp() > clock():
        return False
    shutil.rmtree(directory, ignore_errors=True)
    log.info("checkpoint %s expired at %s: deleted", directory, due.isoformat())
    return True


def read_meta(directory: Path) -> dict[str, Any]:
    """The checkpoint's metadata file.

    Raises:
        DamagedError: It is not a JSON object.
    """
    try:
        meta = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        meta = None
    if not isinstance(meta, dict):
        raise DamagedError(f"checkpoint {directory}: {STATE_FILE} is damaged (not JSON)")
    return meta


def write_atomically(
    target: Path,
    write: Callable[[Path], None],
    meta: dict[str, Any],
    overwrite: bool = False,
    ttl_seconds: int | None = None,
) -> None:
    """Call `write(tmp_dir)`, add the metadata file and the checksums (and the expiry, with a
    TTL), then rename tmp_dir to `target`.

    Raises:
        StorageError: The disk filled up: "no space left on device while saving the checkpoint
            at step N (X free on <dir>)"; nothing of the checkpoint is left.
    """
    check_ttl(ttl_seconds)
    if target.exists() and not overwrite and not expire_if_due(target):
        raise CheckpointError(f"checkpoint {target} already exists (pass overwrite=True)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        write(tmp)
        meta = {**meta, "checksums": MANIFEST_FILE}  # a checkpoint that lost it is damaged
        (tmp / STATE_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        _write_manifest(tmp)
        set_ttl(tmp, ttl_seconds)
        _fsync_dir(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.rename(tmp, target)
        _fsync_dir(target.parent)
    except Exception as e:
        # torch's writer reports a full disk as "unexpected pos N vs M": the free space tells.
        if not (is_disk_full(e) or nearly_full(target.parent)):
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # first, so that the free space said is true
        doing = f"saving the checkpoint at step {meta.get('step', '?')}"
        raise no_space_left(doing, target.parent) from e
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def verify(directory: Path) -> None:
    """Check every file of the checkpoint in `directory` against its SHA256SUMS.

    A checkpoint saved before checksums were written has none: it passes unverified, and the
    log says so.

    Raises:
        DamagedError: A file is missing, or its bytes changed since it was saved (named).
    """
    manifest = directory / MANIFEST_FILE
    if not manifest.is_file():
        if "checksums" in read_meta(directory):
            raise DamagedError(f"checkpoint {directory}: its {MANIFEST_FILE} is missing")
        log.info(
            "checkpoint %s has no %s (saved before checksums): not verified",
            directory,
            MANIFEST_FILE,
        )
        return
    for digest, name in _read_manifest(manifest):
        path = directory / name
        if not path.is_file():
            raise DamagedError(f"checkpoint {directory}: {name} is missing")
        if _sha256(path) != digest:
            raise DamagedError(
                f"checkpoint {directory}: {name} does not match its checksum (its bytes changed "
                "after it was saved: a damaged disk, or a file edited or overwritten); resume "
                "or sample from another checkpoint"
            )


def _write_manifest(directory: Path) -> None:
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    lines = [f"{_sha256(p)}  {p.relative_to(directory).as_posix()}\n" for p in files]
    (directory / MANIFEST_FILE).write_text("".join(lines), encoding="utf-8")


def _read_manifest(manifest: Path) -> list[tuple[str, str]]:
    entries = []
    for line in manifest.read_text(encoding="utf-8", errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        if not re.fullmatch(r"[0-9a-f]{64}", digest) or not name or ".." in Path(name).parts:
            raise DamagedError(f"checkpoint {manifest.parent}: its {MANIFEST_FILE} is damaged")
        entries.append((digest, name))
    return entries


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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
