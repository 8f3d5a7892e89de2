"""The job manager: queue, scheduler, worker processes, and the watch on their run directories.

One asyncio task does everything, once per `poll_interval_s` (sooner when woken):
1. **Watch**: read the events each run directory gained (`events.jsonl`), apply them to the
   database (state, step, total steps, a model row per sampler checkpoint) and publish them
   to Socket.IO, under the hub's per-job lock (see server/events.py); record heartbeats.
2. **Reap**: a starting or running job whose worker is gone (exited, killed, or lost in a
   server restart) and that wrote no final state becomes interrupted (or cancelled / paused,
   if that was asked): resumable from its last checkpoint. A worker whose heartbeat is older
   than `heartbeat_timeout_s` is reported stale (a `heartbeat` event); older than
   `heartbeat_kill_s` (stopped, or hung) it is killed and reaped the same way.
3. **Schedule**: start queued jobs, highest priority first then oldest, while resources
   last: one job per GPU, `max_cpu_jobs` local jobs without a GPU, `max_remote_jobs` Tinker
   jobs. Each class is FIFO: a job that cannot start holds back the later ones of its class.

Every state change is a compare-and-set (`UPDATE ... WHERE state IN (...)`), so two actors
(a cancel request, the worker finishing) can never both win. Workers run in their own
session: a server that dies leaves them running, and the next server's first watch
reattaches to them (or, when they are gone, marks their jobs interrupted). A job the manager
cannot handle (an event the database refuses, a launch that raises) fails with the reason,
and the tick goes on with the other jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from thinker.algorithms.llm_judge import KEY_ENV as JUDGE_KEY_ENV
from thinker.algorithms.rlhf import STAGE_NAMES as RLHF_STAGES
from thinker.errors import ConfigError, ConflictError, NotFoundError
from thinker.files import is_disk_full, storage_error, write_json_atomically
from thinker.jobs.attached import NOT_RESUMABLE, RESTART_REASON, SERVER_RESOURCE, AttachedRun
from thinker.jobs.events import EventLogBusy, EventSink, EventTail, append_event
from thinker.jobs.executor import Executor, Launch, WorkerRef
from thinker.jobs.spec import DatasetRef, build_spec, config_problems
from thinker.jobs.start import (
    StartPoint,
    check_dataset_files,
    fit_problems,
    job_config,
    proposal_for,
    resolve_eval_models,
    resolve_review,
    resolve_start,
)
from thinker.jobs.states import ACTIVE_STATES, RESUMABLE_STATES, JobState
from thinker.runs import CheckpointRecord, MetricsTail, RunDir
from thinker.secrets import read_judge_key, read_secret
from thinker.settings import Settings
from thinker.store import Dataset, Job, Model, ReviewAnswer, new_id, now

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from thinker.pipeline.proposal import Proposal

log = logging.getLogger("thinker.jobs")
DATA_PARALLEL = ("sl", "dpo", "rl")  # the algorithms a job of gpus > 1 trains on several ranks

# For each state a worker (or the reaper) reports, the states it may replace.
_FROM: dict[str, tuple[JobState, ...]] = {
    JobState.RUNNING: (JobState.STARTING,),
    JobState.SUCCEEDED: ACTIVE_STATES,
    JobState.FAILED: ACTIVE_STATES,
    JobState.CANCELLED: ACTIVE_STATES,
    JobState.PAUSED: ACTIVE_STATES,
    JobState.INTERRUPTED: ACTIVE_STATES,
}
# A job a worker holds, or one that will get a worker without being asked: not deletable.
_NOT_DELETABLE = (JobState.QUEUED, *ACTIVE_STATES)
METRICS_TAILS = 32  # jobs whose parsed metrics are kept between reads (least recent go)
# How long the server waits for a job log's lock (a worker holds it for one write): a stopped
# or hung worker holds it until it dies, and the server appends in its event loop.
APPEND_WAIT_S = 0.2


def heartbeat_age(job: Job) -> float | None:
    """Seconds since a starting or running job's worker last touched its heartbeat (since it
    was started, before its first); None for a job in any other state."""
    last = job.heartbeat_at or job.started_at
    if job.state not in ACTIVE_STATES or last is None:
        return None
    return max(0.0, now() - last)


class JobManager:
    """The jobs of one data directory and database: created, scheduled, followed, stopped.

    Args:
        settings: The limits it schedules by and where the run directories are.
        sessions: The database.
        sink: Where the events it reads from run directories go (the Socket.IO hub).
        executor: What starts and stops the workers.
        dataset_path: Where a dataset's file is, by id (the dataset service knows).
        forget_models: Told the ids of models deleted with their job (loaded ones unload).
    """

    def __init__(
        self,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        sink: EventSink,
        executor: Executor,
        dataset_path: Callable[[str], Path],
        forget_models: Callable[[list[str]], None] = lambda ids: None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.sink = sink
        self.executor = executor
        self.dataset_path = dataset_path
        self.forget_models = forget_models
        # GPU jobs run at once: THINKER_GPUS, else the GPUs the executor has (this machine's,
        # or the Ray cluster's when the server starts)
        self.gpus = self.settings.gpus if self.settings.gpus is not None else executor.gpus()
        self._tails: dict[str, EventTail] = {}
        self._metrics: OrderedDict[str, MetricsTail] = OrderedDict()  # most recently read last
        self._dirty: set[str] = set()  # jobs whose events.jsonl the server itself appended to
        self._stale: set[str] = set()  # jobs reported stale (a `heartbeat` event said so)
        # The server's events a job's log could not take yet, in order: its lock was held by
        # a worker stopped or hung mid-write (events.py). Appended at the next tick they can be.
        self._pending: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._attached: dict[str, AttachedRun] = {}  # jobs trained in this process (attach)
        self._wake = asyncio.Event()
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ---- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        self._event_loop = asyncio.get_running_loop()
        await self.tick()  # reattach or mark interrupted before anything new starts
        self._task = asyncio.create_task(self._loop(), name="thinker-jobs")

    async def stop(self, stop_workers: bool = False) -> None:
        """Stop watching. Workers keep running (a restart reattaches) unless `stop_workers`."""
        if self._task is not None:
            # The flag as well as the cancel: on Python 3.11 `asyncio.wait_for` can swallow a
            # cancel that lands as the event it waits on is set (gh-86296), and the loop then
            # ran on with this await never returning (a test's shutdown hung).
            self._stopping = True
            self._wake.set()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if stop_workers:
            await asyncio.to_thread(self.executor.shutdown, 30)

    def wake(self) -> None:
        self._wake.set()

    def notify(self) -> None:
        """`wake`, from any thread (an attached run's client calls complete on the engine's)."""
        if self._event_loop is not None and not self._event_loop.is_closed():
            self._event_loop.call_soon_threadsafe(self._wake.set)

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                await self.tick()
            except Exception:  # keep watching: one bad run directory must not stop the rest
                log.exception("job manager tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.poll_interval_s)
            self._wake.clear()

    async def tick(self) -> None:
        for job_id in list(self._pending):
            self._flush_pending(job_id)
            self._dirty.add(job_id)
        await self._watch()
        await self._schedule()

    # ---- requests ---------------------------------------------------------------------
    def run_dir(self, job_id: str) -> RunDir:
        return RunDir(self.settings.runs_dir / job_id)

    async def create(
        self,
        name: str | None,
        algorithm: str,
        backend: str,
        base_model: str,
        dataset_id: str | None,
        config: dict[str, Any],
        priority: int = 0,
        idempotency_key: str | None = None,
        auto_resume: int = 2,
        gpus: int = 1,
        memory_gb: float | None = None,
    ) -> tuple[Job, bool]:
        """Validate and queue a job; returns it and whether it is new (False: the job an
        earlier request with the same Idempotency-Key created)."""
        if idempotency_key is not None:
            existing = await self._by_key(idempotency_key)
            if existing is not None:
                return existing, False
        if gpus > 1 and (backend != "local" or algorithm not in (*DATA_PARALLEL, "batch")):
            raise ConfigError(
                f"gpus: {gpus} trains a local {', '.join(DATA_PARALLEL[:-1])} or "
                f"{DATA_PARALLEL[-1]} job data-parallel (or spreads a batch job's actors); "
                f"a {backend} {algorithm} job runs as one process (gpus: 1)"
            )
        if gpus > 1 and algorithm == "rl" and config.get("max_steps_off_policy"):
            raise ConfigError(
                f"config.max_steps_off_policy: asynchronous RL runs as one process; with gpus: "
                f"{gpus} use 0 (each rank samples and trains in step with the others)"
            )
        if gpus > 1 and 0 < self.gpus < gpus:
            raise ConfigError(f"gpus: {gpus}, but this server has {self.gpus} GPU(s)")
        cores = os.cpu_count() or 1
        if gpus > cores and self.gpus == 0:  # CPU processes, one core each at least
            raise ConfigError(f"gpus: {gpus}: this server has no GPU and {cores} CPU core(s)")
        if backend == "tinker" and self._tinker_key() is None:
            raise ConfigError(
                "backend: tinker needs a Tinker API key; store one with PUT "
                "/api/settings/tinker-key (or set TINKER_API_KEY for the server)"
            )
        if algorithm == "eval":  # the base model first, then config.models, each resolved
            async with self.sessions() as session:
                start, config = await resolve_eval_models(
                    session, self.settings.runs_dir, base_model, config, backend
                )
            lookup, fit = await self._refs(), []
            check_dataset_files(algorithm, dataset_id, config, lookup)
        elif algorithm == "review":  # a library reward model's checkpoints score the pairs
            async with self.sessions() as session:
                start, config = await resolve_review(
                    session, self.settings.runs_dir, base_model, config, backend
                )
            lookup, fit = await self._refs(), []
            check_dataset_files(algorithm, dataset_id, config, lookup)
        elif algorithm == "batch":  # nothing trains: the settings are as given, none proposed
            async with self.sessions() as session:
                start = await resolve_start(session, self.settings.runs_dir, base_model, backend)
            lookup, fit = await self._refs(), []
            check_dataset_files(algorithm, dataset_id, config, lookup)
        else:
            start, proposal, lookup = await self.propose(
                algorithm, backend, base_model, dataset_id, config
            )
            config = job_config(algorithm, proposal, config)  # as given, the rest proposed
            fit = fit_problems(algorithm, proposal, config, start.facts)
        spec = build_spec(
            algorithm,
            backend,
            start.base_model,
            dataset_id,
            config,
            lookup,
            server_set=start.overrides(algorithm),
            problems=fit,
        )
        job_id = new_id("job")
        job = Job(
            id=job_id,
            name=await self._unique_name(name or await self._default_name(algorithm, dataset_id)),
            algorithm=algorithm,
            backend=backend,
            base_model=start.base_model,
            parent_model_id=start.parent.id if start.parent is not None else None,
            dataset_id=dataset_id,
            config=config,
            state=JobState.QUEUED,
            priority=priority,
            resource=self._resource(backend),
            idempotency_key=idempotency_key,
            auto_resume=auto_resume,
            gpus=gpus,
            memory_gb=memory_gb,
        )
        datasets = {k: {"id": r.id, "path": str(r.path)} for k, r in spec.datasets.items()}
        record = {
            "job_id": job_id,
            "name": job.name,
            "algorithm": algorithm,
            "section": spec.section,
            "datasets": datasets,
        }
        if start.parent is not None:
            record["start"] = {"model_id": start.parent.id, "sampler_path": start.sampler_path}
        run = self.run_dir(job_id)
        await asyncio.to_thread(self._make_run_dir, run, record)
        try:
            async with self.sessions() as session:
                session.add(job)
                await session.commit()
        except IntegrityError:  # the same Idempotency-Key, raced by a concurrent request
            shutil.rmtree(run.path, ignore_errors=True)
            existing = await self._by_key(idempotency_key or "")
            if existing is None:
                raise
            return existing, False
        except BaseException as e:
            shutil.rmtree(run.path, ignore_errors=True)  # no run directory without its job
            if isinstance(e, DBAPIError) and is_disk_full(e):
                raise storage_error(e, "storing the job", self.settings.data_dir) from e
            raise
        self._dirty.add(job_id)  # its `queued` event, published at the next tick
        self.wake()
        return job, True

    def _make_run_dir(
        self, run: RunDir, record: dict[str, Any], state: JobState = JobState.QUEUED
    ) -> None:
        """The new job's run directory: job.json (written whole, or not at all) and its first
        event. On a failure (a full disk) nothing of it is left.

        Raises:
            StorageError: The disk is full or not writable.
        """
        try:
            run.path.mkdir(parents=True)
            write_json_atomically(run.job, record)
            append_event(run.path, "state", {"state": state})
        except OSError as e:
            shutil.rmtree(run.path, ignore_errors=True)
            raise storage_error(e, "creating the job's run directory", run.path.parent) from e

    async def attach(
        self,
        job_id: str,
        run: AttachedRun,
        name: str,
        algorithm: str,
        base_model: str,
        config: dict[str, Any],
        created_by: str | None = None,
    ) -> Job:
        """A running job for a run this process trains for an outside client (jobs/attached.py):
        its row and run directory; the caller appends its metrics and events, and ends it
        with `end_attached`. `job_id`: a new id (`new_id("job")`)."""
        started = now()
        job = Job(
            id=job_id,
            name=await self._unique_name(name),
            algorithm=algorithm,
            backend="local",
            base_model=base_model,
            config=config,
            state=JobState.RUNNING,
            resource=SERVER_RESOURCE,
            started_at=started,
            heartbeat_at=started,
            attempts=1,
            created_by=created_by,
        )
        run_dir = self.run_dir(job_id)
        record = {"job_id": job_id, "name": job.name, "algorithm": algorithm, "attached": True}
        await asyncio.to_thread(self._make_run_dir, run_dir, record, JobState.RUNNING)
        self._attached[job_id] = run  # before the row: a tick never sees it unattached
        try:
            async with self.sessions() as session:
                session.add(job)
                await session.commit()
        except BaseException:
            self._attached.pop(job_id, None)
            shutil.rmtree(run_dir.path, ignore_errors=True)
            raise
        self._dirty.add(job_id)
        self.wake()
        return job

    def end_attached(self, job_id: str, state: JobState, reason: str) -> None:
        """End an attached job from its client's side (its session ended); any thread."""
        append_event(self.run_dir(job_id).path, "state", {"state": state, "reason": reason})
        self.notify()

    async def proposal(
        self,
        algorithm: str,
        backend: str,
        base_model: str,
        dataset_id: str | None,
        config: dict[str, Any],
    ) -> tuple[StartPoint, Proposal]:
        """The proposal for a job request whose own settings are valid (its datasets may not
        all be chosen yet).

        Raises:
            ConfigError: Every problem of the request's settings.
        """
        problems = config_problems(algorithm, backend, base_model, config)
        if problems:
            raise ConfigError("invalid job settings", problems)
        start, proposal, _ = await self.propose(algorithm, backend, base_model, dataset_id, config)
        return start, proposal

    async def propose(
        self,
        algorithm: str,
        backend: str,
        base_model: str,
        dataset_id: str | None,
        config: dict[str, Any],
    ) -> tuple[StartPoint, Proposal, Callable[[str], DatasetRef | None]]:
        """The job's start (its base model checked) and the settings proposed for it."""
        async with self.sessions() as session:
            start = await resolve_start(session, self.settings.runs_dir, base_model, backend)
        if start.parent is not None and algorithm == "rlhf":
            raise ConfigError(
                "base_model: rlhf starts from a base model (its SL stage makes the policy); "
                "continue a library model with sl, dpo or rl"
            )
        lookup = await self._refs()
        check_dataset_files(algorithm, dataset_id, config, lookup)
        return start, proposal_for(algorithm, start, dataset_id, config, lookup), lookup

    async def _default_name(self, algorithm: str, dataset_id: str | None) -> str:
        """`<dataset name>-<algorithm>`, as the wizard names its jobs."""
        async with self.sessions() as session:
            dataset = await session.get(Dataset, dataset_id) if dataset_id else None
        return f"{dataset.name if dataset is not None else 'job'}-{algorithm}"

    async def _unique_name(self, name: str) -> str:
        """`name`, or `name (2)`, `name (3)`, ... where a job already has it: model pickers
        list models by their job's name."""
        async with self.sessions() as session:
            query = select(Job.name).where(Job.name.startswith(name, autoescape=True))
            taken = set((await session.scalars(query)).all())
        n, candidate = 1, name
        while candidate in taken:
            n += 1
            candidate = f"{name} ({n})"
        return candidate

    async def cancel(self, job_id: str) -> Job:
        """Cancel a job: at once if nothing runs, else by stopping its worker."""
        direct = (JobState.QUEUED, JobState.PAUSED, JobState.INTERRUPTED)
        return await self._stop(job_id, "cancel", JobState.CANCELLED, direct)

    async def pause(self, job_id: str) -> Job:
        """Pause a job: its worker stops at once; resume continues from the last checkpoint
        (the steps after it are trained again)."""
        return await self._stop(job_id, "pause", JobState.PAUSED, (JobState.QUEUED,))

    async def resume(self, job_id: str) -> Job:
        """Queue a paused, interrupted or failed job again; it resumes from its last checkpoint."""
        job = await self.get(job_id)
        if job.resource == SERVER_RESOURCE:
            raise ConflictError(NOT_RESUMABLE)
        if not await self._requeue(job_id, RESUMABLE_STATES, {"resumed": True}):
            resumable = ", ".join(RESUMABLE_STATES)
            raise ConflictError(
                f"job {job_id} is {job.state}; only {resumable} jobs can be resumed"
            )
        return await self.get(job_id)

    async def _requeue(
        self, job_id: str, states: Iterable[JobState], event: dict[str, Any], **values: Any
    ) -> bool:
        """Queue a job in one of `states` again, to resume from its last checkpoint."""
        changed = await self._cas(
            job_id,
            tuple(states),
            JobState.QUEUED,
            reason=None,
            stop_request=None,
            log_tail=None,
            finished_at=None,
            pid=None,
            pid_start=None,
            retryable=None,
            report=None,
            **values,
        )
        if not changed:
            return False
        with contextlib.suppress(FileNotFoundError):
            self.run_dir(job_id).control.unlink()
        self._append(job_id, "state", {"state": JobState.QUEUED, **event})
        return True

    async def _auto_resume(self, job_id: str, reason: str) -> None:
        """A job interrupted by a lost worker or node, queued again while its auto_resume
        retries last; each retry is a `queued` event saying after what, and a log line."""
        job = await self.get(job_id)
        if job.resource == SERVER_RESOURCE or job.auto_resumes >= job.auto_resume:
            return
        retry = job.auto_resumes + 1
        event = {"resumed": True, "auto": {"retry": retry, "of": job.auto_resume, "after": reason}}
        if not await self._requeue(
            job_id, (JobState.INTERRUPTED,), event, auto_resumes=retry, placement=None
        ):
            return
        line = (
            f"[thinker] {reason}; resuming from the last checkpoint without being asked "
            f"(auto_resume: retry {retry} of {job.auto_resume})\n"
        )
        with contextlib.suppress(OSError), open(self.run_dir(job_id).log, "a") as log_file:
            log_file.write(line)
        log.warning("job %s: %s", job_id, line.strip())
        self.wake()

    async def delete(self, job_id: str) -> None:
        """Delete a job that is not running, with its run directory and its models."""
        job = await self.get(job_id)
        if job.state in _NOT_DELETABLE:
            raise ConflictError(f"job {job_id} is {job.state}; cancel it before deleting it")
        async with self.sessions() as session:
            models = (await session.scalars(select(Model.id).where(Model.job_id == job_id))).all()
            await session.execute(delete(Model).where(Model.job_id == job_id))
            await session.execute(delete(ReviewAnswer).where(ReviewAnswer.job_id == job_id))
            result = await session.execute(
                delete(Job).where(Job.id == job_id, Job.state.not_in(_NOT_DELETABLE))
            )
            await session.commit()
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise ConflictError(f"job {job_id} changed state while being deleted; try again")
        self._tails.pop(job_id, None)
        self._metrics.pop(job_id, None)
        self.forget_models(list(models))
        shutil.rmtree(self.run_dir(job_id).path, ignore_errors=True)

    async def get(self, job_id: str) -> Job:
        async with self.sessions() as session:
            job = await session.get(Job, job_id)
        if job is None:
            raise NotFoundError(f"no job with id {job_id!r}")
        return job

    async def counts(self) -> dict[str, int]:
        async with self.sessions() as session:
            rows = await session.execute(select(Job.state, func.count()).group_by(Job.state))
            return {state: n for state, n in rows.all()}

    async def _stop(
        self, job_id: str, request: str, state: JobState, direct: tuple[JobState, ...]
    ) -> Job:
        job = await self.get(job_id)
        if job.resource == SERVER_RESOURCE and job.state in ACTIVE_STATES:
            return await self._stop_attached(job, request)
        if await self._cas(
            job_id,
            direct,
            state,
            reason=f"{request} requested",
            finished_at=now() if state == JobState.CANCELLED else None,
        ):
            self._append(job_id, "state", {"state": state, "reason": f"{request} requested"})
            return await self.get(job_id)
        if not await self._cas(job_id, ACTIVE_STATES, None, stop_request=request):
            raise ConflictError(f"job {job_id} is {job.state}; it cannot be {state} now")
        self.run_dir(job_id).control.write_text(json.dumps({"stop": request}))
        job = await self.get(job_id)
        await asyncio.to_thread(self.executor.terminate, _worker(job))  # Ray: up to 2 s
        self.wake()
        return job

    async def _stop_attached(self, job: Job, request: str) -> Job:
        """Cancel an attached job: its client's pending and later calls fail, and it ends now."""
        if request != "cancel":
            raise ConflictError(NOT_RESUMABLE)
        if not await self._cas(job.id, ACTIVE_STATES, None, stop_request=request):
            raise ConflictError(f"job {job.id} is {job.state}; it cannot be cancelled now")
        reason = "stopped from the Thinker dashboard"
        run = self._attached.get(job.id)
        if run is not None:
            run.stop(f"this run was {reason} (job {job.id})")
        self._append(job.id, "state", {"state": JobState.CANCELLED, "reason": reason})
        await self._apply_new_events(job)
        return await self.get(job.id)

    async def _by_key(self, key: str) -> Job | None:
        async with self.sessions() as session:
            return await session.scalar(select(Job).where(Job.idempotency_key == key))

    async def _refs(self) -> Callable[[str], DatasetRef | None]:
        async with self.sessions() as session:
            rows = (await session.scalars(select(Dataset))).all()
        refs = {d.id: DatasetRef(d.id, d.kind, self.dataset_path(d.id), d.num_rows) for d in rows}
        return refs.get

    def _tinker_key(self) -> str | None:
        return read_secret(self.settings, "tinker_api_key") or os.environ.get("TINKER_API_KEY")

    def _resource(self, backend: str) -> str:
        if backend == "tinker":
            return "remote"
        return "gpu" if self.gpus > 0 else "cpu"

    async def _cas(
        self, job_id: str, expected: tuple[JobState, ...], state: JobState | None, **values: Any
    ) -> bool:
        """Set `state` (and `values`) only if the job is in one of `expected` states."""
        if state is not None:
            values["state"] = state
        values["updated_at"] = now()
        async with self.sessions() as session:
            result = await session.execute(
                update(Job).where(Job.id == job_id, Job.state.in_(expected)).values(**values)
            )
            await session.commit()
        return result.rowcount == 1  # type: ignore[attr-defined]

    def _append(self, job_id: str, kind: str, data: dict[str, Any]) -> None:
        """Append a server event to the job's log now, or at the next tick that can (after
        the events still waiting before it)."""
        run = self.run_dir(job_id)
        # A run directory removed under a live row (by hand, or a row restored without its
        # files) still gets the event that ends the job, so the row and the record agree.
        run.path.mkdir(parents=True, exist_ok=True)
        self._pending.setdefault(job_id, []).append((kind, data))
        self._flush_pending(job_id)
        self._dirty.add(job_id)
        self.wake()

    def _flush_pending(self, job_id: str) -> None:
        """Append the job's waiting server events in order, while its log's lock is free."""
        waiting = self._pending.get(job_id, [])
        while waiting:
            kind, data = waiting[0]
            try:
                append_event(self.run_dir(job_id).path, kind, data, wait_s=APPEND_WAIT_S)
            except EventLogBusy as e:
                log.warning("job %s: %s; its %s event waits for the next tick", job_id, e, kind)
                return
            waiting.pop(0)
        self._pending.pop(job_id, None)

    # ---- watch ------------------------------------------------------------------------
    async def _watch(self) -> None:
        async with self.sessions() as session:
            watched = (
                await session.scalars(
                    select(Job).where(Job.state.in_(ACTIVE_STATES) | Job.id.in_(self._dirty))
                )
            ).all()
        self._dirty.difference_update(j.id for j in watched)
        for job in watched:
            try:
                await self._apply_new_events(job)
                if job.state in ACTIVE_STATES:
                    await self._check_worker(job)
                else:
                    self._stale.discard(job.id)
                    self._attached.pop(job.id, None)
            except Exception as e:  # one job the manager cannot follow must not stop the rest
                log.exception("job %s: watching it failed", job.id)
                await self._fail(job, f"the server could not follow this job: {_first_line(e)}")
        # the workers of jobs that ended (failed by `_fail`, say) and have exited
        self.executor.reap(j.id for j in watched if j.state in ACTIVE_STATES)

    async def _fail(self, job: Job, reason: str) -> None:
        """Fail a job the manager cannot handle, and stop its worker if it has one."""
        failed = await self._cas(
            job.id,
            (JobState.QUEUED, *ACTIVE_STATES),
            JobState.FAILED,
            reason=reason,
            finished_at=now(),
            device=None,
            retryable=False,
        )
        if not failed:
            return
        with contextlib.suppress(OSError):  # the row says it; the event tells live clients
            self._append(job.id, "state", {"state": JobState.FAILED, "reason": reason})
        self.executor.terminate(_worker(job))

    async def _apply_new_events(self, job: Job) -> None:
        tail = self._tails.get(job.id)
        if tail is None:
            tail = self._tails[job.id] = EventTail(self.run_dir(job.id).events)
        sink = self.sink
        async with sink.lock(job.id):
            events = [e for e in tail.read_new() if e["seq"] > job.last_seq]
            if not events:
                sink.mark_published(job.id, job.last_seq)
                return
            async with self.sessions() as session:
                row = await session.get(Job, job.id)
                if row is None:
                    return
                for event in events:
                    await self._apply(session, row, event)
                row.last_seq = events[-1]["seq"]
                await session.commit()
                job.state, job.last_seq = row.state, row.last_seq
                snapshot = _snapshot(row)
            await sink.publish(job.id, events, snapshot)

    async def _apply(self, session: Any, job: Job, event: dict[str, Any]) -> None:
        kind, data = event["type"], event.get("data") or {}
        if kind == "state":
            self._apply_state(job, data)
        elif kind == "plan":
            total = data.get("total_steps")
            job.total_steps = None if total is None else _count(data, "total_steps", 0)
            job.step = _count(data, "start_step", job.step)
        elif kind == "metrics":
            job.step = max(job.step, _count(data, "step", 0))
        elif kind == "checkpoint" and data.get("sampler_path"):
            await self._add_model(session, job, data)
        elif kind == "report":
            job.report = data

    def _apply_state(self, job: Job, data: dict[str, Any]) -> None:
        state = data.get("state")
        if state not in _FROM or job.state not in _FROM[state]:
            return  # the server's own transitions (already in the row), or a lost race
        job.state = state
        if state == JobState.RUNNING:
            job.pid = data.get("pid", job.pid)
            return
        job.reason = data.get("reason")
        job.log_tail = data.get("log_tail")
        job.device = None
        job.finished_at = now()
        if state == JobState.SUCCEEDED:
            job.step = _count(data, "steps", job.step)
        if state == JobState.FAILED:
            job.retryable = data.get("retryable")

    async def _add_model(self, session: Any, job: Job, data: dict[str, Any]) -> None:
        path = str(data["sampler_path"])
        exists = await session.scalar(
            select(Model.id).where(Model.job_id == job.id, Model.sampler_path == path)
        )
        if exists is not None:
            return
        step, stage = _count(data, "step", 0), data.get("stage")
        # an rm job's models are reward models, as an rlhf job's rm stage makes (its metrics
        # are the run's own, not a stage's)
        kind = "rm" if job.algorithm == "rm" else stage
        label = f"{job.name}/{stage}" if stage else job.name
        session.add(
            Model(
                id=new_id("mdl"),
                name=f"{label}@{step}",
                job_id=job.id,
                dataset_id=job.dataset_id,
                base_model=job.base_model,
                backend=job.backend,
                step=step,
                stage=kind,
                sampler_path=path,
                state_path=data.get("state_path"),
                metrics=self._metrics_at(job.id, step, stage),
            )
        )

    def stage_runs(self, job: Job) -> list[tuple[str | None, RunDir]]:
        """The run directories the job's training writes: its own, or one per RLHF stage."""
        run = self.run_dir(job.id)
        if job.algorithm == "rlhf":
            return [(name, run.stage(name)) for name in RLHF_STAGES]
        return [(None, run)]

    def checkpoints(self, job: Job) -> list[tuple[str | None, CheckpointRecord]]:
        """Every checkpoint the job saved, with the stage that saved it (rlhf)."""
        return [
            (stage, record)
            for stage, run in self.stage_runs(job)
            for record in run.checkpoint_records()
        ]

    def rollout_files(self, job: Job) -> dict[int, Path]:
        """The job's RL rollouts by step (rlhf: its RL stage's)."""
        return self.stage_runs(job)[-1][1].rollout_files()

    def metrics(self, job_id: str) -> MetricsTail:
        """The reader of the job's metrics.jsonl (`.rows()`: its curves as they stand). The
        `METRICS_TAILS` most recently read jobs keep theirs, which parse only new lines."""
        tail = self._metrics.pop(job_id, None) or MetricsTail(self.run_dir(job_id).metrics)
        self._metrics[job_id] = tail
        while len(self._metrics) > METRICS_TAILS:
            self._metrics.popitem(last=False)
        return tail

    def _metrics_at(self, job_id: str, step: int, stage: str | None) -> dict[str, Any]:
        """The metrics logged at `step` (every key's latest value up to it) for a model row."""
        merged: dict[str, Any] = {}
        for row in self.metrics(job_id).rows():
            if row.get("stage") == stage and row.get("step", 0) <= step:
                merged.update({k: v for k, v in row.items() if k not in ("time", "stage")})
        return merged

    async def _check_worker(self, job: Job) -> None:
        if job.resource == SERVER_RESOURCE:
            await self._check_attached(job)
            return
        alive, code = self.executor.poll(_worker(job))
        if alive:
            if job.placement is None:
                await self._record_placement(job)
            await self._heartbeat(job, self.run_dir(job.id))
            await self._check_silence(job)
            return
        await self._apply_new_events(job)  # what it wrote before it went
        if job.state not in ACTIVE_STATES:
            return
        how = f"exited with code {code}" if code is not None else "is no longer running"
        await self._end_lost(job, f"the worker (pid {job.pid}) {how} before the job finished")

    async def _record_placement(self, job: Job) -> None:
        """Where this attempt's worker runs, once its executor has written it: on the row
        (the job page) and as a `placement` event (each attempt's, in the job's history)."""
        try:
            placement = json.loads(self.run_dir(job.id).placement.read_text("utf-8"))
        except (FileNotFoundError, ValueError):
            return  # not yet (a Ray actor still being placed)
        if await self._cas(job.id, ACTIVE_STATES, None, placement=placement):
            job.placement = placement
            self._append(job.id, "placement", {**placement, "attempt": job.attempts})

    async def _check_attached(self, job: Job) -> None:
        """An attached job's client heartbeat, as a worker's; without its handle (a restart
        lost the engine's state) the job is interrupted."""
        run = self._attached.get(job.id)
        if run is None:
            await self._end_lost(job, RESTART_REASON)
            return
        beat = run.last_seen()
        if job.heartbeat_at is None or beat - job.heartbeat_at >= 1.0:
            await self._cas(job.id, ACTIVE_STATES, None, heartbeat_at=beat)
            job.heartbeat_at = beat
        # Reported stale only: the wire ends a session whose heartbeats stop.
        self._report_stale(job, max(0.0, now() - beat))

    async def _end_lost(self, job: Job, reason: str) -> None:
        """A job whose worker is gone: interrupted (cancelled or paused if that was asked)."""
        self._stale.discard(job.id)
        fresh = await self.get(job.id)
        stopped = {"cancel": JobState.CANCELLED, "pause": JobState.PAUSED}
        state = stopped.get(fresh.stop_request or "", JobState.INTERRUPTED)
        tail = self.run_dir(job.id).log_tail()
        self._append(job.id, "state", {"state": state, "reason": reason, "log_tail": tail})
        await self._apply_new_events(job)
        if state == JobState.INTERRUPTED:
            await self._auto_resume(job.id, reason)

    async def _check_silence(self, job: Job) -> None:
        """Report a worker silent past heartbeat_timeout_s as stale (and again when it beats);
        past heartbeat_kill_s, kill it and end its job as interrupted, freeing its slot."""
        silent = heartbeat_age(job)
        if silent is None:
            return
        if silent >= self.settings.heartbeat_kill_s:
            await self._kill_silent(job, silent)
            return
        self._report_stale(job, silent)

    def _report_stale(self, job: Job, silent: float) -> None:
        stale = silent >= self.settings.heartbeat_timeout_s
        if stale != (job.id in self._stale):
            (self._stale.add if stale else self._stale.discard)(job.id)
            data = {"stale": stale, "silent_s": round(silent, 1)}
            self._append(job.id, "heartbeat", data)

    async def _kill_silent(self, job: Job, silent: float) -> None:
        await asyncio.to_thread(self.executor.kill, _worker(job))
        pid = job.pid
        limit = self.settings.heartbeat_kill_s
        reason = (
            f"the worker (pid {pid}) sent no heartbeat for {silent:.0f} s (heartbeat_kill_s is "
            f"{limit:g} s): it was stopped or hung, and was killed; resume continues from the "
            "last checkpoint"
        )
        log.warning("job %s: %s", job.id, reason)
        await self._end_lost(job, reason)

    async def _heartbeat(self, job: Job, run: RunDir) -> None:
        try:
            beat = run.heartbeat.stat().st_mtime
        except FileNotFoundError:
            return
        if job.heartbeat_at is None or beat - job.heartbeat_at >= 1.0:
            await self._cas(job.id, ACTIVE_STATES, None, heartbeat_at=beat)
            job.heartbeat_at = beat

    # ---- schedule ---------------------------------------------------------------------
    async def _schedule(self) -> None:
        async with self.sessions() as session:
            queued = (
                await session.scalars(
                    select(Job)
                    .where(Job.state == JobState.QUEUED)
                    .order_by(Job.priority.desc(), Job.created_at, Job.id)
                )
            ).all()
            if not queued:
                return
            active = (await session.scalars(select(Job).where(Job.state.in_(ACTIVE_STATES)))).all()
        busy = {d for j in active if j.device for d in _devices(j.device)}
        running = Counter(j.resource for j in active)
        limits = {"cpu": self.settings.max_cpu_jobs, "remote": self.settings.max_remote_jobs}
        held_back: set[str] = set()
        for job in queued:
            if job.resource in held_back:
                continue
            device = None
            if job.resource == "gpu":
                free = [str(i) for i in range(self.gpus) if str(i) not in busy]
                if len(free) < job.gpus:
                    held_back.add("gpu")  # strict order: it waits for its GPUs, none jumps it
                    continue
                device = "cuda:" + ",".join(free[: job.gpus])
            elif running[job.resource] >= limits.get(job.resource, 1):
                held_back.add(job.resource)
                continue
            try:
                launched = await self._launch(job, device)
            except Exception as e:  # one job that cannot start must not hold back the rest
                log.exception("job %s: starting it failed", job.id)
                await self._fail(job, f"the server could not start this job: {_first_line(e)}")
                continue
            if launched:
                running[job.resource] += 1
                busy.update(_devices(device))

    async def _launch(self, job: Job, device: str | None) -> bool:
        started = await self._cas(
            job.id,
            (JobState.QUEUED,),
            JobState.STARTING,
            device=device,
            started_at=now(),
            attempts=job.attempts + 1,
            stop_request=None,
            heartbeat_at=None,
            placement=None,
        )
        if not started:
            return False
        with contextlib.suppress(FileNotFoundError):  # the last attempt's
            self.run_dir(job.id).placement.unlink()
        self._append(
            job.id,
            "state",
            {"state": JobState.STARTING, "device": device, "attempt": job.attempts + 1},
        )
        key = self._tinker_key() if job.backend == "tinker" else None
        env = compile_cache_env(self.settings)
        if key:
            env["TINKER_API_KEY"] = key
        scorer = (job.config or {}).get("scorer") if job.algorithm == "eval" else None
        if isinstance(scorer, dict) and scorer.get("judge_url"):  # an external judge's key,
            stored = read_judge_key(self.settings)  # only for the endpoint it was stored for
            judge_key = stored.for_url(str(scorer["judge_url"])) if stored else None
            if judge_key:
                env[JUDGE_KEY_ENV] = judge_key
        memory = int(job.memory_gb * 2**30) if job.memory_gb else None
        launch = Launch(
            job.id,
            self.run_dir(job.id).path,
            job.resource,
            device,
            env=env,
            # one rank a GPU; a batch job's one worker spreads its actors over its GPUs
            processes=job.gpus if job.algorithm in DATA_PARALLEL else 1,
            memory_bytes=memory,
        )
        try:
            # off the loop: the first CPU job may wait for the warm starter's imports
            worker = await asyncio.to_thread(self.executor.launch, launch)
        except OSError as e:
            self._append(
                job.id,
                "state",
                {"state": JobState.FAILED, "reason": f"could not start the worker: {e}"},
            )
            await self._cas(
                job.id,
                (JobState.STARTING,),
                JobState.FAILED,
                finished_at=now(),
                reason=f"could not start the worker: {e}",
                device=None,
            )
            return False
        await self._cas(job.id, ACTIVE_STATES, None, pid=worker.pid, pid_start=worker.pid_start)
        return True


def compile_cache_env(settings: Settings) -> dict[str, str]:
    """A worker's torch.compile cache in the data directory (Inductor keeps Triton's kernels
    under it too), unless the server's environment names one."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return {}
    return {"TORCHINDUCTOR_CACHE_DIR": str(settings.compile_cache_dir)}


def _worker(job: Job) -> WorkerRef:
    return WorkerRef(job.id, job.pid, job.pid_start)


def _count(data: Mapping[str, Any], key: str, default: int) -> int:
    """A step count from a worker's event, checked to fit the database's 64-bit integers.

    JSON readers turn an integer beyond 64 bits into a float; storing one would leave a row
    that every later read of the job fails on.
    """
    value = data.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError(f"its event's {key} ({value!r}) is not a step count")
    return value


def _devices(device: str | None) -> list[str]:
    """The GPU indices of a job's device, "cuda:0,1" -> ["0", "1"]."""
    if not device:
        return []
    return device.removeprefix("cuda:").split(",")


def _first_line(error: BaseException) -> str:
    """`Type: message`, its first line only (a database error goes on with the statement)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _snapshot(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "name": job.name,
        "state": job.state,
        "reason": job.reason,
        "step": job.step,
        "total_steps": job.total_steps,
        "last_seq": job.last_seq,
    }
