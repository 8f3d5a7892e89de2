"""Jobs: create (validated against its dataset, then queued), list, read, stop, resume,
metrics, logs, events, checkpoints, delete."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response, status
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field, PlainValidator, StrictFloat, StrictInt
from sqlalchemy import func, select

from thinker.algorithms import batch, evaluation
from thinker.algorithms.dpo_config import DPOConfig
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.errors import NotFoundError
from thinker.files import read_jsonl
from thinker.jobs.attached import SERVER_RESOURCE
from thinker.jobs.events import read_events
from thinker.jobs.manager import heartbeat_age
from thinker.jobs.request_config import by_algorithm
from thinker.jobs.start import job_config
from thinker.jobs.states import JobState
from thinker.names import Name
from thinker.pipeline.config import ALGORITHMS, JOB_ALGORITHMS
from thinker.runs import CheckpointRecord
from thinker.server.deps import PlatformDep, SessionDep
from thinker.server.platform import Platform
from thinker.server.routes.evaluations import EvalRow, EvalSummary
from thinker.services import evaluations
from thinker.store import Job

router = APIRouter(prefix="/jobs", tags=["jobs"])
CONFIG_SCHEMAS = {
    "sl": SLConfig.model_json_schema(),
    "dpo": DPOConfig.model_json_schema(),
    "rl": RLConfig.model_json_schema(),
    "rm": RewardModelConfig.model_json_schema(),
}


Algorithm = Literal["sl", "dpo", "rl", "rlhf", "rm"]  # what trains (and is proposed for)
# What POST /api/jobs takes
CreatedAlgorithm = Literal["sl", "dpo", "rl", "rlhf", "rm", "batch", "eval", "review"]
# What a job's algorithm can be: those a request creates, and a Tinker SDK client's run
JobAlgorithm = Literal["sl", "dpo", "rl", "rlhf", "rm", "batch", "eval", "review", "tinker_sdk"]


class JobProposalFields(BaseModel):
    """What a job or proposal request gives besides its algorithm and its settings."""

    backend: Literal["local", "tinker"] = Field(
        "local", description="Where it trains: local (this machine) or tinker (Tinker's GPUs)."
    )
    base_model: str = Field(
        "thinker/tiny",
        min_length=1,
        max_length=300,
        description="A built-in (thinker/tiny), a hub id, a directory on the server, or a "
        "library model (mdl_...) to continue training.",
    )
    dataset_id: str | None = Field(None, description="The id of the dataset to train on.")


class JobCreateFields(JobProposalFields):
    """What a job request gives besides its algorithm and its settings."""

    name: Name | None = Field(
        None,
        max_length=200,
        description='Left out: "<dataset>-<algorithm>"; made unique either way.',
    )
    priority: StrictInt = Field(0, ge=-100, le=100, description="Higher starts first.")
    gpus: StrictInt = Field(
        1,
        ge=1,
        le=8,
        description="Processes that train the job data-parallel, one GPU each on one machine "
        "(on a server without GPUs, CPU processes); sl, dpo and rl jobs. The batch is shared "
        "out (and an rl step's groups sampled on every rank): the same steps, losses and "
        "checkpoints as one process.",
    )
    memory_gb: StrictFloat | StrictInt | None = Field(
        None,
        gt=0,
        le=4096,
        description="Host memory the job's worker needs, in GiB. Under the Ray executor its "
        "actor asks Ray for it, so the job waits for a node with that much unreserved; the "
        "local executor does not reserve memory.",
    )
    auto_resume: StrictInt = Field(
        2,
        ge=0,
        le=10,
        description="Times the job is resumed from its last checkpoint, without being asked, "
        "when its worker or the node it runs on is lost (0: it stays interrupted).",
    )


# The bodies as the OpenAPI document shows them: one model per algorithm, with its typed
# config (jobs/request_config.py), told apart by `algorithm`.
JobCreate = by_algorithm(
    "JobCreate",
    JobCreateFields,
    "A job to check against its data and queue, by algorithm.",
    JOB_ALGORITHMS,
)
JobProposalRequest = by_algorithm(
    "JobProposalRequest",
    JobProposalFields,
    "What to propose settings for: the settings given are kept, the rest proposed.",
    (*ALGORITHMS, "rm"),
)


class _JobCreateRead(JobCreateFields):
    """A POST /api/jobs body as the server reads it: `config` a mapping, checked against the
    algorithm's own section by jobs/spec.py with every problem at once (`config.<key>: ...`)."""

    algorithm: CreatedAlgorithm
    config: dict[str, Any] = Field(default_factory=dict)


class _JobProposalRead(JobProposalFields):
    """A POST /api/jobs/proposal body as the server reads it (see _JobCreateRead)."""

    algorithm: Algorithm
    config: dict[str, Any] = Field(default_factory=dict)  # kept; the rest is proposed


# Read as the `_...Read` models, shown in the document as the typed bodies.
JobCreateBody = Annotated[
    _JobCreateRead,
    PlainValidator(_JobCreateRead.model_validate, json_schema_input_type=JobCreate),
]
JobProposalBody = Annotated[
    _JobProposalRead,
    PlainValidator(_JobProposalRead.model_validate, json_schema_input_type=JobProposalRequest),
]


class JobPublic(BaseModel):
    id: str
    name: str
    algorithm: str
    backend: str
    base_model: str
    dataset_id: str | None
    config: dict[str, Any]
    state: JobState
    reason: str | None
    log_tail: str | None
    priority: int
    resource: str
    device: str | None
    step: int
    total_steps: int | None
    progress: float | None  # step / total_steps
    eta_s: float | None  # seconds left at the pace so far
    attempts: int
    gpus: int  # processes of a data-parallel job (1: one process)
    memory_gb: float | None  # host memory asked of the Ray executor
    auto_resume: int  # times a lost worker is resumed without being asked
    auto_resumes: int  # of those, used
    placement: dict[str, Any] | None  # where the current or last attempt runs: node, GPUs
    last_seq: int  # the last event number applied: where a live stream continues from
    parent_model_id: str | None  # the library model it continues from (None: a fresh adapter)
    report: dict[str, Any] | None  # when it ended: did it learn (held-out vs base, warnings)
    retryable: bool  # whether resume can help (paused, interrupted, or a failure that may pass)
    created_by: str | None  # the API token's name, for a Tinker SDK run with auth on
    heartbeat_at: datetime | None
    heartbeat_age_s: float | None  # since the worker's last heartbeat; None unless active
    stale: bool  # no heartbeat for heartbeat_timeout_s: the worker may be stopped or hung
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job, stale_after_s: float) -> JobPublic:
        """The job as the API shows it; `stale_after_s` is the server's heartbeat_timeout_s."""
        progress = job.step / job.total_steps if job.total_steps else None
        retryable = job.resource != SERVER_RESOURCE and (
            job.state in (JobState.PAUSED, JobState.INTERRUPTED)
            or (job.state == JobState.FAILED and job.retryable is not False)
        )
        age = heartbeat_age(job)
        return cls(
            **{k: getattr(job, k) for k in _PLAIN},
            progress=progress,
            eta_s=_eta(job),
            retryable=retryable,
            heartbeat_at=_time(job.heartbeat_at),
            heartbeat_age_s=round(age, 1) if age is not None else None,
            stale=age is not None and age >= stale_after_s,
            created_at=_time(job.created_at),
            started_at=_time(job.started_at),
            finished_at=_time(job.finished_at),
        )


_PLAIN = [
    "id",
    "name",
    "algorithm",
    "backend",
    "base_model",
    "dataset_id",
    "config",
    "state",
    "reason",
    "log_tail",
    "priority",
    "resource",
    "device",
    "step",
    "total_steps",
    "attempts",
    "gpus",
    "memory_gb",
    "auto_resume",
    "auto_resumes",
    "placement",
    "last_seq",
    "parent_model_id",
    "report",
    "created_by",
]


class StageProposalPublic(BaseModel):
    stage: Literal["sl", "dpo", "rm", "rl"]
    rows: int  # rows of its dataset
    train_rows: int  # left to train on after the held-out share
    steps: int
    config: dict[str, Any]  # this stage's settings
    why: list[str]  # one line per choice


class JobProposal(BaseModel):
    algorithm: str
    base_model: str  # the model whose weights load (a library model's own base model)
    parent_model_id: str | None  # the library model the job would continue
    config: dict[str, Any]  # send as POST /api/jobs's config, as is
    total_steps: int
    train_rows: int  # of the main dataset: batch_size may not exceed it
    stages: list[StageProposalPublic]
    warnings: list[str]


class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int


class MetricsPage(BaseModel):
    data: list[dict[str, Any]]  # metrics.jsonl rows: {"step", "time", <metric>: value, ...}
    count: int  # rows in the file
    next_offset: int | None


class JobLogs(BaseModel):
    lines: list[str]
    total_lines: int


class JobEvents(BaseModel):
    data: list[dict[str, Any]]  # {"seq", "time", "type", "data"}
    last_seq: int


class RolloutsPublic(BaseModel):
    steps: list[int]  # the RL steps with rollouts on disk, ascending
    step: int | None  # the step shown (default: the last)
    data: list[dict[str, Any]]  # per problem: prompt, answer, completions, rewards, advantages


class CheckpointPublic(CheckpointRecord):
    stage: str | None = None  # rlhf: the stage that saved it (sl, rm, rl)


class CheckpointsPublic(BaseModel):
    data: list[CheckpointPublic]  # checkpoints.jsonl rows (rlhf: each stage's, with "stage")


def _public(job: Job, platform: Platform) -> JobPublic:
    return JobPublic.of(job, platform.settings.heartbeat_timeout_s)


def _time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _eta(job: Job) -> float | None:
    if job.state != JobState.RUNNING or not job.total_steps or not job.started_at or job.step <= 0:
        return None
    elapsed = datetime.now(UTC).timestamp() - job.started_at
    return max(0.0, elapsed / job.step * (job.total_steps - job.step))


# The statuses a route sends besides those every route documents (server/openapi_doc.py).
_REPLAYED: dict[int | str, dict[str, Any]] = {
    200: {"model": JobPublic, "description": "The job an earlier request with this key made"}
}
_NO_DATA_FILE: dict[int | str, dict[str, Any]] = {
    503: {"description": "A dataset's stored file is missing on disk"}
}
_FULL_DISK: dict[int | str, dict[str, Any]] = {
    507: {"description": "The disk is full: nothing of the job was kept"}
}
_STATE: dict[int | str, dict[str, Any]] = {
    409: {"description": "The job's state forbids it now (it has ended, or it is running)"}
}


@router.post(
    "", status_code=status.HTTP_201_CREATED, responses={**_REPLAYED, **_NO_DATA_FILE, **_FULL_DISK}
)
async def create_job(
    body: JobCreateBody,
    platform: PlatformDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobPublic:
    """Validate a job against its dataset and queue it (`Idempotency-Key`: one job per key)."""
    job, created = await platform.jobs.create(**body.model_dump(), idempotency_key=idempotency_key)
    if not created:
        response.status_code = status.HTTP_200_OK
        response.headers["Idempotent-Replayed"] = "true"
    return _public(job, platform)


@router.get("")
async def read_jobs(
    session: SessionDep,
    platform: PlatformDep,
    state: JobState | None = None,
    algorithm: JobAlgorithm | None = None,
    backend: Literal["local", "tinker"] | None = None,
    dataset_id: str | None = None,
    parent_model_id: str | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> JobsPublic:
    """Jobs, newest first, filtered by state, algorithm, backend, dataset or the library model
    they started from (a review job: the reward model it reviews)."""
    query = select(Job)
    for column, value in (
        (Job.state, state),
        (Job.algorithm, algorithm),
        (Job.backend, backend),
        (Job.dataset_id, dataset_id),
        (Job.parent_model_id, parent_model_id),
    ):
        if value is not None:
            query = query.where(column == value)
    count = await session.scalar(select(func.count()).select_from(query.subquery()))
    rows = await session.scalars(
        query.order_by(Job.created_at.desc(), Job.id).offset(offset).limit(limit)
    )
    return JobsPublic(data=[_public(j, platform) for j in rows], count=count or 0)


@router.post("/proposal", responses=_NO_DATA_FILE)
async def propose_job(body: JobProposalBody, platform: PlatformDep) -> JobProposal:
    """Hyperparameters proposed from the dataset and the base model (what the request's
    config leaves out); POST /api/jobs fills a config the same way."""
    start, proposal = await platform.jobs.proposal(
        body.algorithm, body.backend, body.base_model, body.dataset_id, body.config
    )
    return JobProposal(
        algorithm=body.algorithm,
        base_model=start.base_model,
        parent_model_id=start.parent.id if start.parent is not None else None,
        config=job_config(body.algorithm, proposal, body.config),
        total_steps=proposal.total_steps,
        train_rows=proposal.train_rows,
        stages=[StageProposalPublic(**vars(s)) for s in proposal.stages],
        warnings=proposal.warnings,
    )


@router.get("/config-schema")
async def read_config_schema() -> dict[str, dict[str, Any]]:
    """Each algorithm config class's JSON Schema (types, ranges, descriptions), as pipeline
    YAML files give them; a job request's config is in the OpenAPI document (JobCreate)."""
    return CONFIG_SCHEMAS


@router.get("/{job_id}")
async def read_job(job_id: str, platform: PlatformDep) -> JobPublic:
    """One job: state, progress, ETA, and why it failed or stopped."""
    return _public(await platform.jobs.get(job_id), platform)


@router.post("/{job_id}/cancel", responses=_STATE)
async def cancel_job(job_id: str, platform: PlatformDep) -> JobPublic:
    """Cancel a job (its worker stops at the next step)."""
    return _public(await platform.jobs.cancel(job_id), platform)


@router.post("/{job_id}/pause", responses=_STATE)
async def pause_job(job_id: str, platform: PlatformDep) -> JobPublic:
    """Pause a job; resume continues from its last checkpoint."""
    return _public(await platform.jobs.pause(job_id), platform)


@router.post("/{job_id}/resume", responses=_STATE)
async def resume_job(job_id: str, platform: PlatformDep) -> JobPublic:
    """Queue a paused, interrupted or failed job again, from its last checkpoint."""
    return _public(await platform.jobs.resume(job_id), platform)


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_STATE)
async def delete_job(job_id: str, platform: PlatformDep) -> None:
    """Delete a job that is not running, with its run directory and models."""
    await platform.jobs.delete(job_id)


@router.get("/{job_id}/metrics")
async def read_job_metrics(
    job_id: str,
    platform: PlatformDep,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> MetricsPage:
    """The job's metrics.jsonl rows, in pages."""
    await platform.jobs.get(job_id)
    rows = await asyncio.to_thread(platform.jobs.metrics(job_id).rows)
    page = rows[offset : offset + limit]
    more = offset + limit < len(rows)
    return MetricsPage(data=page, count=len(rows), next_offset=offset + limit if more else None)


@router.get("/{job_id}/logs")
async def read_job_logs(
    job_id: str, platform: PlatformDep, tail: Annotated[int, Query(ge=1, le=10_000)] = 200
) -> JobLogs:
    """The last lines of the worker's log."""
    await platform.jobs.get(job_id)
    text = await asyncio.to_thread(_read_text, platform.jobs.run_dir(job_id).log)
    lines = text.splitlines()
    return JobLogs(lines=lines[-tail:], total_lines=len(lines))


@router.get("/{job_id}/events")
async def read_job_events(
    job_id: str,
    platform: PlatformDep,
    after_seq: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> JobEvents:
    """The job's numbered events after `after_seq` (what Socket.IO replays)."""
    job = await platform.jobs.get(job_id)
    events = await asyncio.to_thread(
        read_events, platform.jobs.run_dir(job_id).path, after_seq, job.last_seq
    )
    return JobEvents(data=events[:limit], last_seq=job.last_seq)


@router.get("/{job_id}/checkpoints")
async def read_job_checkpoints(job_id: str, platform: PlatformDep) -> CheckpointsPublic:
    """Every checkpoint the job saved (state and sampler paths, step)."""
    job = await platform.jobs.get(job_id)
    records = await asyncio.to_thread(platform.jobs.checkpoints, job)
    rows = [CheckpointPublic(**r.model_dump(), stage=stage) for stage, r in records]
    return CheckpointsPublic(data=rows)


@router.get("/{job_id}/rollouts")
async def read_job_rollouts(
    job_id: str, platform: PlatformDep, step: Annotated[int | None, Query(ge=1)] = None
) -> RolloutsPublic:
    """An RL job's rollouts of one step (default: the latest): each group's completions,
    rewards and advantages."""
    job = await platform.jobs.get(job_id)
    files = await asyncio.to_thread(platform.jobs.rollout_files, job)
    steps = sorted(files)
    shown = step if step is not None else (steps[-1] if steps else None)
    if shown is not None and shown not in files:
        raise NotFoundError(f"job {job_id} has no rollouts for step {shown}")
    rows = await asyncio.to_thread(read_jsonl, files[shown]) if shown is not None else []
    return RolloutsPublic(steps=steps, step=shown, data=rows)


class BatchResultsPublic(BaseModel):
    total: int  # rows in results.jsonl (or those flagged / not, when filtered)
    counts: dict[str, int]  # over every row: answered, failed, flagged, applied, verified, ...
    actors: list[dict[str, Any]]  # pool.json: each actor's state, node, shard, shards done
    data: list[dict[str, Any]]  # the page of rows: index, output, confidence, flagged, apply...


@router.get("/{job_id}/results")
async def read_job_results(
    job_id: str,
    platform: PlatformDep,
    flagged: bool | None = None,
    order: Literal["index", "confidence", "-confidence"] = "index",
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> BatchResultsPublic:
    """A batch job's results so far: one row per input answered (output, confidence from the
    samples' agreement, flagged, apply, and for a fix whether its tests passed), a page at a
    time, flagged or not, by input or by confidence; the counts; its pool's actors."""
    job = await platform.jobs.get(job_id)
    if job.algorithm != "batch":
        raise NotFoundError(f"job {job_id} is a {job.algorithm} job: only batch jobs have results")
    run = platform.jobs.run_dir(job_id)
    rows = await asyncio.to_thread(_rows_of, run.path / "results.jsonl")
    tally = batch.Tally(len(rows))
    for row in rows:
        tally.add(row)
    if flagged is not None:
        rows = [r for r in rows if bool(r.get("flagged")) == flagged and "error" not in r]
    if order == "index":
        rows.sort(key=lambda r: r["index"])
    else:
        rows.sort(key=lambda r: (r.get("confidence", -1.0), r["index"]))
        if order == "-confidence":
            rows.reverse()
    pool = await asyncio.to_thread(_read_text, run.path / "pool.json")
    actors = json.loads(pool).get("actors", []) if pool else []
    return BatchResultsPublic(
        total=len(rows), counts=tally.counts(), actors=actors, data=rows[offset : offset + limit]
    )


@router.get(
    "/{job_id}/results/download",
    response_class=FileResponse,
    responses={404: {"description": "Not a batch job, or no result yet"}},
)
async def download_job_results(job_id: str, platform: PlatformDep) -> FileResponse:
    """A batch job's results.jsonl as it stands: one JSON row per input answered."""
    job = await platform.jobs.get(job_id)
    path = platform.jobs.run_dir(job_id).path / "results.jsonl"
    if job.algorithm != "batch" or not path.is_file():
        raise NotFoundError(f"job {job_id} has no results (a batch job's, once it answers)")
    return FileResponse(path, media_type="application/x-ndjson", filename=f"{job_id}-results.jsonl")


class EvaluationPublic(BaseModel):
    summary: EvalSummary | None  # evaluation.json once it finished
    total: int  # the prompts that pass the filter
    data: list[EvalRow]  # the page: each prompt's reference and every model's answers


@router.get("/{job_id}/evaluation")
async def read_job_evaluation(  # noqa: PLR0913
    job_id: str,
    platform: PlatformDep,
    order: evaluations.Order = "index",
    model: Annotated[str | None, Query(max_length=300)] = None,
    disagree: bool | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EvaluationPublic:
    """An eval job's results, once it finished: each model's mean score (with its bootstrap
    95% interval) and NLL, each pair's comparison (wins, ties, losses, B's win rate with its
    interval, the sign test's p-value, the verdict), the Bradley-Terry leaderboard; and a
    page of the prompts with every model's answers and scores, by prompt, by a model's score
    (`model`, default the last; "-score": best first) or by how far the models' scores are
    apart ("-spread": the largest disagreement first), all or only where they disagree."""
    job = await platform.jobs.get(job_id)
    if job.algorithm != "eval":
        raise NotFoundError(f"job {job_id} is a {job.algorithm} job: only eval jobs have one")
    run = platform.jobs.run_dir(job_id).path
    found = await asyncio.to_thread(evaluations.summary, run)
    total, rows = await asyncio.to_thread(
        evaluations.samples_page, run, order, model, disagree, offset, limit
    )
    return EvaluationPublic(
        summary=None if found is None else EvalSummary.model_validate(found),
        total=total,
        data=[EvalRow.model_validate(r) for r in rows],
    )


@router.get(
    "/{job_id}/evaluation/download",
    response_class=FileResponse,
    responses={404: {"description": "Not an eval job, or not finished"}},
)
async def download_job_evaluation(job_id: str, platform: PlatformDep) -> FileResponse:
    """An eval job's samples.jsonl: per prompt, its reference and every model's answers and
    scores."""
    job = await platform.jobs.get(job_id)
    path = platform.jobs.run_dir(job_id).path / evaluation.SAMPLES
    if job.algorithm != "eval" or not path.is_file():
        raise NotFoundError(f"job {job_id} has no samples (an eval job's, once it finishes)")
    return FileResponse(path, media_type="application/x-ndjson", filename=f"{job_id}-samples.jsonl")


def _rows_of(path: Any) -> list[dict[str, Any]]:
    return read_jsonl(path) if path.is_file() else []


def _read_text(path: Any) -> str:
    try:
        return path.read_text(errors="replace")  # type: ignore[no-any-return]
    except FileNotFoundError:
        return ""
