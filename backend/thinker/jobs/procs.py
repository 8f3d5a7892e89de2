"""Is a worker still alive? By pid plus its start time, so a reused pid is not mistaken for it."""

from __future__ import annotations

import os
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def is_alive(pid: int, started: str | None) -> bool:
    """Whether `pid` runs and is the process that started at `started` (None: not checked)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): the signal check is all there is
    if stat[stat.rfind(")") + 2 :].startswith("Z"):
        return False  # exited, not yet reaped
    return started is None or start_time(pid) == started
