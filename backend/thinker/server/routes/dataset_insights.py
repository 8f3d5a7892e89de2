"""/api/datasets/{id}/preview and /stats: a stored dataset as training will see it.

Both render rows with a base model's tokenizer and a renderer (thinker.data.stats). The base
model must be one the platform already knows (a built-in, a job's base model, or a model id),
as for sampling: a request alone never makes the server read a path or fetch a hub model.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, JsonValue
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.dataprep import stats
from thinker.dataprep.stats import DatasetStats, PreviewRow, RenderOptions
from thinker.engine.local.models import BUILTIN_CONFIGS
from thinker.errors import ConfigError, NotFoundError
from thinker.renderers import TrainOnWhat
from thinker.server.deps import PlatformDep, SessionDep
from thinker.server.limits import Offset
from thinker.server.platform import Platform
from thinker.server.routes.datasets import DAMAGED
from thinker.services import datasets
from thinker.store import Job

router = APIRouter(prefix="/datasets", tags=["datasets"])

MAX_LENGTH_LIMIT = 1 << 20  # tokens; a bound on the query, far above any model's context
LISTED_JOB_MODELS = 50  # base models of jobs named in an "unknown base model" error

BaseModelQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=300,
        description="a built-in model, the base model of a job, or a model id",
    ),
]
RendererQuery = Annotated[
    str | None, Query(max_length=64, description="default: the base model's own")
]
TrainOnWhatQuery = Annotated[TrainOnWhat, Query(description="SL kinds only")]
MaxLengthQuery = Annotated[int, Query(gt=1, le=MAX_LENGTH_LIMIT)]


class DatasetPreview(BaseModel):
    id: str
    kind: str
    offset: int
    limit: int
    total: int  # rows in the dataset
    rows: list[dict[str, JsonValue]]  # as stored
    base_model: str
    renderer: str
    train_on_what: TrainOnWhat
    max_length: int
    rendered: list[PreviewRow]  # the same rows as training sees them


@router.get("/{dataset_id}/preview", responses=DAMAGED)
async def read_dataset_preview(
    platform: PlatformDep,
    session: SessionDep,
    dataset_id: str,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    base_model: BaseModelQuery = stats.DEFAULT_BASE_MODEL,
    renderer: RendererQuery = None,
    train_on_what: TrainOnWhatQuery = stats.DEFAULT_TRAIN_ON_WHAT,
    max_length: MaxLengthQuery = stats.DEFAULT_MAX_LENGTH,
) -> DatasetPreview:
    """Rows of a dataset from `offset`, as stored and rendered with trained tokens marked."""
    dataset = await datasets.get_dataset(session, dataset_id)
    options = await _options(platform, session, base_model, renderer, train_on_what, max_length)
    path = platform.datasets.stored_file(dataset)
    rows = await datasets.preview_rows(path, offset, limit)
    numbered = [(offset + i + 1, row) for i, row in enumerate(rows)]
    rendering, rendered = await asyncio.to_thread(_render, numbered, dataset.kind, options)
    return DatasetPreview(
        id=dataset.id,
        kind=dataset.kind,
        offset=offset,
        limit=limit,
        total=dataset.num_rows,
        rows=rows,
        base_model=options.base_model,
        renderer=rendering.renderer.name,
        train_on_what=options.train_on_what,
        max_length=options.max_length,
        rendered=rendered,
    )


@router.get("/{dataset_id}/stats", responses=DAMAGED)
async def read_dataset_stats(
    platform: PlatformDep,
    session: SessionDep,
    dataset_id: str,
    base_model: BaseModelQuery = stats.DEFAULT_BASE_MODEL,
    renderer: RendererQuery = None,
    train_on_what: TrainOnWhatQuery = stats.DEFAULT_TRAIN_ON_WHAT,
    max_length: MaxLengthQuery = stats.DEFAULT_MAX_LENGTH,
) -> DatasetStats:
    """Token statistics of a whole dataset rendered for training (computed once, then cached)."""
    dataset = await datasets.get_dataset(session, dataset_id)
    options = await _options(platform, session, base_model, renderer, train_on_what, max_length)
    path = platform.datasets.stored_file(dataset)
    return await asyncio.to_thread(stats.cached_stats, path, dataset.kind, options)


def _render(
    rows: list[tuple[int, dict[str, JsonValue]]], kind: str, options: RenderOptions
) -> tuple[stats.Rendering, list[PreviewRow]]:
    rendering = stats.load_rendering(options)
    return rendering, stats.preview(rows, kind, rendering, len(rows))  # type: ignore[arg-type]


async def _options(
    platform: Platform,
    session: AsyncSession,
    base_model: str,
    renderer: str | None,
    train_on_what: TrainOnWhat,
    max_length: int,
) -> RenderOptions:
    """The render options of a request, its base model resolved as sampling resolves it.

    Raises:
        ConfigError: The base model is not one the platform knows (422, naming those it does).
    """
    try:
        ref = await platform.pool.resolve(base_model)
    except NotFoundError:
        known = sorted(BUILTIN_CONFIGS) + await _job_base_models(session)
        raise ConfigError(
            f"unknown base_model {base_model[:300]!r}; use a built-in model, the base model of "
            f"a job, or a model id: {', '.join(dict.fromkeys(known))}"
        ) from None
    return RenderOptions(
        base_model=ref.base_model,
        renderer=renderer or ref.renderer,  # a model id brings the renderer its job used
        train_on_what=train_on_what,
        max_length=max_length,
    )


async def _job_base_models(session: AsyncSession) -> list[str]:
    query = select(Job.base_model).distinct().order_by(Job.base_model).limit(LISTED_JOB_MODELS)
    return list((await session.scalars(query)).all())
