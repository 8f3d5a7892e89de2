"""GET /api/health: is the server up, and what is it running on."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from thinker import __version__
from thinker.jobs.states import ACTIVE_STATES, JobState
from thinker.server.deps import PlatformDep

router = APIRouter(tags=["health"])


class HealthPublic(BaseModel):
    status: str
    version: str
    database: str  # sqlite | postgresql
    auth_required: bool
    gpus: int
    queued_jobs: int
    running_jobs: int


@router.get("/health")
async def read_health(platform: PlatformDep) -> HealthPublic:
    """Liveness, version, database kind and job counts."""
    counts = await platform.jobs.counts()
    return HealthPublic(
        status="ok",
        version=__version__,
        database=platform.engine.dialect.name,
        auth_required=platform.settings.auth_required,
        gpus=platform.jobs.gpus,
        queued_jobs=counts.get(JobState.QUEUED, 0),
        running_jobs=sum(counts.get(state, 0) for state in ACTIVE_STATES),
    )
