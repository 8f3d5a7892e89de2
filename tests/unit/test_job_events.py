"""events.jsonl: gap-free numbering under concurrent writers, torn lines, incremental reads."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinker.jobs.events import EventLogBusy, EventTail, append_event, read_events
from thinker.jobs.procs import is_alive, start_time
from thinker.runs import RunDir


def _write_many(run_dir: str, writer: int) -> None:
    for i in range(100):
        append_event(Path(run_dir), "metrics", {"writer": writer, "i": i})


def test_concurrent_writers_number_every_event_once_without_gaps(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_many, args=(str(tmp_path), w)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join()
    events = read_events(tmp_path)
    assert [e["seq"] for e in events] == list(range(1, 401))
    for w in range(4):  # each writer's own events stay in its order
        assert [e["data"]["i"] for e in events if e["data"]["writer"] == w] == list(range(100))


def test_a_torn_last_line_is_skipped_and_its_number_reused(tmp_path: Path) -> None:
    append_event(tmp_path, "state", {"state": "queued"})
    with open(RunDir(tmp_path).events, "ab") as f:
        f.write(b'{"seq": 2, "time": 1, "type": "metr')  # a crash mid-write
    event = append_event(tmp_path, "state", {"state": "running"})
    assert event["seq"] == 2
    assert [(e["seq"], e["data"]["state"]) for e in read_events(tmp_path)] == [
        (1, "queued"),
        (2, "running"),
    ]


def test_tail_reads_only_complete_new_lines(tmp_path: Path) -> None:
    tail = EventTail(RunDir(tmp_path).events)
    assert tail.read_new() == []
    append_event(tmp_path, "log", {"line": "a"})
    with open(RunDir(tmp_path).events, "ab") as f:
        f.write(b'{"seq": 2, "time": 1.0, "type": "log", "data": {"line"')
    assert [e["seq"] for e in tail.read_new()] == [1]
    with open(RunDir(tmp_path).events, "ab") as f:
        f.write(b': "b"}}\n')
    assert [e["data"]["line"] for e in tail.read_new()] == ["b"]
    assert read_events(tmp_path, after=1) == read_events(tmp_path)[1:]
    assert read_events(tmp_path, after=0, upto=1)[0]["data"]["line"] == "a"


def test_a_bounded_append_gives_up_on_a_held_lock_and_writes_nothing(tmp_path: Path) -> None:
    append_event(tmp_path, "state", {"state": "queued"})
    with open(RunDir(tmp_path).events, "a+b") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)  # a worker stopped mid-write
        with pytest.raises(EventLogBusy, match="held its lock for 0.05 s"):
            append_event(tmp_path, "state", {"state": "cancelled"}, wait_s=0.05)
    assert [e["seq"] for e in read_events(tmp_path)] == [1]
    assert append_event(tmp_path, "state", {"state": "cancelled"}, wait_s=0.05)["seq"] == 2


def test_non_finite_numbers_become_null(tmp_path: Path) -> None:
    append_event(tmp_path, "metrics", {"metrics": {"loss": float("nan"), "ok": 1.5}})
    assert read_events(tmp_path)[0]["data"]["metrics"] == {"loss": None, "ok": 1.5}


def test_a_reused_pid_is_not_the_worker() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = start_time(child.pid)
        assert started is not None and is_alive(child.pid, started)
        assert not is_alive(child.pid, str(int(started) + 1))  # same pid, another process
    finally:
        child.kill()
        child.wait()
    assert not is_alive(child.pid, started)
    assert is_alive(os.getpid(), None)
