"""/api/datasets: upload (with a field mapping), detect, list, read, download and delete
datasets (preview and statistics: dataset_insights.py)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Query, Request, Response, UploadFile
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.types import Message, Receive

from thinker.data.formats import Format
from thinker.data.kinds import DatasetKind
from thinker.dataprep import detect
from thinker.names import Name
from thinker.server.deps import PlatformDep, SessionDep, require_token
from thinker.server.limits import Offset, json_problems, limit_error, too_deep
from thinker.services import datasets
from thinker.services.dataset_files import detect_and_validate
from thinker.services.datasets import MIB, UploadTooLarge, too_large_message

# Room for the multipart headers and the form fields around the file; the file
# itself is held to the exact limit as it is copied.
FORM_OVERHEAD_BYTES = 64 * 1024


class UploadLimitRoute(APIRoute):
    """Checks the token, then refuses a request body over `max_upload_mb` (413) as it arrives.

    FastAPI reads a whole multipart body (spooling the file to disk) before the handler or any
    dependency runs, so the limit must sit where the bytes come in; it is a setting read at
    run time, which a route's static `max_body_size` cannot be.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def limited(request: Request) -> Response:
            if request.method != "POST":
                return await handler(request)
            await require_token(request)  # read no body from a caller without a token
            max_mb: int = request.app.state.platform.settings.max_upload_mb
            limit = max_mb * MIB + FORM_OVERHEAD_BYTES
            length = request.headers.get("content-length", "")
            if length.isdigit() and int(length) > limit:
                raise HTTPException(413, too_large_message(max_mb))
            try:
                return await handler(
                    Request(request.scope, _counted(request.receive, limit, max_mb))
                )
            except UploadTooLarge as e:
                raise HTTPException(413, str(e)) from e

        return limited


def _counted(receive: Receive, limit: int, max_mb: int) -> Receive:
    """`receive`, raising 413 once more than `limit` body bytes have come (no Content-Length,
    or one that understates)."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise HTTPException(413, too_large_message(max_mb))
        return message

    return counted


router = APIRouter(prefix="/datasets", tags=["datasets"], route_class=UploadLimitRoute)


class DatasetPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    kind: DatasetKind
    source_format: Format  # the uploaded file's format; what is stored is always JSONL
    filename: str  # as uploaded; a label
    num_rows: int
    size_bytes: int  # of the stored JSONL
    sha256: str  # of the stored JSONL
    builtin: bool  # a shipped example
    created_at: datetime  # UTC (stored as epoch seconds)
    version: int  # 1 for a dataset made from a file; n + 1 for a new version of version n
    root_id: str | None  # the lineage's first version; None: this is it
    parent_id: str | None  # the version this one was made from
    mapping: dict[str, str] | None  # canonical field -> source expression applied; None: as is
    origin: dict[str, Any] | None  # where the rows came from beyond an upload (an import)


class DatasetJob(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    state: str


class DatasetModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    job_id: str
    step: int
    lifecycle: str


class DatasetVersion(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    version: int
    num_rows: int
    sha256: str
    created_at: datetime


class DatasetDetail(DatasetPublic):
    jobs: list[DatasetJob]  # jobs that read this version (main, eval or stage data), oldest first
    models: list[DatasetModel]  # models trained on this version, oldest first
    versions: list[DatasetVersion]  # every version of its lineage, this one included


class DatasetVersionCreate(BaseModel):
    """How a new version differs from the one it is made from; lines count from 1."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = Field(None, max_length=datasets.NAME_CHARS)  # default: the parent's
    kind: DatasetKind | None = None  # default: the parent's
    mapping: dict[str, str] | None = None  # applied to every row (same language as uploads)
    delete: list[int] = Field(default_factory=list, max_length=100_000)
    replace: dict[int, dict[str, JsonValue]] = Field(default_factory=dict)
    append: list[dict[str, JsonValue]] = Field(default_factory=list, max_length=100_000)


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]
    count: int  # matching datasets in all, not just this page


class ErrorPublic(BaseModel):
    line: int  # the line (JSONL, CSV) or row (JSON, Parquet); 0 = the whole file
    field: str | None
    message: str
    kind: str  # missing | wrong_type | empty | malformed_json | duplicate | ... (validation.py)


class ValidationPublic(BaseModel):
    kind: str | None  # what the rows were checked as; None = only what every row needs
    mapping: dict[str, str]  # what was applied to every row
    rows: int
    error_count: int
    error_counts: dict[str, int]  # by error kind
    errors: list[ErrorPublic]  # the first 50, by line


class DetectionBase(BaseModel):
    format: Format
    kind: DatasetKind | None  # None = cannot tell
    mapping: dict[str, str]  # proposed: canonical field -> source expression
    fields: list[str]  # source fields, in first-seen order
    suggestions: list[str]  # guesses to confirm, and why the file does not fit a kind
    sample: list[dict[str, Any]]  # the first rows as read (at most 5)


class DetectionPublic(DetectionBase):
    validation: ValidationPublic  # the whole file under the given or proposed kind and mapping


class UploadRejectedPublic(BaseModel):
    detail: str
    errors: list[ErrorPublic]  # the first 50, by line
    error_count: int
    error_counts: dict[str, int]  # by error kind
    detection: DetectionBase | None = None  # set when a mapping or kind must be confirmed


MappingForm = Annotated[
    str | None, Form(description='JSON object, e.g. {"prompt": "question", "completion": "answer"}')
]


def _mapping(text: str | None) -> dict[str, str] | None:
    """The `mapping` form field as a dict; its problems are a 422 like any form error."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise HTTPException(422, f"mapping is not JSON: {e.msg}") from e
    except RecursionError:
        raise limit_error([too_deep("mapping")]) from None
    if problems := json_problems(value, "mapping"):
        raise limit_error(problems)
    if problems := detect.mapping_problems(value):
        raise HTTPException(422, f"invalid mapping: {'; '.join(problems)}")
    return value  # type: ignore[no-any-return]


STORED = {507: {"description": "The disk is full: nothing was stored"}}
DAMAGED = {503: {"description": "The dataset's file is missing on disk or changed size"}}


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    responses={
        404: {"description": "`parent_id` names no dataset"},
        422: {"model": UploadRejectedPublic, "description": "rejected rows or fields"},
        **STORED,
    },
)
async def create_dataset(
    platform: PlatformDep,
    file: UploadFile,
    name: Annotated[Name | None, Form(max_length=datasets.NAME_CHARS)] = None,
    kind: Annotated[DatasetKind | None, Form()] = None,
    mapping: MappingForm = None,
    parent_id: Annotated[str | None, Form(max_length=32)] = None,
) -> DatasetPublic:
    """Upload a JSONL, JSON, CSV or Parquet file as a dataset (or, with `parent_id`, as the next
    version of one); every row is mapped and checked."""
    fields = _mapping(mapping)
    dataset = await platform.datasets.store_upload(
        file.file, file.filename, name, kind, fields, parent_id
    )
    return DatasetPublic.model_validate(dataset)


@router.post(
    "/{dataset_id}/versions",
    status_code=201,
    responses={409: {"description": "The edit changes nothing"}, **DAMAGED, **STORED},
)
async def create_dataset_version(
    platform: PlatformDep, dataset_id: str, body: DatasetVersionCreate
) -> DatasetPublic:
    """A new version of a dataset: its rows re-mapped or edited; the original never changes."""
    edit = datasets.Edit(
        mapping=body.mapping or {},
        delete=set(body.delete),
        replace=dict(body.replace),
        append=list(body.append),
    )
    dataset = await platform.datasets.new_version(dataset_id, edit, body.name, body.kind)
    return DatasetPublic.model_validate(dataset)


@router.post("/detect", responses=STORED)
async def detect_dataset(
    platform: PlatformDep,
    file: UploadFile,
    kind: Annotated[DatasetKind | None, Form()] = None,
    mapping: MappingForm = None,
) -> DetectionPublic:
    """Detect a file's format, kind and field mapping, and validate it whole; stores nothing."""
    fields = _mapping(mapping)
    async with platform.datasets.received(file.file) as raw:
        found, checked = await asyncio.to_thread(
            detect_and_validate, raw, file.filename, kind, fields, platform.settings
        )
    return DetectionPublic(**asdict(found), validation=ValidationPublic(**checked))


@router.get("")
async def read_datasets(
    session: SessionDep,
    kind: DatasetKind | None = None,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> DatasetsPublic:
    """List datasets, newest first, optionally of one kind."""
    rows, count = await datasets.list_datasets(session, kind, offset, limit)
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows], count=count)


@router.get("/{dataset_id}")
async def read_dataset(session: SessionDep, dataset_id: str) -> DatasetDetail:
    """One dataset version, with the jobs and models that used it and its other versions."""
    dataset = await datasets.get_dataset(session, dataset_id)
    jobs = await datasets.dataset_jobs(session, dataset.id)
    models = await datasets.dataset_models(session, dataset.id)
    versions = await datasets.dataset_versions(session, dataset)
    return DatasetDetail(
        **DatasetPublic.model_validate(dataset).model_dump(),
        jobs=[DatasetJob.model_validate(j) for j in jobs],
        models=[DatasetModel.model_validate(m) for m in models],
        versions=[DatasetVersion.model_validate(v) for v in versions],
    )


@router.get("/{dataset_id}/download", response_class=FileResponse, responses=DAMAGED)
async def download_dataset(
    platform: PlatformDep, session: SessionDep, dataset_id: str
) -> FileResponse:
    """The stored dataset as JSONL (one object a line)."""
    dataset = await datasets.get_dataset(session, dataset_id)
    path = platform.datasets.stored_file(dataset)
    filename = (re.sub(r"[^A-Za-z0-9._-]+", "_", dataset.name).strip("._") or dataset.id) + ".jsonl"
    return FileResponse(path, media_type="application/x-ndjson", filename=filename)


@router.delete(
    "/{dataset_id}",
    status_code=204,
    responses={409: {"description": "An unfinished job reads the dataset"}},
)
async def delete_dataset(platform: PlatformDep, dataset_id: str) -> None:
    """Delete a dataset and its file; refused (409) while an unfinished job reads it."""
    await platform.datasets.remove(dataset_id)
