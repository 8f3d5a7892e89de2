"""A logger that kills a training loop after a chosen step, as a crashed process would."""

from __future__ import annotations

from pathlib import Path

from thinker.runs import RunLogger


class Crash(RuntimeError):
    pass


class CrashingLogger(RunLogger):
    """Logs like RunLogger, then raises Crash once `crash_after` has been logged."""

    def __init__(self, run_dir: Path, crash_after: int) -> None:
        super().__init__(run_dir)
        self.crash_after = crash_after

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        super().log_metrics(metrics, step)
        if step == self.crash_after:
            raise Crash(f"killed after step {step}")
