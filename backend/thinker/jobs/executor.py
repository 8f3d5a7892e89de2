"""Executors: where a job's worker runs. The scheduler (`JobManager`) decides when a job starts
and on which device; an executor starts its worker there, tells whether it still runs, and
stops it. The worker is always `python -m thinker.jobs.worker <run dir>` and reports only
through its run directory, so the manager follows every executor's workers the same way.

`LocalExecutor` runs each worker as a subprocess of the server, in a session of its own: a
server that dies leaves it running, and the next server finds it again by its pid and the
pid's start time (a reused pid is not mistaken for it). CPU and Tinker jobs' workers are
forked from a warm starter that has done a worker's imports already (jobs/forkserver.py),
unless `warm` is off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from thinker.files import write_json_atomically
from thinker.jobs.forkserver import WarmStarter
from thinker.jobs.procs import is_alive, start_time
from thinker.runs import RunDir

log = logging.getLogger(__name__)

# What a worker gets of the server's environment: all but credentials, named as such or a
# URL with a password in it, and the database's address (a worker reads and writes only its
# run directory). What a job needs is kept: the Hugging Face token and the proxies, to
# download a gated base model or tokenizer; the Tinker key is added for a Tinker job.
_CREDENTIAL = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)|DATABASE|^PG", re.I
)
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s:]*:[^/@\s]*@")
_WORKER_NEEDS = {
    name
    for base in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    for name in (base, base.lower())
}


@dataclass(frozen=True)
class Launch:
    """What an executor needs to start one job's worker."""

    job_id: str
    run_dir: Path
    resource: str  # "gpu", "cpu" or "remote" (a Tinker job: no local device)
    device: str | None  # "cuda:N" for a GPU job ("cuda:0,1" for one of two processes)
    env: Mapping[str, str]  # set for the worker on top of what it inherits (a Tinker key)
    processes: int = 1  # data-parallel ranks (torchrun), one GPU each on a GPU job
    memory_bytes: int | None = None  # host memory to reserve (Ray's `memory`; not locally)


@dataclass(frozen=True)
class WorkerRef:
    """How a job's row finds its worker again, also after a server restart."""

    job_id: str
    pid: int | None
    pid_start: str | None  # the pid's start time (`procs.start_time`)


class Executor(Protocol):
    """Starts workers and follows them; every method returns at once (nothing waits on a
    worker except `shutdown`)."""

    def gpus(self) -> int:
        """The GPUs this executor's workers can have, one job each."""
        ...

    def launch(self, launch: Launch) -> WorkerRef:
        """Start the worker; raises OSError when it cannot be started."""
        ...

    def poll(self, worker: WorkerRef) -> tuple[bool, int | None]:
        """Whether the worker still runs, and its exit code when it is known to have ended."""
        ...

    def terminate(self, worker: WorkerRef) -> None:
        """Ask the worker to stop between steps (it records why from control.json)."""
        ...

    def kill(self, worker: WorkerRef) -> None:
        """Stop a worker that no longer listens (hung, or stopped), with what it started."""
        ...

    def reap(self, active: Iterable[str]) -> None:
        """Forget the ended workers of jobs not in `active` (their jobs have ended)."""
        ...

    def shutdown(self, timeout_s: float) -> None:
        """Stop every worker this executor started and wait up to `timeout_s` for each."""
        ...


# Set for a worker that must end when the process that started it goes (a Ray actor): that
# process's pid (jobs/worker.py checks it with each heartbeat).
PARENT_ENV = "THINKER_WORKER_PARENT"


class LocalExecutor:
    """Workers as subprocesses of this server, each in its own session (see the module)."""

    def __init__(self, worker_nice: int, cpu_jobs: int, warm: bool = True) -> None:
        self.worker_nice = worker_nice
        self.cpu_jobs = cpu_jobs
        self.warm = warm
        self._children: dict[str, subprocess.Popen[bytes] | Forked] = {}

    def gpus(self) -> int:
        """This machine's CUDA devices."""
        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    def launch(self, launch: Launch) -> WorkerRef:
        """May wait for the warm starter's imports (the first CPU or Tinker job): call it
        off the event loop."""
        base = worker_environment(os.environ)
        env = {**base, "PYTHONUNBUFFERED": "1", "THINKER_WORKER_NICE": str(self.worker_nice)}
        gpus = launch.device.split(":")[1].split(",") if launch.device is not None else []
        if launch.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        elif launch.resource == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
            # CPU workers share the cores: the engine divides them (engine/local/threads.py),
            # a data-parallel job's processes each counting as one
            jobs = max(1, self.cpu_jobs) * launch.processes
            env.setdefault("THINKER_CPU_JOBS", str(jobs))
        env.update(launch.env)
        run = RunDir(launch.run_dir)
        where = {"executor": "local", "hostname": socket.gethostname(), "gpus": gpus}
        write_json_atomically(run.placement, {**where, "processes": launch.processes})
        # GPU jobs start afresh: the warm starter never touches CUDA, and a process that
        # has not initialised it cannot hand a forked child a working one.
        forked = None
        if self.warm and launch.device is None and launch.processes == 1:
            forked = fork_worker(run, env, base)
        child = forked or start_worker(run, env, launch.processes)
        self._children[launch.job_id] = child
        return WorkerRef(launch.job_id, child.pid, start_time(child.pid))

    def poll(self, worker: WorkerRef) -> tuple[bool, int | None]:
        child = self._children.get(worker.job_id)
        if child is not None:
            code = child.poll()
            if code is None:
                return True, None
            del self._children[worker.job_id]
            return False, None if code is Forked.UNKNOWN else code
        if worker.pid is None:
            return False, None
        return is_alive(worker.pid, worker.pid_start), None

    def terminate(self, worker: WorkerRef) -> None:
        child = self._children.get(worker.job_id)
        pid = child.pid if child is not None else worker.pid
        if pid is not None and (child is not None or is_alive(pid, worker.pid_start)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)  # `reap` collects it

    def kill(self, worker: WorkerRef) -> None:
        child = self._children.pop(worker.job_id, None)
        pid = worker.pid if worker.pid is not None else child.pid if child is not None else None
        if pid is not None:
            # SIGKILL, since a stopped process does not act on SIGTERM; to its process group
            # (its own session) so that what it started goes too.
            with contextlib.suppress(ProcessLookupError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
        if child is not None:
            child.wait()

    def reap(self, active: Iterable[str]) -> None:
        running = set(active)
        for job_id, child in list(self._children.items()):
            if job_id not in running and child.poll() is not None:
                del self._children[job_id]

    def shutdown(self, timeout_s: float) -> None:
        for child in self._children.values():
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        for child in self._children.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=timeout_s)


@dataclass(frozen=True)
class Forked:
    """A worker forked by the warm starter: not this process's child, so followed by pid
    (and its start time), its exit code asked of the starter. Answers as a Popen does."""

    pid: int
    started: str | None
    starter: WarmStarter
    UNKNOWN = -(2**31)  # `poll`'s code for a worker that ended with no code known

    def poll(self) -> int | None:
        if is_alive(self.pid, self.started):
            return None
        ended, code = self.starter.exit_status(self.pid)
        if not ended:
            return None
        return self.UNKNOWN if code is None else code

    def terminate(self) -> None:
        os.kill(self.pid, signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> None:
        """Until it has ended and the starter has reaped it (its pid is free)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            time.sleep(0.05)


# One warm starter per server process (the apps of a test process share it), for the
# environment it was started in; a changed environment gets a new one.
_warm: WarmStarter | None = None
_warm_lock = threading.Lock()


def fork_worker(run: RunDir, env: Mapping[str, str], base: Mapping[str, str]) -> Forked | None:
    """The worker of `run`, forked by the warm starter of environment `base` (started, and
    its imports waited for, if there is none yet); None when it cannot (it says why once)."""
    global _warm
    with _warm_lock:
        # Replaced when the environment changed or it died after serving; one that could
        # not start (an import failed) is kept, so that it is not tried for every job.
        if _warm is not None and (
            _warm.env != _starter_env(base) or (_warm.broken and _warm.served)
        ):
            _warm.close()
            _warm = None
        if _warm is None:
            _warm = WarmStarter(_starter_env(base))
        starter = _warm
    if not starter.ready():
        _say_once(f"job workers start afresh: {starter.why}")
        return None
    try:
        pid = starter.spawn(str(run.path), str(run.log), env)
    except OSError as e:
        _say_once(f"job workers start afresh: {e}")
        return None
    return Forked(pid, start_time(pid), starter)


def _starter_env(base: Mapping[str, str]) -> dict[str, str]:
    """The warm starter's own environment: a CPU worker's, at import time."""
    return {**base, "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ""}


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)


def start_worker(
    run: RunDir, env: Mapping[str, str], processes: int = 1
) -> subprocess.Popen[bytes]:
    """`python -m thinker.jobs.worker <run dir>` in the run directory, in a session of its own
    (a signal to the starter's group does not reach it), its output appended to the run's log.
    Every executor starts its workers this way. `processes` > 1: that many ranks of one
    data-parallel job, started by torchrun on this machine (its agent forwards a stop to
    every rank)."""
    command = ["-m", "thinker.jobs.worker", str(run.path)]
    if processes > 1:
        command = ["-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={processes}", *command]  # fmt: skip
    with open(run.log, "ab") as log_file:
        return subprocess.Popen(
            [sys.executable, *command],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=run.path,
            env=dict(env),
            start_new_session=True,
        )


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment less what a worker must not hold (see _CREDENTIAL)."""
    return {
        name: value
        for name, value in environ.items()
        if name in _WORKER_NEEDS
        or not (_CREDENTIAL.search(name) or _URL_WITH_PASSWORD.search(value))
    }
