"""Deployments and the production loop: a served name for /v1, its opt-in traffic log, feedback
on that traffic, and scheduled retraining that replaces the served model only when the new one
wins an A/B.

A deployment is a name `/v1/chat/completions` serves (`"model": "assistant"`), pointing at a
library model. Opted in (`log_traffic`), each completion is appended to
`<data dir>/deployments/<name>/traffic.jsonl` (its id, time, the conversation and the answer,
passed through the `redact` hook first), and `POST /api/deployments/{name}/feedback` appends
a thumbs up or down, with an optional correction, to `feedback.jsonl` beside it. Lines older
than `retention_days` are deleted at every tick.

A cycle (when the cron `schedule` is due, or asked for) turns the feedback since the last
cycle into training rows: a correction of an answer becomes a preference pair (the correction
chosen over the answer), and then the cycle trains DPO on the pairs; with no correction, each
thumbs-up answer becomes a chat row and the cycle trains SL on them; a thumbs down without a
correction says what is wrong but not what is right, and is not trained on. Fewer rows than
`min_feedback`: the cycle is skipped (recorded). Else the rows become the next version of the
deployment's feedback dataset, a learn job (services/learning.py) trains the candidate from
the served model, and the promotion gate runs an eval job on `eval_dataset_id`: the served
model (A) against the candidate (B). The candidate replaces the served model only when the
gate finds it significantly better (p < 0.05, win rate over one half); otherwise it is refused
and the served model stays. `POST /api/deployments/{name}/promote` runs the same gate for any
library model. Every outcome is appended to the deployment's `history`, which the dashboard
shows.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import re
import shutil
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from croniter import croniter
from sqlalchemy import select

from thinker.errors import ConfigError, NotFoundError
from thinker.files import append_jsonl, read_jsonl, write_jsonl_atomically
from thinker.jobs.manager import JobManager
from thinker.jobs.states import JobState
from thinker.services import evaluations, learning
from thinker.services.datasets import DatasetService, Edit
from thinker.store import Dataset, Deployment, Job, Model

log = logging.getLogger(__name__)
TRAFFIC = "traffic.jsonl"
FEEDBACK = "feedback.jsonl"
DAY_S = 86_400.0
PURGE_EVERY_S = 600.0  # retention is in days: the files are read for it every 10 minutes
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+?\d[\d ().-]{7,}\d")
_LONG_NUMBER = re.compile(r"\b\d{9,}\b")


def redact_pii(text: str) -> str:
    """The built-in hook ("pii"): e-mail addresses, phone numbers and long digit runs (card
    and account numbers) masked. A first pass, not a guarantee: names and addresses stay."""
    text = _EMAIL.sub("[email]", text)
    text = _PHONE.sub("[phone]", text)
    return _LONG_NUMBER.sub("[number]", text)


def redactor(spec: str | None) -> Callable[[str], str]:
    """The redaction hook a deployment names: None (none), "pii", or "module:function" (a
    function of the text importable by the server: trusted code, run in the server process).

    Raises:
        ConfigError: a function that cannot be imported.
    """
    if spec is None:
        return lambda text: text
    if spec == "pii":
        return redact_pii
    module, _, name = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(f"redact: cannot import {spec!r} ({e})") from None
    if not callable(function):
        raise ConfigError(f"redact: {spec!r} is not a function")
    return function  # type: ignore[no-any-return]


def next_time(schedule: str, after: float) -> float:
    """The first time the cron `schedule` fires after `after` (UTC epoch seconds).

    Raises:
        ConfigError: not a cron expression.
    """
    if not croniter.is_valid(schedule):
        raise ConfigError(f"schedule: {schedule!r} is not a cron expression (e.g. '0 3 * * *')")
    start = datetime.fromtimestamp(after, UTC)
    return float(croniter(schedule, start).get_next(float))


class Deployments:
    """The deployments' files and their production loop (`tick`, from the server's loop)."""

    def __init__(
        self, root: Path, sessions: Any, jobs: JobManager, datasets: DatasetService
    ) -> None:
        self.root = root
        self.sessions = sessions
        self.jobs = jobs
        self.datasets = datasets
        self.clock: Callable[[], float] = time.time  # the loop's time (tests move it)
        self._lock = asyncio.Lock()  # one cycle step at a time: the loop's, or a request's
        self._purged: dict[str, float] = {}  # by deployment: when its files were last purged

    def directory(self, name: str) -> Path:
        return self.root / name

    def forget(self, name: str) -> None:
        """Delete a deployment's logged traffic and feedback."""
        shutil.rmtree(self.directory(name), ignore_errors=True)
        self._purged.pop(name, None)

    def counts(self, name: str) -> tuple[int, int]:
        """Logged completions and feedback lines kept (lines counted, not parsed)."""
        found = []
        for file in (TRAFFIC, FEEDBACK):
            try:
                found.append((self.directory(name) / file).read_bytes().count(b"\n"))
            except FileNotFoundError:
                found.append(0)
        return found[0], found[1]

    async def serving(self, name: str) -> Deployment | None:
        """The deployment of that name, if /v1's `model` names one."""
        async with self.sessions() as session:
            return await session.get(Deployment, name)  # type: ignore[no-any-return]

    async def run(self, interval_s: float) -> None:
        """The loop: a tick every `interval_s`, until cancelled; a failed tick is logged."""
        while True:
            try:
                await self.tick()
            except Exception:  # keep going: one bad deployment must not stop the rest
                log.exception("deployments tick failed")
            await asyncio.sleep(interval_s)

    # ---- traffic and feedback -------------------------------------------------------------
    def log_completion(
        self,
        deployment: Deployment,
        completion_id: str,
        messages: list[dict[str, str]],
        answer: str,
        model: str,
    ) -> None:
        """Append one completion to the traffic log when the deployment opted in."""
        if not deployment.log_traffic:
            return
        redact = redactor(deployment.redact)
        directory = self.directory(deployment.name)
        directory.mkdir(parents=True, exist_ok=True)
        record = {
            "id": completion_id,
            "at": self.clock(),
            "model_id": model,
            "messages": [{"role": m["role"], "content": redact(m["content"])} for m in messages],
            "answer": redact(answer),
        }
        append_jsonl(directory / TRAFFIC, record)

    def add_feedback(
        self, deployment: Deployment, completion_id: str, rating: str, correction: str | None
    ) -> dict[str, Any]:
        """Record a thumbs up or down on a logged completion (and its correction, if any).

        Raises:
            NotFoundError: no such completion in the log (not logged, or past retention).
        """
        directory = self.directory(deployment.name)
        logged = {r["id"] for r in read_jsonl(directory / TRAFFIC)}
        if completion_id not in logged:
            raise NotFoundError(
                f"no logged completion {completion_id!r} in deployment {deployment.name} (only "
                "completions of a deployment with log_traffic, within its retention, take "
                "feedback)"
            )
        record = {"id": completion_id, "at": self.clock(), "rating": rating}
        if correction is not None:
            record["correction"] = redactor(deployment.redact)(correction)
        append_jsonl(directory / FEEDBACK, record)
        return record

    def traffic_page(
        self, deployment: Deployment, offset: int = 0, limit: int = 50
    ) -> tuple[int, list[dict[str, Any]]]:
        """The logged completions, newest first: how many, and one page of them, each with
        its latest feedback (`rating` and `correction`, None where none came)."""
        directory = self.directory(deployment.name)
        feedback = {r["id"]: r for r in read_jsonl(directory / FEEDBACK)}  # the latest wins
        rows = read_jsonl(directory / TRAFFIC)[::-1]
        page = []
        for row in rows[offset : offset + limit]:
            rated = feedback.get(row["id"], {})
            page.append(
                {**row, "rating": rated.get("rating"), "correction": rated.get("correction")}
            )
        return len(rows), page

    def purge(self, deployment: Deployment) -> int:
        """Delete the traffic and feedback lines older than the retention; how many. The
        oldest feedback lines are the ones cycles used first: the count of used lines drops
        by the used ones deleted."""
        cutoff = self.clock() - deployment.retention_days * DAY_S
        removed = 0
        for name in (TRAFFIC, FEEDBACK):
            path = self.directory(deployment.name) / name
            rows = read_jsonl(path)
            kept = [r for r in rows if r.get("at", 0) >= cutoff]
            if len(kept) == len(rows):
                continue
            write_jsonl_atomically(path, kept)
            removed += len(rows) - len(kept)
            if name == FEEDBACK:
                gone = len(rows) - len(kept)
                deployment.feedback_used = max(0, deployment.feedback_used - gone)
        return removed

    def training_rows(self, deployment: Deployment) -> tuple[str, list[dict[str, Any]], int]:
        """The feedback since the last cycle as rows: ("preferences", pairs) when any
        correction came, else ("chat", thumbs-up answers); and the feedback lines read."""
        directory = self.directory(deployment.name)
        feedback = read_jsonl(directory / FEEDBACK)
        new = feedback[deployment.feedback_used :]
        traffic = {r["id"]: r for r in read_jsonl(directory / TRAFFIC)}
        pairs, chats = [], []
        for item in new:
            logged = traffic.get(item["id"])
            if logged is None:
                continue
            if item.get("correction") and item["correction"].strip() != logged["answer"].strip():
                pairs.append(
                    {
                        "messages": logged["messages"],
                        "chosen": [{"role": "assistant", "content": item["correction"]}],
                        "rejected": [{"role": "assistant", "content": logged["answer"]}],
                    }
                )
            elif item["rating"] == "up":
                reply = {"role": "assistant", "content": logged["answer"]}
                chats.append({"messages": [*logged["messages"], reply]})
        if pairs:
            return "preferences", pairs, len(feedback)
        return "chat", chats, len(feedback)

    # ---- the loop -------------------------------------------------------------------------
    async def tick(self) -> None:
        """Purge old lines; start the cycles that are due; move the running ones on. Each
        deployment in a session of its own, and no write pending while a job or a dataset is
        made (they take sessions of their own: SQLite has one writer)."""
        async with self.sessions() as session:
            names = list(await session.scalars(select(Deployment.name)))
        for name in names:
            async with self._lock, self.sessions() as session:
                deployment = await session.get(Deployment, name)
                if deployment is None:
                    continue
                if self.clock() - self._purged.get(name, -PURGE_EVERY_S) >= PURGE_EVERY_S:
                    self._purged[name] = self.clock()
                    if await asyncio.to_thread(self.purge, deployment):
                        await session.commit()
                if deployment.cycle is not None:
                    await self._advance(session, deployment)
                elif deployment.schedule and self.clock() >= (deployment.next_cycle_at or 0):
                    await self._start(session, deployment)
                    deployment.next_cycle_at = next_time(deployment.schedule, self.clock())
                await session.commit()

    async def run_cycle(self, name: str) -> Deployment:
        """Start a cycle now, whatever the schedule says."""
        async with self._lock, self.sessions() as session:
            deployment = await get(session, name)
            if deployment.cycle is None:
                await self._start(session, deployment)
            await session.commit()
            return deployment

    async def promote(self, name: str, model_id: str) -> Deployment:
        """Run the promotion gate for `model_id`: it is served only if it wins the A/B.

        Raises:
            ConfigError: a cycle is in flight, or the model is already served.
            NotFoundError: no such deployment or model.
        """
        async with self._lock, self.sessions() as session:
            deployment = await get(session, name)
            if deployment.cycle is not None:
                raise ConfigError(f"deployment {name} has a cycle in flight; wait for it")
            if model_id == deployment.model_id:
                raise ConfigError(f"{model_id} is already what {name} serves")
            candidate = await session.get(Model, model_id)
            if candidate is None:
                raise NotFoundError(f"no model {model_id!r}")
            await self._gate(session, deployment, candidate.id, {"reason": "asked"})
            await session.commit()
            return deployment

    async def _start(self, session: Any, deployment: Deployment) -> None:
        # Reads first; the deployment changes only after the dataset and the job are made
        # (in sessions of their own): a pending change flushed by a read here would hold
        # SQLite's one write lock while they wait for it.
        kind, rows, read = await asyncio.to_thread(self.training_rows, deployment)
        model = await session.get(Model, deployment.model_id)
        parent = None
        if deployment.feedback_dataset_id is not None:
            parent = await session.get(Dataset, deployment.feedback_dataset_id)
        if len(rows) < deployment.min_feedback:
            self._record(
                deployment,
                "skipped",
                f"{len(rows)} new feedback row{'' if len(rows) == 1 else 's'} to train on, "
                f"fewer than min_feedback ({deployment.min_feedback})",
            )
            return
        if model is None:
            self._record(deployment, "failed", f"the served model {deployment.model_id} is gone")
            return
        dataset = await self._feedback_dataset(deployment, parent, kind, rows)
        job = await learning.learn(
            self.jobs,
            model,
            dataset,
            max_steps=deployment.learn_steps,
            name=f"{deployment.name}-cycle",
        )
        deployment.feedback_dataset_id = dataset.id
        deployment.feedback_used = read
        deployment.cycle = {
            "stage": "learning",
            "began_at": self.clock(),
            "dataset_id": dataset.id,
            "rows": len(rows),
            "learn_job_id": job.id,
        }
        self._record(
            deployment,
            "learning",
            f"{len(rows)} {kind} rows, job {job.id}",
            learn_job_id=job.id,
            dataset_id=dataset.id,
        )

    async def _feedback_dataset(
        self,
        deployment: Deployment,
        parent: Dataset | None,
        kind: str,
        rows: list[dict[str, Any]],
    ) -> Dataset:
        """The rows as a new dataset version: the next of the deployment's feedback dataset of
        that kind (`parent`), or the first."""
        if parent is not None and parent.kind == kind:
            return await self.datasets.new_version(parent.id, Edit(append=rows), None, None)
        path = self.directory(deployment.name) / f".rows-{uuid.uuid4().hex[:8]}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        try:
            return await self.datasets.store_file(
                path,
                filename=f"{deployment.name}-feedback.jsonl",
                name=f"{deployment.name}-feedback",
                kind=kind,
                mapping=None,
                origin={"deployment": deployment.name},
            )
        finally:
            path.unlink(missing_ok=True)

    async def _advance(self, session: Any, deployment: Deployment) -> None:
        cycle = dict(deployment.cycle or {})
        if cycle["stage"] == "learning":
            job = await session.get(Job, cycle["learn_job_id"])
            if job is None or job.state not in ENDED:
                return
            if job.state != JobState.SUCCEEDED:
                deployment.cycle = None
                self._record(deployment, "failed", f"learn job {job.id} {job.state}: {job.reason}")
                return
            models = (await session.scalars(select(Model).where(Model.job_id == job.id))).all()
            candidate = max(models, key=lambda m: m.step)
            await self._gate(session, deployment, candidate.id, cycle)
        elif cycle["stage"] == "gating":
            job = await session.get(Job, cycle["eval_job_id"])
            if job is None or job.state not in ENDED:
                return
            deployment.cycle = None
            if job.state != JobState.SUCCEEDED:
                self._record(deployment, "failed", f"gate job {job.id} {job.state}: {job.reason}")
                return
            summary = evaluations.summary(self.jobs.run_dir(job.id).path) or {}
            (comparison,) = summary["comparisons"]
            candidate = cycle["candidate"]
            won = comparison["significant"] and comparison["win_rate"] > 0.5
            if won:
                previous, deployment.model_id = deployment.model_id, candidate
                self._record(
                    deployment,
                    "promoted",
                    comparison["verdict"],
                    candidate=candidate,
                    previous=previous,
                    eval_job_id=job.id,
                )
            else:
                self._record(
                    deployment,
                    "refused",
                    comparison["verdict"],
                    candidate=candidate,
                    eval_job_id=job.id,
                )

    async def _gate(
        self, session: Any, deployment: Deployment, candidate: str, cycle: dict[str, Any]
    ) -> None:
        if deployment.eval_dataset_id is None:
            deployment.cycle = None
            self._record(
                deployment,
                "refused",
                "no eval_dataset_id: a candidate is served only after it wins an A/B on one",
                candidate=candidate,
            )
            return
        served = await session.get(Model, deployment.model_id)
        if served is None:
            deployment.cycle = None
            self._record(deployment, "failed", f"the served model {deployment.model_id} is gone")
            return
        job, _ = await self.jobs.create(
            name=f"{deployment.name}-gate",
            algorithm="eval",
            backend=served.backend,
            base_model=deployment.model_id,
            dataset_id=deployment.eval_dataset_id,
            config={"models": [candidate]},
            priority=learning.PRIORITY,
        )
        deployment.cycle = {
            **cycle,
            "stage": "gating",
            "candidate": candidate,
            "eval_job_id": job.id,
        }
        detail = f"{candidate} against {deployment.model_id}, job {job.id}"
        self._record(deployment, "gating", detail, candidate=candidate, eval_job_id=job.id)

    def _record(self, deployment: Deployment, event: str, detail: str, **extra: Any) -> None:
        entry = {"at": self.clock(), "event": event, "detail": detail, **extra}
        deployment.history = [*(deployment.history or []), entry]


async def get(session: Any, name: str) -> Deployment:
    deployment = await session.get(Deployment, name)
    if deployment is None:
        raise NotFoundError(f"no deployment {name!r}")
    return deployment  # type: ignore[no-any-return]
