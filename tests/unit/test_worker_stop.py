"""A stop signal is never lost: SIGTERM raises KeyboardInterrupt where the worker is, but
Python drops an exception raised inside a finalizer (`__del__`). That happened in CI: a
cancel arrived while the worker was still importing (a regex object's finalizer ran), the
interrupt was printed as "Exception ignored" and the job trained on for 26 minutes. The
signal also sets a flag, and the next step's metrics stop the job."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from thinker.jobs import worker


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop
def test_a_stop_swallowed_by_a_finalizer_stops_the_job_at_its_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "_STOP", type(worker._STOP)())  # this test's own flag
    logger = worker.JobLogger(tmp_path)
    logger.log_metrics({"loss": 2.0}, 1)  # no stop yet: the step is logged and goes on

    class Finalized:
        def __del__(self) -> None:
            worker._interrupt(signal.SIGTERM, None)  # as the signal handler runs

    Finalized()  # the KeyboardInterrupt is raised inside __del__ and dropped by Python
    with pytest.raises(KeyboardInterrupt):
        logger.log_metrics({"loss": 1.0}, 2)
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 2  # step 2 kept


def test_a_stop_during_the_event_loop_cancels_the_work_and_never_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM while the job's coroutine awaits work on another thread (as it awaits every
    engine call): the loop's own handler cancels the coroutine at that await, and the stop
    leaves as KeyboardInterrupt, with the flag set, at once."""
    monkeypatch.setattr(worker, "_STOP", type(worker._STOP)())
    before = signal.signal(signal.SIGTERM, worker._interrupt)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    release = threading.Event()
    cancelled = []

    async def job() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.wrap_future(pool.submit(release.wait, 30))  # an engine call
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            worker.run_stoppable(job())
        assert cancelled == [True] and worker._STOP.is_set()
        assert time.monotonic() - started < 10  # not the 30 s the call would take
        # Outside the loop the handler raises again, as before the loop ran.
        assert signal.getsignal(signal.SIGTERM) is worker._interrupt
    finally:
        release.set()
        pool.shutdown()
        signal.signal(signal.SIGTERM, before)
