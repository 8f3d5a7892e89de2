"""A Tinker SDK training client as a platform run: its job, its metrics, its checkpoints.

Each training client the wire creates (services/tinker_wire.py) opens a job (algorithm
`tinker_sdk`, trained on the server's own engine: jobs/attached.py) and writes its run
directory as a worker writes a job's, so the job manager, the live events, the dashboard and
the model library take it as they take any job:
- an `optim_step` ends a step (step n = the client's n-th optimizer step): its metrics row and
  `metrics` event hold what the step's `forward_backward` calls returned (`:sum` metrics
  summed, the others averaged), the trained tokens (the weights' sum, else the target tokens),
  the mean NLL per trained token for a weighted cross-entropy, the learning rate of its
  AdamParams, the optimizer's own metrics, and the step's engine time and tokens/s (from the
  step's first forward_backward starting, or the previous step's end if later, to its end);
- `save_state` and `save_weights_for_sampler` append checkpoints; a sampler checkpoint becomes
  a library model with its lineage. The client's checkpoints stay in the wire's storage (where
  the SDK's RestClient finds them); the run directory links to them (`RunDir.client_checkpoints`)
  so that they resolve from it as a local job's do.
The job ends when the client's session does, or when it is cancelled from the dashboard.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinker import types

from thinker.engine.local import checkpoints
from thinker.engine.local.training import LocalTrainingClient
from thinker.jobs.attached import SDK_ALGORITHM
from thinker.jobs.events import append_event
from thinker.jobs.manager import JobManager
from thinker.jobs.states import JobState
from thinker.runs import CheckpointRecord, RunDir, RunLogger
from thinker.services.tokens import token_name
from thinker.store import new_id

OPEN_TIMEOUT_S = 60.0  # opening the job (a database write) from an engine thread
log = logging.getLogger("thinker.sdk_runs")


@dataclass(frozen=True)
class Batch:
    """What one `forward_backward` trained, for its step's metrics."""

    sequences: int
    tokens: float  # trained tokens: the sum of the weights, else the number of targets
    weighted: bool  # a cross-entropy with weights: loss:sum / tokens is the mean NLL


def batch_of(data: list[types.Datum], loss_fn: str) -> Batch:
    tokens = 0.0
    for datum in data:
        inputs = datum.loss_fn_inputs
        if "weights" in inputs:
            tokens += float(sum(inputs["weights"].tolist()))
        elif "target_tokens" in inputs:
            tokens += len(inputs["target_tokens"].tolist())
        else:
            tokens += datum.model_input.length
    weighted = loss_fn == "cross_entropy" and all("weights" in d.loss_fn_inputs for d in data)
    return Batch(len(data), tokens, weighted)


def step_metrics(
    batches: list[tuple[Batch, dict[str, float]]],
    learning_rate: float | None,
    optimizer: dict[str, float],
    seconds: float | None,
) -> dict[str, float]:
    """One step's metrics row: see the module's docstring."""
    returned: dict[str, list[float]] = {}
    for _, metrics in batches:
        for key, value in metrics.items():
            returned.setdefault(key, []).append(float(value))
    row = {k: sum(v) if k.endswith(":sum") else sum(v) / len(v) for k, v in returned.items()}
    tokens = sum(b.tokens for b, _ in batches)
    if batches:
        row["num_sequences"] = float(sum(b.sequences for b, _ in batches))
        row["num_tokens"] = tokens
        if "loss:sum" in row and tokens > 0 and all(b.weighted for b, _ in batches):
            row["train_mean_nll"] = row["loss:sum"] / tokens
    if learning_rate is not None:  # every optimizer the SDK names has one
        row["learning_rate"] = float(learning_rate)
    row |= {k: float(v) for k, v in optimizer.items()}
    if seconds is not None and seconds > 0:
        row["step_time_s"] = seconds
        if tokens > 0:
            row["train_tokens_per_s"] = tokens / seconds
    return row


class SdkRun:
    """One training client's job; the job manager's `AttachedRun` for it.

    Its methods are called from the engine's threads as the client's requests finish (in the
    order the client numbered them); a lock keeps the rows in step order.
    """

    def __init__(
        self,
        job_id: str,
        run: RunDir,
        jobs: JobManager,
        stop: Callable[[str], None],
        last_seen: Callable[[], float],
    ) -> None:
        self.job_id = job_id
        self.run = run
        self._jobs = jobs
        self._stop = stop
        self._last_seen = last_seen
        self._logger: RunLogger | None = None  # made once the job's run directory is
        self._lock = threading.Lock()
        self.step = 0  # optimizer steps done
        self.ended = False
        self._batches: list[tuple[Batch, dict[str, float]]] = []
        self._step_began: float | None = None
        self._last_step_end: float | None = None

    # ---- the job manager's handle ----------------------------------------------------------
    def last_seen(self) -> float:
        return self._last_seen()

    def stop(self, reason: str) -> None:
        """Cancelled from the dashboard: the manager ends the job; the client's calls fail."""
        with self._lock:
            self.ended = True
        self._stop(reason)

    # ---- what the client's requests add -------------------------------------------------
    def began(self) -> None:
        """A forward_backward starts on the engine: the step's time runs from the first."""
        with self._lock:
            if self._step_began is None:
                self._step_began = time.monotonic()

    def forward_backward(self, batch: Batch, output: types.ForwardBackwardOutput) -> None:
        with self._lock:
            self._batches.append((batch, {k: float(v) for k, v in output.metrics.items()}))

    def optim_step(self, learning_rate: float | None, output: types.OptimStepResponse) -> None:
        """End the step: its metrics row and event."""
        with self._lock:
            ended = time.monotonic()
            starts = [t for t in (self._step_began, self._last_step_end) if t is not None]
            seconds = ended - max(starts) if self._step_began is not None else None
            self.step += 1
            metrics = step_metrics(self._batches, learning_rate, output.metrics or {}, seconds)
            self._batches, self._step_began, self._last_step_end = [], None, ended
            if self._logger is None:
                self._logger = RunLogger(self.run.path)
            self._logger.log_metrics(metrics, self.step)
            append_event(self.run.path, "metrics", {"step": self.step, "metrics": metrics})
        self._jobs.notify()

    def checkpoint(self, path: str, sampler: bool) -> None:
        """A saved training state (`sampler` False) or sampler weights, at the current step."""
        with self._lock:
            record = CheckpointRecord(
                name=checkpoints.parse(path).name,
                step=self.step,
                state_path=None if sampler else path,
                sampler_path=path if sampler else None,
                time=time.time(),
            )
            self.run.add_checkpoint(record)
            append_event(self.run.path, "checkpoint", record.model_dump(exclude_none=True))
        self._jobs.notify()

    def end(self, state: JobState, reason: str) -> None:
        """The client's session ended: so does the job (once)."""
        with self._lock:
            if self.ended:
                return
            self.ended = True
        self._jobs.end_attached(self.job_id, state, reason)


class SdkRuns:
    """Opens the job of each training client the wire creates.

    Args:
        jobs: The job manager (it follows the jobs, publishes their events, ends them).
        loop: The server's event loop: jobs are opened there, from the engine's threads.
        storage_dir: The wire engine's checkpoint storage.
    """

    def __init__(
        self, jobs: JobManager, loop: asyncio.AbstractEventLoop, storage_dir: Path
    ) -> None:
        self.jobs = jobs
        self.loop = loop
        self.storage_dir = storage_dir

    def open(
        self,
        client: LocalTrainingClient,
        config: dict[str, Any],
        name: str,
        token_id: str | None,
        stop: Callable[[str], None],
        last_seen: Callable[[], float],
    ) -> SdkRun:
        """The client's new running job (blocking: call it from an engine thread).

        Raises:
            RuntimeError: Called on the event loop's own thread (it would wait on itself).
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise RuntimeError("SdkRuns.open waits on the event loop: call it from a thread")
        opening = self._open(client, config, name, token_id, stop, last_seen)
        return asyncio.run_coroutine_threadsafe(opening, self.loop).result(OPEN_TIMEOUT_S)

    async def _open(
        self,
        client: LocalTrainingClient,
        config: dict[str, Any],
        name: str,
        token_id: str | None,
        stop: Callable[[str], None],
        last_seen: Callable[[], float],
    ) -> SdkRun:
        creator = await token_name(self.jobs.sessions, token_id) if token_id else None
        spec = client.spec
        job_id = new_id("job")
        run = SdkRun(job_id, self.jobs.run_dir(job_id), self.jobs, stop, last_seen)
        full_config = {
            **config,
            "tinker_run_id": client.run_id,
            "lora_rank": spec.rank,
            "seed": spec.seed,
            "train_mlp": spec.train_mlp,
            "train_attn": spec.train_attn,
            "train_unembed": spec.train_unembed,
        }
        await self.jobs.attach(
            job_id, run, name, SDK_ALGORITHM, spec.base_model, full_config, creator
        )
        link = run.run.client_checkpoints(client.run_id)
        target = self.storage_dir / client.run_id
        try:
            await asyncio.to_thread(os.symlink, os.path.relpath(target, link.parent), link)
        except OSError as e:
            run.end(JobState.FAILED, f"could not link the client's checkpoints into the run: {e}")
            raise
        return run
