"""Run untrusted Python (sampled code, user reward functions) in a separate, limited process.

`run_sandboxed` starts `python -I -S _sandbox_child.py` (isolated mode: no site-packages, no
user site, no PYTHON* variables, a minimal environment) in a new session, with an empty private
working directory that is deleted afterwards. That child is a supervisor that runs no user code;
it forks the process that does. What holds, and who holds it:

Kernel-enforced (where the kernel lets us; `SandboxResult.isolation` says what was achieved):
- rlimits: CPU time (SIGKILL at `cpu_s`, rounded up to whole seconds), address space
  (`memory_mb`; Python raises MemoryError), 16 MiB per written file, 256 open files, no core
  dumps. RLIMIT_NPROC (64)
  only where the process's real uid is the sandbox's own (`nobody`, or a fresh user namespace):
  the limit counts every process of that uid, root is exempt from it, and a low limit on a shared
  uid would fail the forks of everything else the user runs.
- `netns`: a new network namespace with no interface up: no network, loopback included.
- `pidns`: a new PID namespace whose first process is the sandboxed one; killing it kills every
  process inside, so grandchildren that left the process group die too, and processes outside
  (the trainer) cannot be named, let alone signalled. `mountns`: its own /proc.
- `uid=nobody`: started as root, the process switches to uid/gid 65534 and so loses every
  capability: it cannot raise its limits, signal or trace the trainer, or write root's files.
  Interpreter paths `nobody` cannot read (a Python under /root) are bind-mounted read-only in the
  private mount namespace. Where that is impossible it stays uid 0 with no capabilities.
- The wall clock: the supervisor SIGKILLs the sandbox at `timeout_s`; the parent SIGKILLs the
  supervisor's group if it has not finished `_BACKSTOP_S` later.
- Also: no_new_privs, descriptors other than 0-2 closed, SIGKILL if the supervisor dies.

Python-level only (not a security boundary on its own: `_socket` or ctypes get round it): the
`socket` module refuses non-Unix sockets, `getaddrinfo` and `create_connection`.

Without namespaces (Docker's default capabilities and seccomp profile, or a kernel that forbids
unprivileged user namespaces) the rlimits, the uid switch (as root), the Python guard and the
process-group kill remain: a grandchild that starts its own session can outlive the run, and a
non-root trainer's sandboxed code keeps the trainer's uid and file permissions. When rewards run
model-written code, run the trainer as root in a container, or as a user that owns nothing it
must keep. A warning is logged once when a protection is missing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, TypeVar, cast

from thinker.errors import ConfigError, ThinkerError

logger = logging.getLogger(__name__)

OUTPUT_LIMIT = 64 * 1024  # bytes kept of each of stdout and stderr (head and tail)
_CHILD = Path(__file__).with_name("_sandbox_child.py")
_BACKSTOP_S = 3.0  # the supervisor's own start-up and kill, on top of timeout_s
_DRAIN_S = 0.5  # how long output is still read once the supervisor has exited
_warned: set[str] = set()
T = TypeVar("T")


class SandboxError(ThinkerError, RuntimeError):
    """The sandbox itself could not be set up (our environment, never the sandboxed code)."""


class _Status(TypedDict, total=False):
    """What the supervisor reports (see _sandbox_child.main)."""

    returncode: int
    timed_out: bool
    cpu_s: float  # CPU time as RLIMIT_CPU counts it (in scheduler ticks)
    isolation: list[str]
    setup_error: str


@dataclass(frozen=True)
class SandboxResult:
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str
    timed_out: bool  # killed at the wall-clock limit
    killed_reason: str | None  # why it was stopped: a limit or a signal (None: it exited)
    isolation: frozenset[str] = frozenset()  # kernel protections in force (see module docstring)


def check_limits(timeout_s: float, cpu_s: float, memory_mb: int) -> None:
    """Raise ConfigError naming every limit that is not a positive number."""
    limits = {"timeout_s": timeout_s, "cpu_s": cpu_s, "memory_mb": memory_mb}
    bad = [f"{k} must be > 0, got {v!r}" for k, v in limits.items() if not v > 0]
    if bad:
        raise ConfigError("invalid sandbox limits", bad)


def run_sandboxed(
    source: str,
    *,
    timeout_s: float,
    cpu_s: float,
    memory_mb: int,
    stdin: str = "",
    extra_sys_path: Sequence[str | Path] = (),
) -> SandboxResult:
    """Run `source` as `__main__` in a sandboxed Python process and return what happened.

    Never raises because of what `source` does; raises ConfigError for invalid limits and
    SandboxError when the sandbox cannot start. `extra_sys_path` entries are appended to the
    child's `sys.path` (which otherwise holds only the standard library).
    """
    check_limits(timeout_s, cpu_s, memory_mb)
    private = Path(tempfile.mkdtemp(prefix="thinker-sandbox-"))
    try:
        return _run(private, source, stdin, timeout_s, cpu_s, memory_mb, extra_sys_path)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run(
    private: Path,
    source: str,
    stdin: str,
    timeout_s: float,
    cpu_s: float,
    memory_mb: int,
    extra_sys_path: Sequence[str | Path],
) -> SandboxResult:
    private.chmod(0o711)  # `nobody` may pass through to work/, but not list or read
    work = private / "work"
    work.mkdir(mode=0o700)
    (private / "main.py").write_text(source, encoding="utf-8")  # the supervisor deletes it
    (private / "stdin").write_text(stdin, encoding="utf-8")
    status_r, status_w = os.pipe()
    config = {
        "private": str(private),
        "timeout_s": timeout_s,
        "cpu_s": cpu_s,
        "memory_mb": memory_mb,
        "extra_sys_path": [str(Path(p).resolve()) for p in extra_sys_path],
        "status_fd": status_w,
    }
    try:
        with open(private / "stdin", "rb") as stdin_file:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_CHILD), json.dumps(config)],
                stdin=stdin_file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=work,
                env=_environment(work),
                start_new_session=True,
                pass_fds=(status_w,),
            )
    except OSError as exc:
        os.close(status_r)
        raise SandboxError(f"cannot start the sandbox interpreter {sys.executable}: {exc}") from exc
    finally:
        os.close(status_w)
    try:
        stdout, stderr, backstop = _collect(proc, timeout_s + _BACKSTOP_S)
        status = _read_status(status_r)
    except BaseException:  # e.g. KeyboardInterrupt: leave nothing running
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        os.close(status_r)
    if status is None and not backstop and proc.returncode >= 0:
        raise SandboxError(f"the sandbox supervisor failed: {stderr[-2000:]}")
    if status is None:  # killed: by the backstop, or by sandboxed code with the trainer's uid
        reason = "the sandbox supervisor was killed"
        if backstop:
            reason = time_limit_reason(cpu_s, timeout_s)
        return SandboxResult(proc.returncode, stdout, stderr, backstop, reason)
    return _result(status, stdout, stderr, timeout_s, cpu_s, memory_mb)


def _environment(work: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


class _Capture:
    """Keeps the first and the last OUTPUT_LIMIT / 2 bytes of a stream."""

    def __init__(self) -> None:
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        half = OUTPUT_LIMIT // 2
        room = max(half - len(self.head), 0)
        self.head += data[:room]
        self.tail += data[room:]
        if len(self.tail) > half:
            self.dropped += len(self.tail) - half
            del self.tail[:-half]

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes cut ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode("utf-8", errors="replace")


def _collect(proc: subprocess.Popen[bytes], limit_s: float) -> tuple[str, str, bool]:
    """Read stdout and stderr (capped) until the supervisor exits; SIGKILL its group at limit_s.

    Returns the output and whether the supervisor had to be killed.
    """
    assert proc.stdout is not None and proc.stderr is not None
    captures = {proc.stdout.fileno(): _Capture(), proc.stderr.fileno(): _Capture()}
    deadline = time.monotonic() + limit_s
    with selectors.DefaultSelector() as selector:
        for fd in captures:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            if proc.poll() is not None:  # leftovers may still hold the pipes: read a little more
                deadline = min(deadline, time.monotonic() + _DRAIN_S)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in selector.select(min(remaining, 0.1)):
                data = os.read(key.fd, 65536)
                if data:
                    captures[key.fd].add(data)
                else:
                    selector.unregister(key.fd)
    backstop = False
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        backstop = True
        _kill_group(proc.pid)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    out, err = captures.values()
    return out.text(), err.text(), backstop


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _read_status(fd: int) -> _Status | None:
    os.set_blocking(fd, False)  # a status is written once, before the supervisor exits
    try:
        data = os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    try:
        return cast(_Status, json.loads(data)) if data else None
    except ValueError:
        return None


def _result(
    status: _Status,
    stdout: str,
    stderr: str,
    timeout_s: float,
    cpu_s: float,
    memory_mb: int,
) -> SandboxResult:
    if "setup_error" in status:
        raise SandboxError(f"the sandbox could not be set up: {status['setup_error']}")
    returncode, timed_out = status["returncode"], status["timed_out"]
    isolation = frozenset(status.get("isolation", []))
    _warn_weak_isolation(isolation)
    reason = _killed_reason(
        returncode, timed_out, status["cpu_s"], stderr, timeout_s, cpu_s, memory_mb
    )
    return SandboxResult(returncode, stdout, stderr, timed_out, reason, isolation)


def time_limit_reason(cpu_s: float, timeout_s: float) -> str:
    """The one reason given for a stop at either time limit: under load the wall clock can
    run out before the CPU time does, so which of the two fires is the machine's doing."""
    return f"stopped by its time limit (CPU {cpu_s:g} s / wall clock {timeout_s:g} s)"


def _killed_reason(
    returncode: int,
    timed_out: bool,
    used_cpu_s: float,
    stderr: str,
    timeout_s: float,
    cpu_s: float,
    memory_mb: int,
) -> str | None:
    if timed_out or _cpu_limit_hit(returncode, used_cpu_s, cpu_s):
        return time_limit_reason(cpu_s, timeout_s)
    if returncode != 0 and "MemoryError" in stderr:
        return f"stopped by its memory limit ({memory_mb} MB)"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return None


def _cpu_limit_hit(returncode: int, used_cpu_s: float, cpu_s: float) -> bool:
    """SIGXCPU, or SIGKILL (RLIMIT_CPU's hard limit; PID 1 ignores SIGXCPU) with the limit used:
    `used_cpu_s` is the clock the kernel enforces it on (see _sandbox_child._wait)."""
    if returncode == -signal.SIGXCPU:
        return True
    return returncode == -signal.SIGKILL and used_cpu_s >= math.ceil(cpu_s) - 1e-6


def _warn_weak_isolation(isolation: frozenset[str]) -> None:
    missing = [n for n in ("netns", "pidns") if n not in isolation]
    if os.geteuid() == 0 and "uid=nobody" not in isolation:
        missing.append("uid=nobody")
    key = ",".join(missing)
    if missing and key not in _warned:
        _warned.add(key)
        logger.warning(
            "sandboxed code runs without %s; see thinker.rewards.sandbox for what still holds",
            key,
        )


def result_marker() -> str:
    """A fresh prefix for a harness's result line; the sandboxed code never sees it printed."""
    return f"__thinker_result__:{secrets.token_hex(16)}"


def read_result(stdout: str, marker: str) -> dict[str, object] | None:
    """The JSON object of the last stdout line that starts with `marker`, else None."""
    prefix = marker + " "
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        return None
    try:
        result = json.loads(lines[-1][len(prefix) :])
    except ValueError:
        return None
    return result if isinstance(result, dict) else None


def map_concurrently(fn: Callable[[T], float], items: Sequence[T]) -> list[float]:
    """`[fn(x) for x in items]` on at most os.cpu_count() threads (each waits on a process)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(len(items), os.cpu_count() or 1)) as pool:
        return list(pool.map(fn, items))
