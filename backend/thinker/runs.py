"""The run directory: the durable record of one training run.

`runs/<run>/` holds `metrics.jsonl` (one line per logged step), `checkpoints.jsonl`
(append-only, one line per saved checkpoint) and whatever else a stage writes
(`config.yaml`, `metadata.json`, evaluation output). Algorithms never write these files
directly; they call a `MetricsLogger`, which the server can replace or extend.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from thinker.errors import StorageError

METRICS_FILE = "metrics.jsonl"
REWIND_KEY = "rewind_to"  # a metrics.jsonl row marking a resume: later attempts supersede
CHECKPOINTS_FILE = "checkpoints.jsonl"


class MetricsLogger(Protocol):
    """What an algorithm reports to: metrics per step and free-form events."""

    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...

    def log_event(self, kind: str, payload: dict[str, Any]) -> None: ...


class RunLogger:
    """Appends metrics to `metrics.jsonl` in the run directory, flushing every line."""

    def __init__(self, run_dir: Path, echo: bool = False, echo_every: int = 10) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.echo = echo
        self.echo_every = echo_every  # print every Nth step, and every step with eval metrics

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        append_jsonl(self.run_dir / METRICS_FILE, {"step": step, "time": time.time(), **metrics})
        if self.echo and (
            step % self.echo_every == 0 or any(k.startswith("eval") for k in metrics)
        ):
            shown = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
            print(f"[thinker] step {step}: {shown}", flush=True)

    def log_event(self, kind: str, payload: dict[str, Any]) -> None:
        if self.echo:
            print(f"[thinker] {kind}: {json.dumps(payload)}", flush=True)

    def rewind(self, step: int, stage: str | None = None) -> int:
        """Supersede the metrics rows of `stage` after `step`: a run resumed from the
        checkpoint at `step` trains those steps again, and its curve must not hold both
        attempts. The file stays append-only (a marker row is appended); `read_metrics`
        leaves the superseded rows out. Returns how many rows were superseded."""
        path = self.run_dir / METRICS_FILE
        superseded = sum(
            1 for r in read_metrics(path) if r.get("stage") == stage and r.get("step", 0) > step
        )
        if superseded:
            tag = {"stage": stage} if stage else {}
            append_jsonl(path, {REWIND_KEY: step, "time": time.time(), **tag})
        return superseded


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl as the run's curves stand: rows a resumed attempt trained
    again (after a `rewind_to` marker's step, for its stage) are left out, markers too."""
    rows: list[dict[str, Any]] = []
    for row in read_jsonl(path):
        _fold_metrics(rows, row)
    return rows


def _fold_metrics(rows: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Add one metrics.jsonl line to `rows` (a rewind marker drops the rows it supersedes)."""
    if REWIND_KEY in row:
        stage, step = row.get("stage"), row[REWIND_KEY]
        rows[:] = [r for r in rows if r.get("stage") != stage or r.get("step", 0) <= step]
    else:
        rows.append(row)


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


class MetricsTail:
    """`read_metrics` of a growing metrics.jsonl, parsing only the lines added since the last
    call: a server that shows a long run's curves does not re-read the whole file per request.

    The file is append-only; one that got shorter (replaced) or went is read again from the
    start.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._tail = JsonlTail(self.path)
        self._rows: list[dict[str, Any]] = []

    def rows(self) -> list[dict[str, Any]]:
        """The curves' rows as `read_metrics` gives them (safe to call from several threads)."""
        with self._lock:
            try:
                shrank = self.path.stat().st_size < self._tail.offset
            except FileNotFoundError:
                shrank = True
            if shrank:
                self._tail, self._rows = JsonlTail(self.path), []
            for row in self._tail.read_new():
                _fold_metrics(self._rows, row)
            return list(self._rows)


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync it: a crash never leaves a half-written line behind.

    NaN and infinities (a metric with nothing to average) become null: strict JSON.
    """
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


def _fmt(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# How libraries that do not raise OSError(ENOSPC) say the disk is full: safetensors (Rust's
# StorageFull), SQLite, PostgreSQL. torch's zip writer says only "unexpected pos": callers
# that write through it also check the free space (`nearly_full`).
_FULL_WORDS = ("no space left on device", "storagefull", "disk is full", "diskfullerror")
NEARLY_FULL_BYTES = 1 << 20


def is_disk_full(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says the disk (or quota) is full."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return any(
        (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
        or any(words in f"{type(e).__name__} {e}".lower() for words in _FULL_WORDS)
        for e in chain
    )


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
