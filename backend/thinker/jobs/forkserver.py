"""Warm workers: a process that has already imported what a job's worker imports (torch,
transformers, PEFT, the engine) and forks one worker per job.

A worker started as `python -m thinker.jobs.worker` spends about 7 s of CPU importing before
its first step, more than a small CPU job's training. `LocalExecutor` starts CPU and Tinker
jobs' workers from this process instead (GPU and multi-process jobs keep a fresh interpreter:
this process never touches CUDA, and torchrun starts its own ranks). A forked worker is the
same program as a started one: the worker's `main` on its run directory, in a session of its
own, its output appended to the run's log, in the environment the executor gives it; it
outlives this process and the server alike, and the server follows it by pid as any other.

Its environment at import time is the executor's base environment (the server's, less
credentials); the executor starts another when the server's environment changes, so nothing
a library reads at import differs from a fresh worker's.

Protocol, JSON lines over a socket pair with the executor: this process says `{"ready":
true}` (or `false` and why) once imported; then each `{"spawn": {run_dir, log, env}}` is
answered `{"pid": N}` and each `{"exit": pid}` with `{"code": C}` once it is reaped (None
when not one of ours) or `{"running": true}`. The end of the socket (the server gone) ends
this process, not its workers.

    python -m thinker.jobs.forkserver <socket fd>
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# What a worker imports before its first step (the worker module's own imports, and those
# its stages import when they run). Optional ones (the ray extra) are skipped if missing.
PRELOAD = (
    "thinker.jobs.worker",
    "thinker.engine.local.service",
    "thinker.engine.local.training",
    "thinker.engine.local.sampling",
    "thinker.engine.tinker_backend",
    "thinker.algorithms.sl",
    "thinker.algorithms.dpo",
    "thinker.algorithms.rl",
    "thinker.algorithms.reward_model",
    "thinker.algorithms.bradley_terry",
    "thinker.algorithms.rlhf",
    "thinker.algorithms.batch",
    "thinker.algorithms.evaluation",
)
REAP_EVERY_S = 1.0
DYING_WAIT_S = 2.0  # how long an exit query waits for a dying child to become reapable
READY_TIMEOUT_S = 600.0  # a bound on a hung import, not a speed: a fresh worker's is as long
ANSWER_TIMEOUT_S = 60.0  # a fork, or an exit code looked up


class WarmStarter:
    """The executor's end: starts the process in `env` (its import-time environment), then
    forks workers through it. Thread-safe; every call waits for its answer."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "thinker.jobs.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the server's group does not reach it
        )
        theirs.close()
        self._channel = ours
        self._reader = ours.makefile("rb")
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self.served = False  # has been ready
        self.why: str | None = None  # why it cannot fork workers, once known

    def ready(self) -> bool:
        """Whether it forks workers; waits for its imports the first time."""
        with self._lock:
            if self._ready is None:
                answer = self._read(READY_TIMEOUT_S)
                self._ready = self.served = bool(answer.get("ready"))
                self.why = answer.get("why") or self.why
            return self._ready and self._process.poll() is None

    def spawn(self, run_dir: str, log: str, env: Mapping[str, str]) -> int:
        """Fork a worker for `run_dir`; its pid. OSError when it could not."""
        with self._lock:
            self._send({"spawn": {"run_dir": run_dir, "log": log, "env": dict(env)}})
            answer = self._read(ANSWER_TIMEOUT_S)
        if "pid" not in answer:
            raise OSError(answer.get("error") or self.why or "the warm starter did not answer")
        return int(answer["pid"])

    def exit_status(self, pid: int) -> tuple[bool, int | None]:
        """Whether a forked worker has ended (been reaped), and its exit code (negative: the
        signal that ended it; None when unknown, e.g. this process gone)."""
        with self._lock:
            if self.broken:
                return True, None
            self._send({"exit": pid})
            answer = self._read(ANSWER_TIMEOUT_S)
        if answer.get("running"):
            return False, None
        code = answer.get("code")
        return True, None if code is None else int(code)

    @property
    def broken(self) -> bool:
        return self._ready is False or self._process.poll() is not None

    def close(self) -> None:
        """End the process (its workers go on)."""
        self._ready = False
        with contextlib.suppress(OSError):
            self._reader.close()
            self._channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=ANSWER_TIMEOUT_S)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._channel.sendall(json.dumps(message).encode() + b"\n")
        except OSError as e:
            self._fail(f"the warm starter is gone ({e})")

    def _read(self, timeout: float) -> dict[str, Any]:
        """The next answer; {} (and this starter no longer used) when none comes."""
        if self._ready is False and self.why is not None:
            return {}
        self._channel.settimeout(timeout)
        try:
            line = self._reader.readline()
        except OSError as e:  # a timeout too: the stream is then unusable
            self._fail(f"the warm starter did not answer in {timeout:g} s ({e})")
            return {}
        if not line:
            self._fail(f"the warm starter exited (code {self._process.poll()})")
            return {}
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _fail(self, why: str) -> None:
        self._ready, self.why = False, why


@dataclass(frozen=True)
class Spawn:
    """One worker to fork: `main` of thinker.jobs.worker on `run_dir`."""

    run_dir: str
    log: str
    env: dict[str, str]


def preload() -> str | None:
    """Import what workers import; None when this process may fork them, else why not."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as e:
            if name.split(".")[0] == "thinker" and not _optional(e):
                return f"importing {name}: {type(e).__name__}: {e}"
    if threading.active_count() != 1:  # a Python thread would be lost in every child
        names = ", ".join(t.name for t in threading.enumerate())
        return f"a library started threads on import ({names}): forking would be unsafe"
    return None


def _optional(e: ImportError) -> bool:
    return e.name is not None and e.name.split(".")[0] == "ray"


def serve(channel: socket.socket) -> Spawn | None:
    """Answer the executor until its end of `channel` closes (None); in a forked child,
    return what that child is to run."""
    exited: dict[int, int] = {}  # reaped children's exit codes
    forked: set[int] = set()  # children not yet reaped
    reader = channel.makefile("rb")
    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        while True:
            _reap(exited, forked)
            if not selector.select(REAP_EVERY_S):
                continue
            line = reader.readline()
            if not line:
                return None  # the server is gone; the workers go on
            request = json.loads(line)
            if "exit" in request:
                _answer(channel, _exit_status(int(request["exit"]), exited, forked))
                continue
            spawn = Spawn(**request["spawn"])
            try:
                pid = os.fork()
            except OSError as e:
                _answer(channel, {"error": f"fork failed: {e}"})
                continue
            if pid == 0:
                channel.close()
                return spawn
            forked.add(pid)
            _answer(channel, {"pid": pid})


def _exit_status(pid: int, exited: dict[int, int], forked: set[int]) -> dict[str, Any]:
    """`{"code": C}` for a reaped child (None: not one of ours), `{"running": true}` for
    one that is not reapable yet. Asked about a worker that looks dead, so a dying one is
    waited for a moment: a killed process with several threads is reapable only once every
    thread has gone."""
    deadline = time.monotonic() + DYING_WAIT_S
    while True:
        _reap(exited, forked)
        if pid not in forked or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if pid in forked:
        return {"running": True}
    return {"code": exited.get(pid)}


def _reap(exited: dict[int, int], forked: set[int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        forked.discard(pid)
        exited[pid] = os.waitstatus_to_exitcode(status)


def _answer(channel: socket.socket, message: dict[str, Any]) -> None:
    channel.sendall(json.dumps(message).encode() + b"\n")


def run_worker(spawn: Spawn) -> int:
    """In the forked child: become the worker a fresh `python -m thinker.jobs.worker` is."""
    os.setsid()  # a session of its own, as the executor's started workers
    log = os.open(spawn.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (log, 1), (log, 2)):
        os.dup2(fd, target)
    os.close(log)
    os.close(null)
    # Unbuffered lines, as PYTHONUNBUFFERED gives a started worker: the log is read live.
    sys.stdout = sys.__stdout__ = _text(1)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _text(2)  # type: ignore[misc]
    os.chdir(spawn.run_dir)
    os.environ.clear()
    os.environ.update(spawn.env)
    sys.argv = ["-m", spawn.run_dir]
    from thinker.jobs import worker  # noqa: PLC0415 - imported already (preload)

    print("[thinker] worker forked from the warm starter (imports already done)", flush=True)
    return worker.main([spawn.run_dir])


def _text(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), line_buffering=True, write_through=True
    )


def main(argv: list[str]) -> int:
    channel = socket.socket(fileno=int(argv[0]))
    why = preload()
    _answer(channel, {"ready": why is None, "why": why})
    if why is not None:
        return 1
    spawn = serve(channel)
    if spawn is None:
        return 0
    try:
        return run_worker(spawn)
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - the child's last word goes to the run's log
        with contextlib.suppress(OSError):
            traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
