"""Files that survive a crash: JSONL records appended and fsynced, JSON written atomically,
and what a full disk looks like whichever library hit it."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from thinker.errors import StorageError


def records_here() -> bool:
    """Whether this process writes a run's records. Every rank of a data-parallel worker
    (torchrun's RANK) runs the algorithm alike; rank 0 alone writes its files, the others
    compute and record nothing (engine/local/data_parallel.py)."""
    return os.environ.get("RANK", "0") == "0"


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync it: a crash never leaves a half-written line behind.
    A no-op on a rank other than 0 (`records_here`).

    NaN and infinities (a metric with nothing to average) become null: strict JSON.
    """
    if not records_here():
        return
    clean = {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()
    }
    line = json.dumps(clean, sort_keys=False, allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read every complete line of a JSONL file; a torn last line (crash mid-write) is ignored."""
    if not Path(path).exists():
        return []
    records = []
    for line in Path(path).read_bytes().splitlines():
        record = _parse_line(line)
        if record is not None:
            records.append(record)
    return records


def _parse_line(line: bytes) -> dict[str, Any] | None:
    """One JSONL line as a dict; None when it is not one (a line torn by a crash). orjson is
    several times faster than json; json still reads what orjson refuses (NaN, huge ints)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    return value if isinstance(value, dict) else None


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write JSON to a temporary file beside `path`, fsync it, then `os.replace` it in; on a
    failure (a full disk) the temporary file is removed and `path` is left as it was. A no-op
    on a rank other than 0 (`records_here`)."""
    _write_atomically(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def write_jsonl_atomically(path: Path, records: list[dict[str, Any]]) -> None:
    """`records` as the JSON lines of `path`, written whole or not at all (as
    `write_json_atomically`)."""
    _write_atomically(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in records))


def _write_atomically(path: Path, text: str) -> None:
    if not records_here():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass
class JsonlTail:
    """Reads the JSON objects appended to a JSONL file since the last call; a line still being
    written waits for its end, and a line that is not an object (torn by a crash) is skipped."""

    path: Path
    offset: int = 0
    _partial: bytes = field(default=b"", repr=False)

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [row for row in map(_parse_line, lines) if row is not None]


# How libraries that do not raise OSError(ENOSPC) say the disk is full: safetensors (Rust's
# StorageFull), SQLite, PostgreSQL. torch's zip writer says only "unexpected pos": callers
# that write through it also check the free space (`nearly_full`).
DISK_FULL = "no space left on device"
_FULL_WORDS = (DISK_FULL, "storagefull", "disk is full", "diskfullerror")
NEARLY_FULL_BYTES = 1 << 20


def is_disk_full(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says the disk (or quota) is full: an
    OSError (ENOSPC, EDQUOT), a library's own words for it, or a database driver's (SQLite's
    "database or disk is full", PostgreSQL's disk_full, wrapped by SQLAlchemy as `orig`)."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return any(
        (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
        or any(words in f"{type(e).__name__} {e}".lower() for words in _FULL_WORDS)
        or getattr(getattr(e, "orig", None), "sqlstate", None) == "53100"  # asyncpg: disk_full
        for e in chain
    )


@contextmanager
def storage_guard(what: str) -> Iterator[None]:
    """Within the block, a full disk raises `StorageError` ("no space left on device: `what`
    was not stored"); the block itself removes what it wrote."""
    try:
        yield
    except Exception as e:
        if isinstance(e, StorageError) or not is_disk_full(e):
            raise
        raise StorageError(f"{DISK_FULL}: {what} was not stored; free disk space") from e


def nearly_full(directory: Path) -> bool:
    """Less than 1 MiB free on `directory`'s file system (a write there just ran out)."""
    try:
        return shutil.disk_usage(_existing(directory)).free < NEARLY_FULL_BYTES
    except OSError:
        return False


def storage_error(error: BaseException, doing: str, directory: Path) -> StorageError:
    """The StorageError of a write that failed while `doing` in `directory`: "no space left
    on device while <doing> (<free> free on <directory>)", or what else stopped it."""
    if is_disk_full(error) or nearly_full(directory):
        return no_space_left(doing, directory)
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return StorageError(f"could not write to {directory} while {doing}: {reason}")


def no_space_left(doing: str, directory: Path) -> StorageError:
    return StorageError(
        f"no space left on device while {doing} ({_free(directory)} free on {directory})"
    )


def _free(directory: Path) -> str:
    try:
        size, unit = float(shutil.disk_usage(_existing(directory)).free), "bytes"
    except OSError:
        return "unknown space"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"


def _existing(directory: Path) -> Path:
    """`directory`, or its nearest ancestor that exists (the one a failed mkdir left)."""
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return directory
