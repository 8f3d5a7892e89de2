"""/api/base-models: what a job's base_model field can name, as suggestions for the forms."""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import select

from thinker.engine.local.hub import cached_hub_models
from thinker.engine.local.models import BUILTIN_CONFIGS
from thinker.jobs.states import JobState
from thinker.server.deps import SessionDep
from thinker.store import Job, Model

router = APIRouter(prefix="/base-models", tags=["base-models"])
LIBRARY_LIMIT = 50  # newest library models listed; any other mdl_ id is accepted too


class BaseModelOption(BaseModel):
    id: str  # what to put in a job's base_model
    kind: Literal["builtin", "cached", "library"]
    label: str
    detail: str


class BaseModelOptions(BaseModel):
    data: list[BaseModelOption]


BUILTIN_DETAIL = {
    "thinker/tiny": "random weights, byte tokenizer: learns toy tasks in a minute on a CPU",
    "thinker/random-qwen3-0.6b": "Qwen3-0.6B's shape, random weights: for GPU benchmarks",
    "thinker/random-llama3.1-8b": "Llama-3.1-8B's shape, random weights: for GPU benchmarks",
    "thinker/random-llama3.1-70b": (
        "Llama-3.1-70B's shape, random weights: for benchmarks sharded over several GPUs"
    ),
}


@router.get("")
async def read_base_models(session: SessionDep) -> BaseModelOptions:
    """Built-in models, hub models in the server's cache, and library models to continue.
    Any hub id or directory on the server is accepted as well."""
    options = [
        BaseModelOption(id=n, kind="builtin", label=n, detail=BUILTIN_DETAIL.get(n, "built-in"))
        for n in sorted(BUILTIN_CONFIGS, key=lambda n: (n != "thinker/tiny", n))  # tiny first
    ]
    cached = await asyncio.to_thread(cached_hub_models)
    options += [
        BaseModelOption(id=n, kind="cached", label=n, detail="in the Hugging Face cache")
        for n in cached
    ]
    rows = await session.execute(
        select(Model, Job.name)
        .join(Job, Job.id == Model.job_id)
        .where(Model.state_path.is_not(None), Job.state == JobState.SUCCEEDED)
        .order_by(Model.created_at.desc())
        .limit(LIBRARY_LIMIT)
    )
    for model, job_name in rows.all():
        options.append(
            BaseModelOption(
                id=model.id,
                kind="library",
                label=model.name,
                detail=f"step {model.step} of job {job_name}, on {model.base_model}: continue it",
            )
        )
    return BaseModelOptions(data=options)
