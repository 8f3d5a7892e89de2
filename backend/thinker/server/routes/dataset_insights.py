"""/api/datasets/{id}/preview: a stored dataset's rows."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, JsonValue

from thinker.server import datasets
from thinker.server.deps import PlatformDep, SessionDep

router = APIRouter(prefix="/datasets", tags=["datasets"])


class DatasetPreview(BaseModel):
    id: str
    offset: int
    limit: int
    total: int  # rows in the dataset
    rows: list[dict[str, JsonValue]]


@router.get("/{dataset_id}/preview")
async def read_dataset_preview(
    platform: PlatformDep,
    session: SessionDep,
    dataset_id: str,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> DatasetPreview:
    """Rows of a dataset as stored, from `offset`."""
    dataset = await datasets.get_dataset(session, dataset_id)
    path = datasets.dataset_file(platform.settings, dataset.id)
    rows = await datasets.preview_rows(path, offset, limit)
    return DatasetPreview(
        id=dataset.id, offset=offset, limit=limit, total=dataset.num_rows, rows=rows
    )
