"""Executors: where a job's worker runs. The scheduler (`JobManager`) decides when a job starts
and on which device; an executor starts its worker there, tells whether it still runs, and
stops it. The worker is always `python -m thinker.jobs.worker <run dir>` and reports only
through its run directory, so the manager follows every executor's workers the same way.

`LocalExecutor` runs each worker as a subprocess of the server, in a session of its own: a
server that dies leaves it running, and the next server finds it again by its pid and the
pid's start time (a reused pid is not mistaken for it).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from thinker.files import write_json_atomically
from thinker.jobs.procs import is_alive, start_time
from thinker.runs import RunDir

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

    def __init__(self, worker_nice: int, cpu_jobs: int) -> None:
        self.worker_nice = worker_nice
        self.cpu_jobs = cpu_jobs
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def gpus(self) -> int:
        """This machine's CUDA devices."""
        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    def launch(self, launch: Launch) -> WorkerRef:
        env = worker_environment(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env["THINKER_WORKER_NICE"] = str(self.worker_nice)
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
        child = start_worker(run, env, launch.processes)
        self._children[launch.job_id] = child
        return WorkerRef(launch.job_id, child.pid, start_time(child.pid))

    def poll(self, worker: WorkerRef) -> tuple[bool, int | None]:
        child = self._children.get(worker.job_id)
        if child is not None:
            code = child.poll()
            if code is None:
                return True, None
            del self._children[worker.job_id]
            return False, code
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
