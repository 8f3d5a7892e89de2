"""/api/datasets/import: Hugging Face imports, run in the background (`thinker.server.imports`).

A source is a hub id (`org/name`) or a directory inside the server's import directory
(`<data dir>/imports`); any other path is refused before anything starts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from thinker.data.kinds import DatasetKind
from thinker.dataprep.hf_import import NAME_PART, HubRequest, HubSourceError, resolve_server_source
from thinker.names import Name
from thinker.server.deps import PlatformDep
from thinker.services import imports
from thinker.services.datasets import NAME_CHARS

router = APIRouter(prefix="/datasets", tags=["datasets"])

NamePart = Annotated[str, Field(pattern=f"^{NAME_PART.pattern}$")]
FieldName = Annotated[str, Field(min_length=1, max_length=200)]


def _imports(platform: PlatformDep) -> imports.Imports:
    return platform.imports


ImportsDep = Annotated[imports.Imports, Depends(_imports)]


class DatasetImportCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=500)  # hub id, or a directory in imports/
    config: NamePart | None = None  # the config (subset); None: the only or default one
    split: NamePart | None = None  # None or "all": every split, into one dataset
    revision: NamePart | None = None  # a branch, tag or commit (hub ids only)
    token: SecretStr | None = Field(None, max_length=500)  # for this request only, never kept
    limit: int | None = Field(None, ge=1)  # at most this many rows in all
    mapping: dict[FieldName, FieldName] | None = Field(None, max_length=20)  # canonical: source
    name: Name | None = Field(None, max_length=NAME_CHARS)  # default: source:config/split
    kind: DatasetKind | None = None  # default: detected from the rows


class DatasetImportPublic(BaseModel):
    import_id: str
    source: str
    state: Literal["running", "succeeded", "failed"]
    stage: Literal["reading", "storing"] | None  # None once ended
    rows_done: int
    rows_total: int | None  # None while unknown (streamed from the hub)
    dataset_id: str | None  # once succeeded
    error: str | None  # once failed: what went wrong and what to do
    errors: list[dict[str, Any]] | None  # bad rows (line, field, message), as for an upload
    error_count: int | None
    kind: str | None  # the kind the rows are stored as, once proposed (or given)
    mapping: dict[str, str] | None  # canonical field: source expression, once proposed
    suggestions: list[str]  # detection's guesses for the user to check


@router.post(
    "/import",
    status_code=202,
    responses={409: {"description": "Imports are running at the limit already"}},
)
async def import_dataset(
    body: DatasetImportCreate, platform: PlatformDep, running: ImportsDep
) -> DatasetImportPublic:
    """Start importing a Hugging Face dataset; follow it by GET or `dataset_import` events."""
    settings = platform.settings
    if body.limit is not None and body.limit > settings.max_rows:
        raise HubSourceError(f"limit is over {settings.max_rows}, the most rows a dataset holds")
    request = HubRequest(
        source=resolve_server_source(body.source, settings.imports_dir),
        config=body.config,
        split=None if body.split == "all" else body.split,
        revision=body.revision,
        limit=body.limit,
        display=body.source,
    )
    record = running.start(
        request,
        token=body.token.get_secret_value() if body.token else None,
        name=body.name,
        kind=body.kind,
        mapping=body.mapping,
    )
    return DatasetImportPublic(**record.public())


@router.get("/imports/{import_id}")
async def read_dataset_import(import_id: str, running: ImportsDep) -> DatasetImportPublic:
    """One import's state and progress."""
    return DatasetImportPublic(**running.get(import_id).public())
