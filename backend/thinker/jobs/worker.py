"""The worker: one process per job, `python -m thinker.jobs.worker <run dir>`.

It reads `job.json` (written by the server when the job was created), runs the algorithm
with the run directory as its durable record, and reports through `events.jsonl`: `running`,
`plan`, `metrics`, `log`, `checkpoint`, ..., `report` (whether it learned, also written to
`report.json`), then one final `state` event (succeeded, failed with the reason, the log tail
and whether a resume may help, or cancelled / paused / interrupted when stopped). It
touches `heartbeat` every few seconds. SIGTERM stops it between steps: the server writes
`control.json` (`{"stop": "cancel" | "pause"}`) first, so the worker records why it stopped.
The signal raises KeyboardInterrupt where the worker is; Python drops an exception raised in a
finalizer (`__del__`, e.g. while a library is being imported), so the signal also sets a flag
that the next step's metrics act on: a stop is never lost.
Everything it needs is in the run directory, so a worker outlives a server that dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from pydantic import TypeAdapter

from thinker.algorithms.common import RunResult
from thinker.data import dataset_sha256
from thinker.errors import BackendError, CheckpointError, ConfigError, DatasetError, ThinkerError
from thinker.files import is_disk_full, storage_error, write_json_atomically
from thinker.jobs.events import append_event
from thinker.jobs.executor import PARENT_ENV
from thinker.jobs.states import JobState
from thinker.pipeline.config import JobConfig, JobSection, TrainingSection, WorkSection
from thinker.pipeline.metadata import (
    git_commit,
    package_versions,
    scrub,
    secret_values,
    section_fingerprint,
    utc_now,
)
from thinker.pipeline.report import build_report
from thinker.pipeline.stages import train_job
from thinker.runs import RunDir, RunLogger

# Room kept for the job's last words: on a disk that fills during training the final state
# event (and the traceback in the log) must still be written, or the job reads "interrupted".
RESERVE_BYTES = 128 * 1024
T = TypeVar("T")
HEARTBEAT_EVERY_S = 2.0
MAX_LOG_LINE = 2000


class JobLogger:
    """The algorithms' MetricsLogger: metrics.jsonl and a readable log line (as the CLI's
    RunLogger writes them), plus a numbered event for live clients."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.stage: str | None = None  # rlhf: the stage being trained
        self._run_log = RunLogger(run_dir, echo=True)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        tag = {"stage": self.stage} if self.stage else {}
        self._run_log.log_metrics({**tag, **metrics}, step)  # type: ignore[dict-item]
        append_event(self.run_dir, "metrics", {"step": step, **tag, "metrics": metrics})
        if _STOP.is_set():  # a stop whose KeyboardInterrupt was swallowed: stop here
            raise KeyboardInterrupt

    def rewind(self, step: int, stage: str | None = None) -> int:
        """Drop metrics of `stage` after `step` (a resumed attempt trains them again)."""
        return self._run_log.rewind(step, stage)

    def log_event(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "stage":
            self.stage = str(payload.get("name"))
        tag = {"stage": self.stage} if self.stage and "stage" not in payload else {}
        self._run_log.log_event(kind, payload)
        append_event(self.run_dir, kind, {**tag, **payload})


class _LogLines(io.TextIOBase):
    """A stdout/stderr that keeps writing to the log file and emits each line as an event."""

    def __init__(self, run_dir: Path, sink: Any, secrets: list[str]) -> None:
        self.run_dir, self.sink, self.secrets = run_dir, sink, secrets
        self._buffer = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = scrub(text, self.secrets)
        with self._lock:
            self.sink.write(text)
            self.sink.flush()
            self._buffer += text
            *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.strip():
                append_event(self.run_dir, "log", {"line": line[:MAX_LOG_LINE]})
        return len(text)

    def flush(self) -> None:
        self.sink.flush()


def _heartbeat(run_dir: Path, stop: threading.Event) -> None:
    path = RunDir(run_dir).heartbeat
    parent = os.environ.get(PARENT_ENV)
    while not stop.is_set():
        if parent is not None and os.getppid() != int(parent):
            _orphaned(run_dir)
        path.touch()
        stop.wait(HEARTBEAT_EVERY_S)


def _orphaned(run_dir: Path) -> None:
    """The Ray actor that started this worker is gone (its node lost its Ray processes): the
    server resumes the job elsewhere, so this attempt ends at once, with what it started."""
    with contextlib.suppress(OSError), open(RunDir(run_dir).log, "a") as log_file:
        log_file.write("[thinker] the Ray actor that started this worker is gone: stopping\n")
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _stop_requested(run_dir: Path) -> str | None:
    try:
        return json.loads(RunDir(run_dir).control.read_text()).get("stop")
    except (OSError, ValueError):
        return None


_STOP = threading.Event()  # SIGTERM arrived


def _interrupt(signum: int, frame: object) -> None:
    _STOP.set()
    raise KeyboardInterrupt


def run(run_dir: Path) -> int:
    """Run the job in `run_dir` to its end; the exit code says how it ended (0 = succeeded)."""
    spec = json.loads(RunDir(run_dir).job.read_text())
    secrets = secret_values()
    sys.stdout = _LogLines(run_dir, sys.__stdout__, secrets)
    sys.stderr = _LogLines(run_dir, sys.__stderr__, secrets)
    signal.signal(signal.SIGTERM, _interrupt)
    _lower_priority()
    _reserve_room(run_dir)
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(run_dir, stop), daemon=True).start()
    append_event(run_dir, "state", {"state": JobState.RUNNING, "pid": os.getpid()})
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={gpus})" if gpus else ""
    print(
        f"[thinker] job {spec['job_id']} ({spec['algorithm']}) running in {run_dir}{where}",
        flush=True,
    )
    try:
        section = _section(spec)
        result = _train(run_dir, spec, section)
        if not isinstance(section, WorkSection):  # batch or eval work trains no model to judge
            _report(run_dir, spec, section, result)
    except KeyboardInterrupt:
        _release_room(run_dir)
        stopped = {"cancel": JobState.CANCELLED, "pause": JobState.PAUSED}
        state = stopped.get(_stop_requested(run_dir) or "", JobState.INTERRUPTED)
        print(f"[thinker] stopped: {state}", flush=True)
        append_event(
            run_dir,
            "state",
            {
                "state": state,
                "reason": "stopped by request"
                if state != JobState.INTERRUPTED
                else "worker was terminated",
            },
        )
        return 130
    except BaseException as e:  # noqa: BLE001 - every failure is reported, then the exit code
        _release_room(run_dir)
        traceback.print_exc()
        reason = scrub(_describe(e, run_dir), secrets)
        failed = {
            "state": JobState.FAILED,
            "reason": reason,
            "log_tail": RunDir(run_dir).log_tail(),
        }
        append_event(run_dir, "state", {**failed, "retryable": retryable(e)})
        return 1
    finally:
        stop.set()
    succeeded = {
        "steps": result.steps,
        "final_metrics": result.final_metrics,
        "state_path": result.state_path,
        "sampler_path": result.sampler_path,
    }
    _release_room(run_dir)
    append_event(run_dir, "state", {"state": JobState.SUCCEEDED, **succeeded})
    return 0


def _reserve_room(run_dir: Path) -> None:
    with contextlib.suppress(OSError):  # a disk already full: nothing to keep back
        RunDir(run_dir).reserve.write_bytes(bytes(RESERVE_BYTES))


def _release_room(run_dir: Path) -> None:
    with contextlib.suppress(OSError):
        RunDir(run_dir).reserve.unlink()


def _section(spec: dict[str, Any]) -> JobSection:
    return TypeAdapter(JobConfig).validate_python(spec["section"])  # type: ignore[no-any-return]


def _train(run_dir: Path, spec: dict[str, Any], section: JobSection) -> RunResult:
    _write_metadata(run_dir, spec, section)
    logger = JobLogger(run_dir)
    return run_stoppable(train_job(section, RunDir(run_dir), logger))


def run_stoppable(work: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(work)`, with SIGTERM handled inside the event loop: it cancels the work
    at its next await, which leaves as KeyboardInterrupt (the worker's stop path). Raised by
    the signal handler itself, the KeyboardInterrupt could land inside one of the loop's own
    callbacks, between a future's completion and the wake-up of the task awaiting it; the
    loop's shutdown then cancels that task, which never wakes, and the worker hung for good
    with its heartbeat still beating (seen in CI: a cancel that never ended a job)."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, _cancel_on_stop, task)
        try:
            return await work
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _interrupt)  # raising again outside the loop

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if not _STOP.is_set():
            raise
        raise KeyboardInterrupt from None


def _cancel_on_stop(task: asyncio.Task[Any]) -> None:
    _STOP.set()
    task.cancel()


def _report(
    run_dir: Path, spec: dict[str, Any], section: TrainingSection, result: RunResult
) -> None:
    """Judge the trained model on held-out data: report.json, then a `report` event. Building
    it never raises (a failure is a report with verdict "unknown")."""
    start = (spec.get("start") or {}).get("sampler_path")  # a job continuing a library model
    print("[thinker] report: answering held-out prompts with the trained and base models")
    report = run_stoppable(build_report(section, run_dir, result, start))
    write_json_atomically(RunDir(run_dir).report, report)
    append_event(run_dir, "report", report)
    print(f"[thinker] report: {report['verdict']}", flush=True)


def retryable(e: BaseException) -> bool:
    """Whether resuming a job that failed with `e` may help: not after an error the same
    settings repeat (config, dataset, checkpoint, backend) nor after running out of memory;
    yes after anything else (a crash or a lost resource may pass)."""
    lasting = (ConfigError, DatasetError, CheckpointError, BackendError, MemoryError)
    torch = sys.modules.get("torch")  # loaded by training; never imported just for this
    if torch is not None:
        lasting += (torch.OutOfMemoryError,)
    return not isinstance(e, lasting)


def _write_metadata(run_dir: Path, spec: dict[str, Any], section: Any) -> None:
    """metadata.json: what produced this run (code, data, settings, versions). What an earlier
    attempt recorded is kept: an rlhf job's finished stages are skipped on a resume."""
    path = RunDir(run_dir).metadata
    previous = json.loads(path.read_text()) if path.is_file() else {}
    datasets = {
        k: {"id": v["id"], "sha256": dataset_sha256(Path(v["path"]))}
        for k, v in spec.get("datasets", {}).items()
    }
    write_json_atomically(
        path,
        {
            **previous,
            "job_id": spec["job_id"],
            "name": spec["name"],
            "algorithm": spec["algorithm"],
            "created_at": previous.get("created_at", utc_now()),
            "started_at": [*previous.get("started_at", []), utc_now()],
            "git_commit": git_commit(Path(__file__).parent),
            "config_fingerprint": section_fingerprint(section),
            "datasets": datasets,
            "packages": package_versions(),
        },
    )


def _describe(e: BaseException, run_dir: Path) -> str:
    if isinstance(e, ThinkerError):
        return str(e)
    if is_disk_full(e):  # "no space left on device while training (12 KiB free on ...)"
        return str(storage_error(e, "training", run_dir))
    return f"{type(e).__name__}: {e}"


AUTOGROUP = Path("/proc/self/autogroup")


def _lower_priority() -> None:
    """Run `THINKER_WORKER_NICE` nicer than the server that started us (set by the manager):
    on a shared CPU the server's answers and live events come before training steps.

    Where the kernel groups processes by session for scheduling (autogroup, on by default in
    most Linux distributions), a process's nice value only ranks it within its session, and
    the worker has a session of its own: its group's nice is lowered too, or the worker would
    still take an equal share against the server's session.
    """
    nice = int(os.environ.get("THINKER_WORKER_NICE") or 0)
    if nice <= 0:
        return
    os.nice(nice)
    grouped = ""
    if os.getsid(0) == os.getpid() and AUTOGROUP.exists():  # our own session's group only
        try:
            AUTOGROUP.write_text(str(nice))
            grouped = " and its scheduling group"
        except OSError:
            pass  # not allowed here: the process's own nice still holds within the group
    print(f"[thinker] worker CPU priority: nice +{nice}{grouped} (THINKER_WORKER_NICE)")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m thinker.jobs.worker <run dir>", file=sys.stderr)
        return 2
    with _process_group():
        return run(Path(args[0]).resolve())


@contextlib.contextmanager
def _process_group() -> Iterator[None]:
    """Under torchrun (a job of `gpus` > 1): join the job's ranks, NCCL over one GPU each (its
    LOCAL_RANK) or gloo on the CPU, so that the engine trains data-parallel
    (engine/local/data_parallel.py); rank 0 alone writes the run's records."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        yield
        return
    if torch.cuda.is_available():
        gpu = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(gpu)
        dist.init_process_group("nccl", device_id=gpu)  # this rank's GPU, told, not guessed
    else:
        dist.init_process_group("gloo")
    print(f"[thinker] rank {dist.get_rank()} of {world} joined", flush=True)
    try:
        yield
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
