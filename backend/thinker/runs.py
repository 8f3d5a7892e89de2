"""The run directory: the durable record of one training run.

`RunDir` names every file a run keeps; no other module spells one. `metrics.jsonl` holds one
line per logged step, `checkpoints.jsonl` one `CheckpointRecord` per saved checkpoint (both
append-only); a job's run also holds its `events.jsonl`, `job.json` and worker files, and a
run of several stages holds one run directory per stage (`RunDir.stage`). Algorithms report
through a `MetricsLogger`, which the job worker replaces to feed live events too.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from thinker.files import JsonlTail, append_jsonl, read_jsonl

REWIND_KEY = "rewind_to"  # a metrics.jsonl row marking a resume: later attempts supersede


class CheckpointRecord(BaseModel):
    """One line of checkpoints.jsonl: a checkpoint saved after `step` optimizer steps."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str  # the engine's checkpoint name (`{step:06d}`)
    step: int
    # weights + optimizer, to resume from (a tinker:// path); None: sampler weights only (a
    # Tinker SDK client's save_weights_for_sampler)
    state_path: str | None = None
    sampler_path: str | None = None  # the adapter alone, to sample from
    time: float = 0.0
    micro_batch_size: int | None = None  # how each step was split (a resume keeps it)
    reference_path: str | None = None  # DPO: the frozen reference its pairs were scored by


@dataclass(frozen=True)
class RunDir:
    """The files of one run directory (or of one stage's, below a run of several)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        """config.yaml: the settings it ran with."""
        return self.path / "config.yaml"

    @property
    def metrics(self) -> Path:
        """metrics.jsonl: one line per logged step."""
        return self.path / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        """checkpoints.jsonl: one CheckpointRecord per saved checkpoint."""
        return self.path / "checkpoints.jsonl"

    @property
    def metadata(self) -> Path:
        """metadata.json: what produced it: code, data, settings, versions."""
        return self.path / "metadata.json"

    @property
    def reference_logprobs(self) -> Path:
        """reference_logprobs.json: DPO's reference logprob sums per pair, with the key of
        what they were computed from (reused by a resumed run)."""
        return self.path / "reference_logprobs.json"

    @property
    def report(self) -> Path:
        """report.json: a job's verdict: did it learn."""
        return self.path / "report.json"

    @property
    def eval_output(self) -> Path:
        """eval.jsonl: `thinker eval`'s generated answers."""
        return self.path / "eval.jsonl"

    @property
    def events(self) -> Path:
        """events.jsonl: a job's numbered events (thinker.jobs.events)."""
        return self.path / "events.jsonl"

    @property
    def job(self) -> Path:
        """job.json: a job's request, as its worker runs it."""
        return self.path / "job.json"

    @property
    def control(self) -> Path:
        """control.json: a stop request for a job's worker (cancel or pause)."""
        return self.path / "control.json"

    @property
    def heartbeat(self) -> Path:
        """heartbeat: touched by a job's worker every few seconds."""
        return self.path / "heartbeat"

    @property
    def placement(self) -> Path:
        """placement.json: where the current attempt's worker runs (executor, node, GPUs),
        written by the executor that started it."""
        return self.path / "placement.json"

    @property
    def log(self) -> Path:
        """worker.log: a job's worker's output."""
        return self.path / "worker.log"

    @property
    def reserve(self) -> Path:
        """.reserve: room a job's worker keeps for its last words on a full disk."""
        return self.path / ".reserve"

    @property
    def rollouts(self) -> Path:
        """rollouts/: an RL run's groups of each step, one JSONL file a step."""
        return self.path / "rollouts"

    def rollout_file(self, step: int) -> Path:
        """The rollouts of RL step `step` (1-based)."""
        return self.rollouts / f"step_{step:06d}.jsonl"

    def rollout_files(self) -> dict[int, Path]:
        """Every step's rollouts file, by step."""
        found = self.rollouts.glob("step_*.jsonl")
        return {int(f.stem.removeprefix("step_")): f for f in found if f.stem[5:].isdigit()}

    def sample_buffer(self, step: int) -> Path:
        """buffer/step_NNNNNN.json: an asynchronous RL run's batches sampled ahead of its
        checkpoint at `step`, which a resume trains on (algorithms/rl_pipeline.py)."""
        return self.path / "buffer" / f"step_{step:06d}.json"

    def log_tail(self, lines: int = 40) -> str:
        """The worker log's last `lines`: what a failed or lost job shows as its context."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stage(self, name: str) -> RunDir:
        """The run directory of stage `name` of a run of several stages."""
        return RunDir(self.path / name)

    def checkpoint_records(self) -> list[CheckpointRecord]:
        """Every checkpoint saved, oldest first (a line torn by a crash is skipped)."""
        return [CheckpointRecord.model_validate(r) for r in read_jsonl(self.checkpoints)]

    def last_checkpoint(self) -> CheckpointRecord | None:
        """The newest checkpoint with a training state: where a resumed run starts."""
        return ([r for r in self.checkpoint_records() if r.state_path] or [None])[-1]

    def client_checkpoints(self, run_id: str) -> Path:
        """<run_id>/: a link to the checkpoints a Tinker SDK client's run keeps in the server's
        wire storage, so that they resolve from this directory as a local job's do."""
        return self.path / run_id

    def add_checkpoint(self, record: CheckpointRecord) -> None:
        """Append `record` to checkpoints.jsonl (fsynced: it survives a crash once written)."""
        append_jsonl(self.checkpoints, record.model_dump(exclude_none=True))


class MetricsLogger(Protocol):
    """What an algorithm reports to: metrics per step and free-form events."""

    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...

    def log_event(self, kind: str, payload: dict[str, Any]) -> None: ...


class RunLogger:
    """Appends metrics to `metrics.jsonl` in the run directory, flushing every line."""

    def __init__(self, run_dir: Path, echo: bool = False, echo_every: int = 10) -> None:
        self.run = RunDir(run_dir)
        self.run.path.mkdir(parents=True, exist_ok=True)
        self.echo = echo
        self.echo_every = echo_every  # print every Nth step, and every step with eval metrics

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        append_jsonl(self.run.metrics, {"step": step, "time": time.time(), **metrics})
        if self.echo and (
            step % self.echo_every == 0 or any(k.startswith("eval") for k in metrics)
        ):
            shown = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
            print(f"[thinker] step {step}: {shown}", flush=True)

    def log_event(self, kind: str, payload: dict[str, Any]) -> None:
        if self.echo:
            print(f"[thinker] {kind}: {json.dumps(payload)}", flush=True)

    def rewind(self, step: int, stage: str | None = None) -> int:
        """Supersede the metrics rows of `stage` after `step`: a run resumed from the
        checkpoint at `step` trains those steps again, and its curve must not hold both
        attempts. The file stays append-only (a marker row is appended); `read_metrics`
        leaves the superseded rows out. Returns how many rows were superseded."""
        path = self.run.metrics
        superseded = sum(
            1 for r in read_metrics(path) if r.get("stage") == stage and r.get("step", 0) > step
        )
        if superseded:
            tag = {"stage": stage} if stage else {}
            append_jsonl(path, {REWIND_KEY: step, "time": time.time(), **tag})
        return superseded


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl as the run's curves stand: rows a resumed attempt trained
    again (after a `rewind_to` marker's step, for its stage) are left out, markers too."""
    rows: list[dict[str, Any]] = []
    for row in read_jsonl(path):
        _fold_metrics(rows, row)
    return rows


def _fold_metrics(rows: list[dict[str, Any]], row: dict[str, Any]) -> None:
    """Add one metrics.jsonl line to `rows` (a rewind marker drops the rows it supersedes)."""
    if REWIND_KEY in row:
        stage, step = row.get("stage"), row[REWIND_KEY]
        rows[:] = [r for r in rows if r.get("stage") != stage or r.get("step", 0) <= step]
    else:
        rows.append(row)


class MetricsTail:
    """`read_metrics` of a growing metrics.jsonl, parsing only the lines added since the last
    call: a server that shows a long run's curves does not re-read the whole file per request.

    The file is append-only; one that got shorter (replaced) or went is read again from the
    start.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._tail = JsonlTail(self.path)
        self._rows: list[dict[str, Any]] = []

    def rows(self) -> list[dict[str, Any]]:
        """The curves' rows as `read_metrics` gives them (safe to call from several threads)."""
        with self._lock:
            try:
                shrank = self.path.stat().st_size < self._tail.offset
            except FileNotFoundError:
                shrank = True
            if shrank:
                self._tail, self._rows = JsonlTail(self.path), []
            for row in self._tail.read_new():
                _fold_metrics(self._rows, row)
            return list(self._rows)


def _fmt(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
