"""The child side of `thinker.rewards.sandbox`. Standard library only; never imported by Thinker.

Run as `python -I -S _sandbox_child.py CONFIG_JSON`, with a private directory the parent made.
Two processes live here:

- the supervisor (trusted, runs no user code): reads and deletes the source, enters new network
  and PID namespaces where the kernel allows it, forks the sandboxed process, SIGKILLs it (and so
  its whole PID namespace) at the wall-clock limit, and writes one JSON status to `status_fd`;
- the sandboxed process (PID 1 of the new namespace when there is one): enters a mount namespace
  with its own /proc, sets the rlimits, drops to `nobody` when started as root (or, when it cannot,
  drops every capability), installs the Python-level network guard and runs the source.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import math
import os
import resource
import select
import stat
import sys
import time
import traceback
import types
from typing import Any, NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SIGKILL = 9
CPUCLOCK_PROF = 0  # the user + system time clock of a process (linux/posix-timers.h)
NOBODY = 65534
MAX_PROCESSES = 64  # RLIMIT_NPROC, only where it counts the sandbox alone (see _limits)
MAX_OPEN_FILES = 256
MAX_FILE_BYTES = 16 * 2**20
SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong]
_libc.mount.argtypes += [ctypes.c_void_p]


def main() -> None:
    config = json.loads(sys.argv[1])
    source_path = os.path.join(config["private"], "main.py")
    with open(source_path, encoding="utf-8") as f:
        source = f.read()
    os.unlink(source_path)
    isolation = _enter_namespaces()
    info_r, info_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(info_r)
        _sandboxed(source, config, isolation, info_w)
    os.close(info_w)
    status, cpu_s, timed_out = _wait(pid, float(config["timeout_s"]))
    with os.fdopen(info_r, "rb") as f:
        info = json.loads(f.read() or b"{}")
    report = {
        "returncode": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "cpu_s": cpu_s,
        "isolation": isolation,
        **info,
    }
    os.write(config["status_fd"], json.dumps(report).encode())


def _enter_namespaces() -> list[str]:
    """New network and PID namespaces: as root directly, else inside a new user namespace."""
    if os.geteuid() == 0:
        return [n for n, f in (("netns", CLONE_NEWNET), ("pidns", CLONE_NEWPID)) if _unshare(f)]
    if _unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID):
        return ["userns", "netns", "pidns"]
    return []


def _wait(pid: int, timeout_s: float) -> tuple[int, float, bool]:
    """Wait for the sandboxed process; SIGKILL its group (and its PID namespace) on timeout.

    Returns its wait status, its CPU time as RLIMIT_CPU counts it, and whether it timed out.
    """
    deadline = time.monotonic() + timeout_s
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    exited = os.WEXITED | os.WNOWAIT  # left a zombie, so its CPU clock can still be read
    timed_out = False
    while os.waitid(os.P_PID, pid, exited | os.WNOHANG) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            for kill in (os.killpg, os.kill):  # not yet reaped: neither id can have been reused
                with contextlib.suppress(OSError):
                    kill(pid, SIGKILL)
            os.waitid(os.P_PID, pid, exited)
            timed_out = True
            break
        if pidfd is not None:
            select.select([pidfd], [], [], remaining)
        else:
            time.sleep(min(remaining, 0.01))
    cpu_s = _limited_cpu_time(pid)
    _, status, rusage = os.wait4(pid, 0)
    return status, rusage.ru_utime + rusage.ru_stime if cpu_s is None else cpu_s, timed_out


def _limited_cpu_time(pid: int) -> float | None:
    """The process's CPU-time clock that RLIMIT_CPU is enforced on (CPUCLOCK_PROF: scheduler
    ticks). wait4's rusage is the precise time, which on a loaded machine was up to a quarter
    lower at the same kill: too low to tell a kill at the limit from any other SIGKILL."""
    with contextlib.suppress(OSError):
        return time.clock_gettime((~pid << 3) | CPUCLOCK_PROF)  # MAKE_PROCESS_CPUCLOCK
    return None


def _sandboxed(source: str, config: dict[str, Any], isolation: list[str], info_w: int) -> NoReturn:
    """The sandboxed process: set up, report, run the source. Never returns into main()."""
    try:
        os.setsid()  # its own group: kill(0, ...) in user code cannot reach the supervisor
        _setup(config, isolation)
        os.write(info_w, json.dumps({"isolation": isolation}).encode())
        os.close(info_w)
        os.closerange(3, 1 << 16)
    except BaseException as exc:
        os.write(info_w, json.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}).encode())
        os._exit(SETUP_FAILED)
    code = 1
    try:
        code = _run(source)
    finally:
        os._exit(code)


def _setup(config: dict[str, Any], isolation: list[str]) -> None:
    private = config["private"]
    stdlib = [p for p in sys.path if os.path.isdir(p)]
    extra = [p for p in config["extra_sys_path"] if os.path.isdir(p)]
    as_root = os.geteuid() == 0
    if "pidns" in isolation and _enter_mount_namespace():
        isolation.append("mountns")
    if as_root and "mountns" in isolation:
        # Paths `nobody` cannot read (a Python under /root) are bind-mounted read-only.
        stdlib = [_readable_view(p, private, f"s{i}") for i, p in enumerate(stdlib)]
        extra = [_readable_view(p, private, f"e{i}") for i, p in enumerate(extra)]
    sys.path[:] = stdlib + extra
    drop_to_nobody = as_root and all(_world_readable(p) for p in stdlib)
    if drop_to_nobody:
        os.chown(os.path.join(private, "work"), NOBODY, NOBODY)
    _limits(config, nproc=drop_to_nobody or "userns" in isolation)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if drop_to_nobody:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)  # all capabilities go with uid 0
        isolation.append("uid=nobody")
    elif as_root:
        _drop_capabilities()
        isolation.append("uid=0,no-capabilities")
    _prctl(PR_SET_PDEATHSIG, SIGKILL)  # after setuid, which clears it
    _block_network()


def _enter_mount_namespace() -> bool:
    """A private mount namespace with a /proc that shows only the sandbox's PID namespace."""
    if not _unshare(CLONE_NEWNS):
        return False
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host
    except OSError:
        return False
    with contextlib.suppress(OSError):  # without it, /proc still shows only what uid allows
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return True


def _readable_view(path: str, private: str, name: str) -> str:
    if _world_readable(path):
        return path
    target = os.path.join(private, "lib", name)
    os.makedirs(target, exist_ok=True)
    os.chmod(os.path.dirname(target), 0o755)
    os.chmod(target, 0o755)
    _mount(path, target, None, MS_BIND | MS_REC)
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    return target


def _world_readable(path: str) -> bool:
    """Whether any user can list `path` and traverse every directory above it."""
    path = os.path.realpath(path)
    if not os.stat(path).st_mode & stat.S_IROTH:
        return False
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def _limits(config: dict[str, Any], nproc: bool) -> None:
    """Kernel limits. RLIMIT_NPROC counts every process of the real uid (root is exempt), so it
    is set only where that uid is the sandbox's own: `nobody`, or a fresh user namespace."""
    cpu_s = max(1, math.ceil(float(config["cpu_s"])))
    memory = int(config["memory_mb"]) * 2**20
    limits = {
        resource.RLIMIT_CPU: (cpu_s, cpu_s),  # soft = hard: SIGKILL (PID 1 ignores SIGXCPU)
        resource.RLIMIT_AS: (memory, memory),
        resource.RLIMIT_FSIZE: (MAX_FILE_BYTES, MAX_FILE_BYTES),
        resource.RLIMIT_NOFILE: (MAX_OPEN_FILES, MAX_OPEN_FILES),
        resource.RLIMIT_CORE: (0, 0),
    }
    if nproc:
        limits[resource.RLIMIT_NPROC] = (MAX_PROCESSES, MAX_PROCESSES)
    for which, value in limits.items():
        resource.setrlimit(which, value)


def _drop_capabilities() -> None:
    """capset(2) with empty sets; no_new_privs keeps execve from granting them back."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _block_network() -> None:
    """Make the socket module refuse network sockets. Not a boundary: `_socket` or ctypes get
    round it; the network namespace is what the kernel enforces."""
    import socket  # here: the sandboxed child patches it just before the untrusted code runs

    def denied(*args: object, **kwargs: object) -> NoReturn:
        raise PermissionError("network access is disabled in the sandbox")

    class NoNetworkSocket(socket.socket):
        def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno=None):
            if fileno is None and family != socket.AF_UNIX:
                denied()
            super().__init__(family, type, proto, fileno)

    socket.socket = NoNetworkSocket  # type: ignore[misc]
    for name in ("create_connection", "create_server", "getaddrinfo", "gethostbyname"):
        setattr(socket, name, denied)
    socket.gethostbyname_ex = socket.gethostbyaddr = denied


def _run(source: str) -> int:
    """Run `source` as __main__ and return the exit code a plain `python` would."""
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    sys.argv = ["<sandbox>"]
    try:
        exec(compile(source, "<sandbox>", "exec"), module.__dict__)
        code = 0
    except SystemExit as exc:  # sys.exit(): None and ints as given, anything else printed
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:
        code = 1
        with contextlib.suppress(BaseException):  # as `python file.py` would print it
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    return code & 0xFF


def _unshare(flags: int) -> bool:
    return _libc.unshare(flags) == 0


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc.mount(encode(source), encode(target), encode(fstype), flags, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _prctl(option: int, value: int) -> None:
    _libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0))


if __name__ == "__main__":
    main()
