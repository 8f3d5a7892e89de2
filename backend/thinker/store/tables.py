"""The platform's tables: datasets, jobs, models, deployments, review answers, API tokens and
settings.

Times are UTC epoch seconds (floats): the same on SQLite and PostgreSQL, and cheap to compare
for heartbeats. Ids are server-made (`ds_`, `job_`, `mdl_`, `tok_` + 12 hex digits) and are
the only names that ever become paths (`runs/<job id>/`, `datasets/<dataset id>.jsonl`).
Change a table only through a new Alembic revision in `migrations/versions/`.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def new_id(prefix: str) -> str:
    """A fresh server-made id such as `job_3f9a0c1b2d4e`."""
    return f"{prefix}_{secrets.token_hex(6)}"


def now() -> float:
    return time.time()


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    # chat | prompt_completion | preferences | problems (see thinker.data)
    kind: Mapped[str] = mapped_column(String(32))
    source_format: Mapped[str] = mapped_column(String(16))  # jsonl | json | csv | parquet
    filename: Mapped[str] = mapped_column(String(255))  # as uploaded; display only, never a path
    num_rows: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))  # of the stored (normalised) JSONL
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)  # a shipped example
    created_at: Mapped[float] = mapped_column(Float, default=now)
    # Versions: a dataset never changes once stored; editing or re-mapping makes a new row
    # with the same root (the first version's id), the next version number and its parent.
    root_id: Mapped[str | None] = mapped_column(String(32), index=True)  # None: itself (v1)
    version: Mapped[int] = mapped_column(Integer, default=1)
    parent_id: Mapped[str | None] = mapped_column(String(32))
    # How source fields became the kind's fields ({"prompt": "question", ...}); None = as is.
    mapping: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Where the rows came from beyond an upload, e.g. {"hf": {"repo", "config", "split", ...}}.
    origin: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    algorithm: Mapped[str] = mapped_column(String(16))  # sl | dpo | rl | rlhf | tinker_sdk
    backend: Mapped[str] = mapped_column(String(16))  # local | tinker
    base_model: Mapped[str] = mapped_column(String(300))
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id"), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the algorithm's config as given
    state: Mapped[str] = mapped_column(String(16), index=True)  # a thinker.jobs.states.JobState
    reason: Mapped[str | None] = mapped_column(Text)  # why it failed / stopped
    log_tail: Mapped[str | None] = mapped_column(Text)  # the worker's last lines, on failure
    priority: Mapped[int] = mapped_column(Integer, default=0)  # higher runs first
    # gpu | cpu | remote | server (a Tinker SDK client's run, on the server's own engine)
    resource: Mapped[str] = mapped_column(String(8))
    # "cuda:0" (or "cuda:0,1" for gpus 2) while it holds GPUs
    device: Mapped[str | None] = mapped_column(String(64))
    # Processes of a data-parallel job: one GPU each (CPU processes where the server has none)
    gpus: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # Host memory (GiB) the worker asks the Ray executor for; None: none reserved
    memory_gb: Mapped[float | None] = mapped_column(Float)
    stop_request: Mapped[str | None] = mapped_column(String(16))  # cancel | pause, once asked
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_start: Mapped[str | None] = mapped_column(String(32))  # /proc start time: pid reuse
    heartbeat_at: Mapped[float | None] = mapped_column(Float)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)  # last event applied here
    step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # starts, resumes included
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)
    # The library model (mdl_...) the job continues from; None: a fresh adapter on base_model
    parent_model_id: Mapped[str | None] = mapped_column(String(32), index=True)
    # Whether it learned, written when it ends: held-out metrics vs the base model's, warnings
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # A failed job: whether resuming can help (False: the same settings fail the same way)
    retryable: Mapped[bool | None] = mapped_column(Boolean)
    # The name of the API token that created it (a Tinker SDK run, auth on); None otherwise
    created_by: Mapped[str | None] = mapped_column(String(200))
    # Times a lost worker (or node) is resumed from the last checkpoint without being asked,
    # and how many of those were used
    auto_resume: Mapped[int] = mapped_column(Integer, default=2, server_default="2")
    auto_resumes: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Where the current (or last) attempt's worker runs: executor, node, GPUs
    placement: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Model(Base):
    """A sampler checkpoint of a job, with its lineage."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("job_id", "sampler_path"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    dataset_id: Mapped[str | None] = mapped_column(String(32))
    base_model: Mapped[str] = mapped_column(String(300))
    backend: Mapped[str] = mapped_column(String(16))
    step: Mapped[int] = mapped_column(Integer)
    stage: Mapped[str | None] = mapped_column(String(64))  # rlhf: sl | rm | rl
    sampler_path: Mapped[str] = mapped_column(String(500))  # tinker:// (or the older tinker://)
    state_path: Mapped[str | None] = mapped_column(String(500))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    lifecycle: Mapped[str] = mapped_column(
        String(16), default="active"
    )  # active|deprecated|archived
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Deployment(Base):
    """A served name for /v1 (`"model": "<name>"`) pointing at a library model, with its opt-in
    production loop: logged traffic, feedback on it, scheduled retraining, a promotion gate
    (services/deployments.py)."""

    __tablename__ = "deployments"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(32))  # the model it serves now
    log_traffic: Mapped[bool] = mapped_column(Boolean, default=False)  # opt-in
    redact: Mapped[str | None] = mapped_column(String(200))  # "pii", "module:function", None
    retention_days: Mapped[float] = mapped_column(Float, default=30.0)
    schedule: Mapped[str | None] = mapped_column(String(100))  # a cron expression; None: never
    min_feedback: Mapped[int] = mapped_column(Integer, default=10)  # rows a cycle needs
    learn_steps: Mapped[int] = mapped_column(Integer, default=30)
    eval_dataset_id: Mapped[str | None] = mapped_column(String(32))  # the gate's eval set
    feedback_dataset_id: Mapped[str | None] = mapped_column(String(32))  # its latest version
    feedback_used: Mapped[int] = mapped_column(Integer, default=0)  # feedback lines consumed
    cycle: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the one in flight
    history: Mapped[list[Any]] = mapped_column(JSON, default=list)  # promoted, refused...
    next_cycle_at: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)


class ReviewAnswer(Base):
    """A person's answer to one pair of a review job's queue (algorithms/review.py): which of
    the two answers shown is better, or a tie."""

    __tablename__ = "review_answers"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    pair: Mapped[int] = mapped_column(Integer, primary_key=True)  # its index in the review
    choice: Mapped[str] = mapped_column(String(8))  # a | b | tie
    answered_at: Mapped[float] = mapped_column(Float, default=now)


class ApiToken(Base):
    """A bearer token: only its SHA-256 is stored; the token itself is shown once."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # first characters, to tell tokens apart
    created_at: Mapped[float] = mapped_column(Float, default=now)
    last_used_at: Mapped[float | None] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class Setting(Base):
    """Server-side settings that are not secrets (secrets live in `<data dir>/secrets/`)."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON)
