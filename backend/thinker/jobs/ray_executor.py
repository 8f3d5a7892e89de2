"""The Ray executor: each job's worker on a node of a Ray cluster (`THINKER_EXECUTOR=ray`).

The worker is the same command as under the local executor, `python -m thinker.jobs.worker
<run dir>`, started as a subprocess by a Ray actor that Ray places where the job's resources
are free (a GPU for a GPU job, one CPU for a CPU job, plus `THINKER_RAY_RESOURCES`). It
reports through its run directory as always, so the run directories must be on storage every
node sees (`THINKER_DATA_DIR` on a shared filesystem): the server tails them as it tails a
local worker's, and no event travels through Ray.

Each actor is detached and named after its job (`thinker-<job id's hex>-<attempt>`, in
the `thinker` namespace), so a server that restarts finds its workers again by name (the job
row keeps `ray:<name>` where a local worker keeps its pid's start time). The actor records where it
runs (node, address, GPUs) in the run directory's `placement.json` and the job's log.

A node or actor lost mid-job is a worker that is no longer running: the job is interrupted
with that reason, as a lost local worker's is, and resumed from its last checkpoint wherever
Ray places the next actor while the job's `auto_resume` retries last. A worker whose actor
has gone (a node that lost its Ray processes but not the machine) ends itself, so that no
two attempts write one run directory.

`ray` is an optional extra (`pip install -e '.[ray]'`); this module imports it only when a
RayExecutor is made.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from thinker.errors import ConfigError
from thinker.files import write_json_atomically
from thinker.jobs.executor import (
    PARENT_ENV,
    Launch,
    WorkerRef,
    start_worker,
    worker_environment,
)
from thinker.runs import RunDir

log = logging.getLogger(__name__)
NAMESPACE = "thinker"
REF_PREFIX = "ray:"  # a job row's `pid_start` for a worker on Ray: ray:<actor name>
WORKER_REF_CHARS = 32  # the width of that column (store/tables.py)
POLL_TIMEOUT_S = 5.0  # how long a poll waits for an actor that does not answer
TERMINATE_ANSWER_S = 2.0  # a live actor takes a stop request at once (it has spare threads)
EXIT_GRACE_S = 30.0  # an actor outlives its worker this long, for the server to read the code


def actor_name(job_id: str) -> str:
    """`thinker-<job id's hex>-<attempt>`: with REF_PREFIX, within the job row's 32
    characters for a worker reference."""
    name = f"thinker-{job_id.removeprefix('job_')}-{uuid.uuid4().hex[:4]}"
    assert len(REF_PREFIX + name) <= WORKER_REF_CHARS, name
    return name


class WorkerProcess:
    """On a Ray node: the job's worker as a subprocess, in a session of its own."""

    def __init__(self, run_dir: str, env: Mapping[str, str], processes: int = 1) -> None:
        import ray  # optional extra: present on a Ray node, which runs this actor

        gpus = [str(int(g)) for g in ray.get_gpu_ids()]
        child_env = dict(env)
        child_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # what Ray gave this actor
        context = ray.get_runtime_context()
        self.placement = {
            "executor": "ray",
            "node_id": context.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "gpus": gpus,
            "processes": processes,
        }
        run = RunDir(Path(run_dir))
        write_json_atomically(run.placement, self.placement)
        # The worker ends itself should this actor go (its node lost): else it would train on
        # beside the attempt that resumes the job elsewhere (jobs/worker.py).
        child_env[PARENT_ENV] = str(os.getpid())
        with open(run.log, "ab") as log_file:
            where = f"node {self.placement['node_ip']} ({self.placement['hostname']})"
            log_file.write(f"[ray] worker on {where}, GPUs {gpus or 'none'}\n".encode())
        self.child = start_worker(run, child_env, processes)
        threading.Thread(target=self._exit_after_worker, daemon=True).start()

    def _exit_after_worker(self) -> None:
        """Once the worker has ended and the server has had time to read its exit code, the
        actor goes, giving its resources back even if no server releases it."""
        self.child.wait()
        time.sleep(EXIT_GRACE_S)
        os._exit(0)

    def wait(self) -> int:
        """The worker's exit code, once it has ended."""
        return self.child.wait()

    def poll(self) -> int | None:
        return self.child.poll()

    def where(self) -> dict[str, Any]:
        return self.placement

    def terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.child.pid, signal.SIGTERM)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.child.pid, signal.SIGKILL)
        self.child.wait()


class RayExecutor:
    """Workers as detached Ray actors (see the module)."""

    def __init__(self, address: str, resources: Mapping[str, float] | None = None) -> None:
        try:
            import ray
        except ImportError as e:
            raise ConfigError("THINKER_EXECUTOR=ray needs Ray: pip install -e '.[ray]'") from e
        self._ray = ray
        if not ray.is_initialized():
            ray.init(
                address=address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        self._resources = dict(resources or {})
        # The actor class, made here so that importing this module needs no Ray.
        self._actor = ray.remote(max_restarts=0, max_task_retries=0)(WorkerProcess)
        self._waits: dict[str, Any] = {}  # job id -> the ObjectRef of its actor's `wait`
        self._names: dict[str, str] = {}  # job id -> its actor's name

    def gpus(self) -> int:
        """The cluster's GPUs now (Ray places each GPU job's actor on a node with one free,
        so no node runs more GPU jobs than it has GPUs)."""
        return int(self._ray.cluster_resources().get("GPU", 0))

    def launch(self, launch: Launch) -> WorkerRef:
        env = worker_environment(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        if launch.resource == "cpu":
            env.setdefault("THINKER_CPU_JOBS", "1")
        env.update(launch.env)
        gpu = launch.resource == "gpu"
        name = actor_name(launch.job_id)  # each attempt its own (an old one may linger)
        try:
            actor = self._actor.options(
                name=name,
                lifetime="detached",
                num_cpus=0 if gpu else launch.processes,
                num_gpus=launch.processes if gpu else 0,
                memory=launch.memory_bytes,
                resources=self._resources or None,
                # Threads: `wait` blocks one while terminate, kill and where answer.
                max_concurrency=4,
            ).remote(str(launch.run_dir), env, launch.processes)
        except ValueError as e:  # a name still held by an earlier attempt's actor
            raise OSError(f"cannot start the job's Ray actor {name}: {e}") from e
        self._waits[launch.job_id] = actor.wait.remote()
        self._names[launch.job_id] = name
        return WorkerRef(launch.job_id, None, REF_PREFIX + name)

    def poll(self, worker: WorkerRef) -> tuple[bool, int | None]:
        ray = self._ray
        waiting = self._waits.get(worker.job_id)
        if waiting is None:  # a worker started before this server: find its actor by name
            actor = self._find(worker)
            if actor is None:
                return False, None
            waiting = self._waits[worker.job_id] = actor.wait.remote()
            self._names[worker.job_id] = _name_of(worker) or ""
        done, _ = ray.wait([waiting], timeout=0)
        if not done:
            return True, None
        del self._waits[worker.job_id]
        try:
            code = int(ray.get(waiting, timeout=POLL_TIMEOUT_S))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as e:
            log.warning("job %s: its Ray actor is gone (%s)", worker.job_id, type(e).__name__)
            return False, None
        self._release(worker)
        return False, code

    def terminate(self, worker: WorkerRef) -> None:
        actor = self._find(worker)
        if actor is None:
            return
        asked = actor.terminate.remote()
        done, _ = self._ray.wait([asked], timeout=TERMINATE_ANSWER_S)
        if not done:
            # Not placed (no node has the resources it asks for) or still starting, it cannot
            # take the request: it goes, and the job ends as its stop request says
            # (manager._end_lost); a worker it had started ends itself (PARENT_ENV).
            log.info("job %s: its Ray actor did not answer; removing it", worker.job_id)
            self._kill_actor(_name_of(worker))

    def kill(self, worker: WorkerRef) -> None:
        actor = self._find(worker)
        if actor is None:
            return
        with contextlib.suppress(Exception):  # the actor may die as it is asked
            self._ray.get(actor.kill.remote(), timeout=POLL_TIMEOUT_S)
        self._release(worker)

    def reap(self, active: Iterable[str]) -> None:
        """The jobs that ended (their last events read) let their actors go."""
        running = set(active)
        for job_id in [j for j in self._waits if j not in running]:
            del self._waits[job_id]
            self._kill_actor(self._names.pop(job_id, None))

    def shutdown(self, timeout_s: float) -> None:
        """Workers on the cluster keep running across a server restart (they are detached);
        the next server finds them by name."""
        self._waits.clear()

    def _find(self, worker: WorkerRef) -> Any:
        name = _name_of(worker)
        if name is None:
            return None
        try:
            return self._ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:  # no such actor: it ended, or its node went
            return None

    def _release(self, worker: WorkerRef) -> None:
        """The worker ended: its actor goes too (detached actors stay until killed)."""
        self._names.pop(worker.job_id, None)
        self._kill_actor(_name_of(worker))

    def _kill_actor(self, name: str | None) -> None:
        if not name:
            return
        with contextlib.suppress(Exception):  # already gone
            self._ray.kill(self._ray.get_actor(name, namespace=NAMESPACE))


def _name_of(worker: WorkerRef) -> str | None:
    if worker.pid_start is None or not worker.pid_start.startswith(REF_PREFIX):
        return None
    return worker.pid_start[len(REF_PREFIX) :]
