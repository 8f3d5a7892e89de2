"""Faults for the batch tests (tests/integration/test_batch.py, tests/system/test_ray.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

from thinker.algorithms import batch
from thinker.algorithms.batch_config import BatchConfig
from thinker.algorithms.common import RunResult


def kill_busy_actors(run: Path, finished: threading.Event, killed: list[int]) -> None:
    """SIGKILL an actor seen holding a shard, until one of the kills cost a shard (a retry)."""
    while not finished.is_set():
        try:
            pool = json.loads((run / batch.POOL_RECORD).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            time.sleep(0.02)
            continue
        if pool["retries"] >= 1 or len(killed) >= 3:
            return
        busy = [a["pid"] for a in pool["actors"] if a["state"] == "busy" and a["pid"] not in killed]
        if busy:
            killed.append(busy[0])
            os.kill(busy[0], signal.SIGKILL)
            time.sleep(0.5)  # the pool sees the death and replaces the actor
        time.sleep(0.02)


def run_killing_an_actor(config: BatchConfig) -> tuple[RunResult, list[int]]:
    """`batch.main(config)` while actors holding shards are killed (kill_busy_actors); the
    run's result and the pids killed."""
    finished, killed = threading.Event(), []
    killer = threading.Thread(target=kill_busy_actors, args=(config.log_path, finished, killed))
    killer.start()
    try:
        return asyncio.run(batch.main(config)), killed
    finally:
        finished.set()
        killer.join()
