"""How many CPU threads the local engine's torch uses: chosen, logged, overridable.

torch's default (one thread per physical core, OpenMP workers that spin while they wait) is
the worst choice on a shared machine: on a 2-core machine with other work running, a
`thinker/tiny` SL step took 1.1-1.7 s with 2 threads and 60 ms with 1 (measured here with
the load average at 5-7). The rule:

- `THINKER_THREADS=N` wins.
- A small model (under SMALL_MODEL_PARAMS parameters) gets one thread: its matrices are too
  small for a second thread to pay for the synchronisation, and one thread cannot be stalled
  by a busy sibling.
- A larger one gets the cores this process may use (its CPU affinity, capped by a cgroup CPU
  quota), divided by the CPU jobs that share them (`THINKER_CPU_JOBS`, which the job manager
  sets for its workers to `max_cpu_jobs`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

SMALL_MODEL_PARAMS = 50_000_000
_applied: int | None = None  # the count this process last set


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    why: str


def usable_cores() -> int:
    """Cores this process may run on: its affinity mask, capped by a cgroup v2 CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, math.floor(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def choose_threads(num_params: int) -> ThreadChoice:
    """The thread count for a model of `num_params` parameters on the CPU, and why."""
    override = os.environ.get("THINKER_THREADS", "").strip()
    if override:
        try:
            threads = int(override)
        except ValueError:
            threads = 0
        if threads < 1:
            raise ValueError(f"THINKER_THREADS must be a whole number >= 1, got {override!r}")
        return ThreadChoice(threads, f"THINKER_THREADS={threads}")
    if num_params < SMALL_MODEL_PARAMS:
        return ThreadChoice(
            1,
            f"a small model ({num_params / 1e6:.1f}M parameters) runs fastest on one thread, "
            "and one thread is not stalled by other work on the machine",
        )
    cores, jobs = usable_cores(), max(1, int(os.environ.get("THINKER_CPU_JOBS", "1") or 1))
    threads = max(1, cores // jobs)
    return ThreadChoice(threads, f"{cores} usable core(s) shared by {jobs} CPU job(s)")


def apply_threads(model: torch.nn.Module) -> ThreadChoice:
    """Set torch's CPU threads for `model` (once per count per process) and say so."""
    global _applied
    choice = choose_threads(sum(p.numel() for p in model.parameters()))
    if _applied != choice.threads:
        torch.set_num_threads(choice.threads)
        _applied = choice.threads
        print(
            f"[thinker] CPU threads: {choice.threads} ({choice.why}; THINKER_THREADS overrides)",
            flush=True,
        )
    return choice
