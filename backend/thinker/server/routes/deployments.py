"""/api/deployments: served names for /v1, with their opt-in production loop (logged traffic,
feedback, scheduled retraining behind a promotion gate: services/deployments.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator
from sqlalchemy import select

from thinker.errors import ConfigError, ConflictError
from thinker.server.deps import PlatformDep, SessionDep
from thinker.services import deployments as service
from thinker.store import Dataset, Deployment, Model

router = APIRouter(prefix="/deployments", tags=["deployments"])
DeploymentName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")]


class DeploymentSettings(BaseModel):
    """What a deployment does besides serving its model."""

    model_config = ConfigDict(extra="forbid")

    log_traffic: bool = Field(
        False, description="Opt in: log each /v1 completion of this name (after `redact`)."
    )
    redact: str | None = Field(
        None,
        max_length=200,
        description='A hook run on every logged text: "pii" (e-mails, phone numbers, long '
        'digit runs masked) or "module:function" (trusted code the server imports); null: none.',
    )
    retention_days: StrictFloat | StrictInt = Field(
        30, gt=0, le=3650, description="Logged traffic and feedback older than this are deleted."
    )
    schedule: str | None = Field(
        None,
        max_length=100,
        description='A cron expression (UTC) for the retraining cycle, e.g. "0 3 * * *"; '
        "null: only when asked.",
    )
    min_feedback: StrictInt = Field(
        10, ge=1, le=1_000_000, description="New feedback rows a cycle needs to train."
    )
    learn_steps: StrictInt = Field(30, ge=1, le=10_000, description="Steps of each cycle's job.")
    eval_dataset_id: str | None = Field(
        None,
        max_length=64,
        description="The promotion gate's eval set (chat, prompt_completion or problems): a "
        "candidate is served only after it wins an A/B on it.",
    )

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            service.next_time(value, 0.0)  # raises with the reason
        return value


class DeploymentCreate(DeploymentSettings):
    name: DeploymentName = Field(description="The name /v1 clients ask for as `model`.")
    model_id: str = Field(max_length=64, description="The library model it serves (mdl_...).")


class DeploymentPublic(BaseModel):
    name: str
    model_id: str
    log_traffic: bool
    redact: str | None
    retention_days: float
    schedule: str | None
    min_feedback: int
    learn_steps: int
    eval_dataset_id: str | None
    feedback_dataset_id: str | None  # the latest version made from its feedback
    cycle: dict[str, Any] | None  # the cycle in flight: learning or gating, its jobs
    history: list[dict[str, Any]]  # skipped, learning, gating, promoted, refused, failed
    next_cycle_at: float | None
    traffic: int  # logged completions kept
    feedback: int  # feedback lines kept
    feedback_new: int  # not yet used by a cycle

    @classmethod
    def of(cls, d: Deployment, counts: tuple[int, int]) -> DeploymentPublic:
        traffic, feedback = counts
        return cls(
            name=d.name,
            model_id=d.model_id,
            log_traffic=d.log_traffic,
            redact=d.redact,
            retention_days=d.retention_days,
            schedule=d.schedule,
            min_feedback=d.min_feedback,
            learn_steps=d.learn_steps,
            eval_dataset_id=d.eval_dataset_id,
            feedback_dataset_id=d.feedback_dataset_id,
            cycle=d.cycle,
            history=list(d.history or []),
            next_cycle_at=d.next_cycle_at,
            traffic=traffic,
            feedback=feedback,
            feedback_new=max(0, feedback - d.feedback_used),
        )


class FeedbackCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completion_id: str = Field(max_length=64, description="The `id` of a /v1 completion.")
    rating: Literal["up", "down"]
    correction: str | None = Field(
        None, max_length=100_000, description="The answer it should have given."
    )


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str = Field(max_length=64, description="The library model to serve if it wins.")


async def _public(platform: PlatformDep, d: Deployment) -> DeploymentPublic:
    return DeploymentPublic.of(d, await asyncio.to_thread(platform.deployments.counts, d.name))


async def _check(session: SessionDep, model_id: str | None, eval_dataset_id: str | None) -> None:
    if eval_dataset_id is not None:
        dataset = await session.get(Dataset, eval_dataset_id)
        if dataset is None:
            raise ConfigError(f"eval_dataset_id: no dataset {eval_dataset_id!r}")
        if dataset.kind not in ("chat", "prompt_completion", "problems"):
            raise ConfigError(
                f"eval_dataset_id: {dataset.id} holds {dataset.kind} rows; the gate's eval set "
                "is chat, prompt_completion or problems rows"
            )
    if model_id is not None and await session.get(Model, model_id) is None:
        raise ConfigError(f"model_id: no model {model_id!r} in the library")


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_deployment(
    body: DeploymentCreate, session: SessionDep, platform: PlatformDep
) -> DeploymentPublic:
    """Serve a library model under a name; optionally log its traffic and retrain it."""
    if await session.get(Deployment, body.name) is not None:
        raise ConflictError(f"deployment {body.name} exists; PATCH it")
    service.redactor(body.redact)  # refuse a hook that cannot be imported now
    await _check(session, body.model_id, body.eval_dataset_id)
    deployment = Deployment(**body.model_dump(), feedback_used=0, history=[])
    if body.schedule:
        deployment.next_cycle_at = service.next_time(body.schedule, platform.deployments.clock())
    session.add(deployment)
    await session.commit()
    return await _public(platform, deployment)


@router.get("")
async def read_deployments(session: SessionDep, platform: PlatformDep) -> list[DeploymentPublic]:
    """Every deployment, by name."""
    rows = (await session.scalars(select(Deployment).order_by(Deployment.name))).all()
    return [await _public(platform, d) for d in rows]


@router.get("/{name}")
async def read_deployment(
    name: str, session: SessionDep, platform: PlatformDep
) -> DeploymentPublic:
    """One deployment: what it serves, its loop's settings, the cycle in flight, its history."""
    return await _public(platform, await service.get(session, name))


@router.patch("/{name}")
async def update_deployment(
    name: str, body: DeploymentSettings, session: SessionDep, platform: PlatformDep
) -> DeploymentPublic:
    """Change its loop's settings (the fields given); the served model changes only through
    the promotion gate."""
    deployment = await service.get(session, name)
    given = body.model_dump(exclude_unset=True)
    await _check(session, None, given.get("eval_dataset_id"))
    if "redact" in given:
        service.redactor(given["redact"])
    for key, value in given.items():
        setattr(deployment, key, value)
    if "schedule" in given:
        clock = platform.deployments.clock()
        deployment.next_cycle_at = (
            service.next_time(body.schedule, clock) if body.schedule else None
        )
    await session.commit()
    return await _public(platform, deployment)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_deployment(name: str, session: SessionDep, platform: PlatformDep) -> None:
    """Stop serving the name and delete its logged traffic and feedback (its datasets and
    models stay)."""
    deployment = await service.get(session, name)
    await session.delete(deployment)
    await session.commit()
    await asyncio.to_thread(platform.deployments.forget, name)


@router.post("/{name}/feedback", status_code=status.HTTP_201_CREATED)
async def add_feedback(
    name: str, body: FeedbackCreate, session: SessionDep, platform: PlatformDep
) -> dict[str, Any]:
    """A thumbs up or down on a logged completion (its `id` from /v1), with the answer it
    should have given if you have it: the next cycle trains on it."""
    deployment = await service.get(session, name)
    return await asyncio.to_thread(
        platform.deployments.add_feedback,
        deployment,
        body.completion_id,
        body.rating,
        body.correction,
    )


class LoggedCompletion(BaseModel):
    """One completion served under the name, as logged (redacted), with its feedback."""

    id: str  # the /v1 completion's id, which feedback names
    at: float  # when, seconds since the epoch
    model_id: str  # the library model that answered
    messages: list[dict[str, str]]  # the conversation it was asked
    answer: str
    rating: Literal["up", "down"] | None  # the latest feedback on it, if any came
    correction: str | None


class TrafficPublic(BaseModel):
    total: int  # logged completions within the retention
    data: list[LoggedCompletion]  # newest first


@router.get("/{name}/traffic", responses={404: {"description": "No such deployment"}})
async def read_traffic(
    name: str,
    session: SessionDep,
    platform: PlatformDep,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> TrafficPublic:
    """The completions logged under the name (a deployment with `log_traffic`), newest first,
    each with the feedback it got: what the next cycle will learn from."""
    deployment = await service.get(session, name)
    total, rows = await asyncio.to_thread(
        platform.deployments.traffic_page, deployment, offset, limit
    )
    return TrafficPublic(total=total, data=[LoggedCompletion.model_validate(r) for r in rows])


@router.post("/{name}/cycle")
async def run_cycle(name: str, platform: PlatformDep) -> DeploymentPublic:
    """Start a retraining cycle now, whatever the schedule says (none runs while one is in
    flight): the new feedback becomes a dataset version and a learn job, then the gate."""
    return await _public(platform, await platform.deployments.run_cycle(name))


@router.post("/{name}/promote")
async def promote(name: str, body: PromoteRequest, platform: PlatformDep) -> DeploymentPublic:
    """Put a library model through the promotion gate: an eval job on the deployment's eval
    set, the served model against it; it is served only if it wins with p < 0.05."""
    return await _public(platform, await platform.deployments.promote(name, body.model_id))
