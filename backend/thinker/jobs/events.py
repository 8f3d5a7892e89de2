"""`events.jsonl`: a job's numbered event log, the source of every live update.

Each line is `{"seq": n, "time": t, "type": ..., "data": {...}}` with `seq` = 1, 2, 3, ...
without gaps. The server (queued, starting, cancelled, interrupted) and the worker (running,
metrics, logs, checkpoints, the final state) both append to it, so an append takes an
exclusive `flock` on the file, reads the last complete line's number and writes the next one.
A line torn by a crash is skipped by readers and its number reused, so numbering stays
gap-free. Clients that reconnect are sent the lines after the last number they saw.

The server never waits on the lock for long (`wait_s`): a worker holds it for one write, but a
worker stopped (SIGSTOP, a debugger) or hung in the middle of one holds it until it dies, and
a server that waited would stop answering every request (the job manager appends in its
event loop).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Protocol

from thinker.files import JsonlTail, records_here
from thinker.runs import RunDir


class EventSink(Protocol):
    """Where the job manager sends the events it reads from run directories (the server's
    Socket.IO hub implements it). Under `lock(job_id)` the manager reads a job's new events,
    applies them to its row and then publishes them, so that a client joining in the middle
    (whose replay takes the same lock) misses none and sees none twice."""

    def lock(self, job_id: str) -> asyncio.Lock:
        """The job's lock (the same object on every call)."""
        ...

    def mark_published(self, job_id: str, seq: int) -> None:
        """Every event up to `seq` is published (none was new)."""
        ...

    async def publish(
        self, job_id: str, events: list[dict[str, Any]], snapshot: dict[str, Any]
    ) -> None:
        """Send `events` (new, in order) and the job's row as it now stands."""
        ...


class EventLogBusy(OSError):
    """Another process held the event log's lock for longer than the caller would wait."""


def append_event(
    run_dir: Path, kind: str, data: dict[str, Any], wait_s: float | None = None
) -> dict[str, Any]:
    """Append one event with the next sequence number; returns it as written. A rank other
    than 0 of a data-parallel worker records nothing (`files.records_here`).

    Raises:
        EventLogBusy: `wait_s` passed and the lock is still held; nothing was written.
    """
    if not records_here():
        return {"seq": 0, "time": time.time(), "type": kind, "data": data}
    path = RunDir(run_dir).events
    with open(path, "a+b") as f:
        _lock(f, path, wait_s)
        try:
            last, ends_cleanly = _last_seq(f)
            event = {"seq": last + 1, "time": time.time(), "type": kind, "data": _finite(data)}
            line = json.dumps(event, allow_nan=False).encode() + b"\n"
            f.write(line if ends_cleanly else b"\n" + line)
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return event


def _lock(f: Any, path: Path, wait_s: float | None) -> None:
    """The exclusive lock on the log: waited for without end, or `wait_s` at most."""
    if wait_s is None:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise EventLogBusy(
                    f"{path}: another process has held its lock for {wait_s:g} s (a worker "
                    "stopped or hung while writing an event)"
                ) from None
            time.sleep(0.005)


def _last_seq(f: Any) -> tuple[int, bool]:
    """The last complete line's seq (0 if none), and whether the file ends with a newline."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return 0, True
    block, tail = 4096, b""
    while True:
        start = max(0, size - len(tail) - block)
        f.seek(start)
        tail = f.read(size - start)
        lines = tail.split(b"\n")
        # lines[-1] is what follows the last newline: b"" when the file ends cleanly.
        for raw in reversed(lines[1:-1] if start > 0 else lines[:-1]):
            seq = _seq_of(raw)
            if seq is not None:
                return seq, tail.endswith(b"\n")
        if start == 0:
            return 0, tail.endswith(b"\n")


def _seq_of(raw: bytes) -> int | None:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value.get("seq") if isinstance(value, dict) else None


def _finite(value: Any) -> Any:
    """NaN and infinities become null (strict JSON), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class EventTail(JsonlTail):
    """Reads the events appended since the last call (the server keeps one per job)."""

    def read_new(self) -> list[dict[str, Any]]:
        """Complete events written since the last call; a line still being written waits, and
        a line torn by a crash (its number reused by the next append) is skipped."""
        return [e for e in super().read_new() if isinstance(e.get("seq"), int)]


def read_events(run_dir: Path, after: int = 0, upto: int | None = None) -> list[dict[str, Any]]:
    """The events with `after < seq <= upto` (all after `after` when `upto` is None)."""
    events = EventTail(RunDir(run_dir).events).read_new()
    return [e for e in events if e["seq"] > after and (upto is None or e["seq"] <= upto)]
