"""/api/models: the model library (every sampler checkpoint of every job), its files, exports."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Form, Query, UploadFile, status
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictFloat, StrictInt
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.errors import ConfigError
from thinker.names import Name
from thinker.server.deps import PlatformDep, SessionDep
from thinker.server.platform import Platform
from thinker.server.routes.jobs import JobPublic
from thinker.services import evaluations, learning, tinker_archives
from thinker.services import models as service
from thinker.store import Dataset, Model

router = APIRouter(prefix="/models", tags=["models"])
_ZIP: dict[int | str, dict[str, object]] = {200: {"content": {"application/zip": {}}}}
# The statuses a route sends besides those every route documents (server/openapi_doc.py).
_TINKER: dict[int | str, dict[str, object]] = {
    409: {"description": "A Tinker model: its weights are not stored on this server"}
}
_TAR: dict[int | str, dict[str, object]] = {200: {"content": {"application/x-tar": {}}}}
_DAMAGED: dict[int | str, dict[str, object]] = {
    503: {"description": "Its files fail their checksums (damaged on disk): not served"}
}
_FULL_DISK: dict[int | str, dict[str, object]] = {
    507: {"description": "The disk is full: nothing half-written was kept"}
}


class ModelPublic(BaseModel):
    id: str
    name: str
    job_id: str
    dataset_id: str | None
    base_model: str
    backend: str  # local | tinker
    step: int
    stage: str | None  # rlhf: sl | rm | rl
    sampler_path: str  # tinker://<run>/sampler_weights/<name> (local or Tinker's)
    state_path: str | None
    metrics: dict[str, JsonValue]
    lifecycle: service.Lifecycle
    created_at: float

    @classmethod
    def of(cls, row: Model) -> ModelPublic:
        return cls.model_validate(row, from_attributes=True)


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
    count: int  # all that match the filters, not just this page


class DatasetRef(BaseModel):
    id: str
    name: str | None  # None when the dataset has been deleted since


class JobRef(BaseModel):
    id: str
    name: str
    algorithm: str
    state: str


class ParentRef(BaseModel):
    id: str  # the library model its job continued from
    name: str | None  # None when that model has been deleted since


class ModelLineage(BaseModel):
    base_model: str
    parent_model: ParentRef | None  # what its job started from; None: a fresh adapter
    dataset: DatasetRef | None
    job: JobRef | None
    step: int
    stage: str | None
    metrics: dict[str, JsonValue]


class ExportPublic(BaseModel):
    path: str  # on the server; usable as `base_model` by local jobs
    files: list[str]
    size_bytes: int

    @classmethod
    def of(cls, export: service.ExportInfo) -> ExportPublic:
        return cls(path=str(export.path), files=export.files, size_bytes=export.size_bytes)


class ModelDetail(ModelPublic):
    lineage: ModelLineage
    export: ExportPublic | None  # None until POST /api/models/{id}/export


class ModelUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = Field(None, min_length=1, max_length=300)
    lifecycle: service.Lifecycle | None = None


@router.get("")
async def read_models(
    session: SessionDep,
    job_id: str | None = None,
    base_model: str | None = None,
    dataset_id: str | None = None,
    lifecycle: service.Lifecycle | None = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ModelsPublic:
    """Models, newest first, filtered by job, base model, dataset and lifecycle state."""
    filters = service.ModelFilters(job_id, base_model, dataset_id, lifecycle)
    rows, count = await service.list_models(session, filters, offset, limit)
    return ModelsPublic(data=[ModelPublic.of(r) for r in rows], count=count)


class EvaluatedModel(BaseModel):
    """A model some eval job on the dataset evaluated (its latest name and score)."""

    key: str  # the library id, else what answered
    id: str | None = None  # the library model's
    name: str
    model: str  # a base model or sampler weights
    score_mean: float | None = None  # in the latest job that evaluated it
    job_id: str  # that job


class RankedModel(EvaluatedModel):
    rank: int  # 1: the strongest, the best for this eval set
    rating: float  # Elo scale, 1000 at the geometric mean strength
    strength: float  # Bradley-Terry s_i
    wins: float  # over every counted pairing, ties counted one half
    games: int


class LeaderboardPublic(BaseModel):
    dataset_id: str
    scorer: str  # what scored the answers of the jobs counted
    jobs: list[str]  # the finished eval jobs on that dataset, newest first
    leaderboard: list[RankedModel]  # strongest first
    unranked: list[EvaluatedModel]  # models evaluated but never compared with another


@router.get(
    "/leaderboard", responses={404: {"description": "No finished eval job on that dataset"}}
)
async def read_leaderboard(
    session: SessionDep,
    platform: PlatformDep,
    dataset_id: Annotated[str, Query(max_length=64)],
    scorer: Annotated[str | None, Query(max_length=32)] = None,
) -> LeaderboardPublic:
    """The models evaluated on one eval set, best first: a Bradley-Terry fit (Elo scale) of
    every pairwise result of the finished eval jobs on that dataset scored by `scorer`
    (default: the latest job's). Library models carry their id: the first is the best for
    this eval set."""
    found = await evaluations.leaderboard(session, platform.settings.runs_dir, dataset_id, scorer)
    return LeaderboardPublic(**found)


class LearnRequest(BaseModel):
    """What a model learns from: a dataset of feedback on its answers."""

    model_config = ConfigDict(extra="forbid")

    dataset_id: str = Field(
        max_length=64,
        description="The feedback (the version to learn from): a preferences dataset (A/B "
        "choices, an answer preferred to another: DPO) or a chat dataset (answers marked good, "
        "edited answers: SL).",
    )
    max_steps: StrictInt = Field(
        learning.STEPS,
        ge=1,
        le=10_000,
        description="Optimizer steps over the feedback (a short update: 30 take seconds on "
        "the tiny model).",
    )
    learning_rate: StrictFloat | None = Field(
        None, gt=0, le=1, description="null: the server's proposal for this data and model."
    )
    name: Name | None = Field(None, max_length=200, description='Left out: "<model>+feedback".')


@router.post("/{model_id}/learn", status_code=status.HTTP_201_CREATED)
async def learn_from_feedback(
    model_id: str, body: LearnRequest, session: SessionDep, platform: PlatformDep
) -> JobPublic:
    """Queue a short update of this model on feedback: DPO on preference pairs, SL on chat
    rows, from the model's own training state, every row trained (nothing held out), one
    checkpoint at the end (the next model, whose lineage names this one and the feedback's
    dataset version). The job starts ahead of ordinary ones (priority 10)."""
    model = await service.get_model(session, model_id)
    dataset = await session.get(Dataset, body.dataset_id)
    if dataset is None:
        raise ConfigError(f"dataset_id: no dataset {body.dataset_id!r}")
    job = await learning.learn(
        platform.jobs,
        model,
        dataset,
        max_steps=body.max_steps,
        learning_rate=body.learning_rate,
        name=body.name,
    )
    return JobPublic.of(job, platform.settings.heartbeat_timeout_s)


@router.get("/{model_id}")
async def read_model(model_id: str, session: SessionDep, platform: PlatformDep) -> ModelDetail:
    """One model with its lineage (base model, dataset, job, step, metrics) and export."""
    model = await service.get_model(session, model_id)
    return await _detail(session, platform, model)


@router.patch("/{model_id}", responses=_FULL_DISK)
async def update_model(
    model_id: str, body: ModelUpdate, session: SessionDep, platform: PlatformDep
) -> ModelDetail:
    """Rename a model or change its lifecycle state (active, deprecated, archived)."""
    model = await service.update_model(session, model_id, body.name, body.lifecycle)
    return await _detail(session, platform, model)


@router.delete("/{model_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_model(model_id: str, session: SessionDep, platform: PlatformDep) -> None:
    """Delete a model and its sampler weights and export (training states are kept)."""
    await service.delete_model(session, platform.settings, model_id)
    platform.pool.forget(model_id)  # a loaded copy must not outlive its files


@router.get(
    "/{model_id}/adapter",
    response_class=StreamingResponse,
    responses={**_ZIP, **_TINKER, **_DAMAGED},
)
async def download_adapter(
    model_id: str, session: SessionDep, platform: PlatformDep
) -> StreamingResponse:
    """The LoRA adapter in PEFT format, zipped: adapter_config.json, adapter_model.safetensors
    (503 if they fail their checksums)."""
    model = await service.get_model(session, model_id)
    files = await asyncio.to_thread(service.adapter_files, platform.settings, model)
    return _zip_response(files, f"{model.id}-adapter.zip")


@router.post("/import", status_code=201, responses=_FULL_DISK)
async def import_model(
    session: SessionDep,
    platform: PlatformDep,
    file: UploadFile | None = None,
    path: Annotated[str | None, Form(max_length=4096)] = None,
    base_model: Annotated[str | None, Form(max_length=300)] = None,
    name: Annotated[Name | None, Form(max_length=300)] = None,
) -> ModelPublic:
    """Import a Tinker checkpoint archive (uploaded, or a path on the server) as a library
    model: its LoRA adapter on its base model, ready to chat with and to train further."""
    if (file is None) == (path is None):
        raise ConfigError("give the archive as an uploaded `file` or as a server `path`, not both")
    if path is not None:
        model = await tinker_archives.import_archive(
            session, platform.settings, Path(path), base_model, name
        )
    else:
        assert file is not None
        model = await tinker_archives.import_upload(
            session, platform.settings, file.file, file.filename, base_model, name
        )
    return ModelPublic.of(model)


@router.get(
    "/{model_id}/tinker-archive",
    response_class=FileResponse,
    responses={**_TAR, **_TINKER, **_DAMAGED},
)
async def download_tinker_archive(
    model_id: str, session: SessionDep, platform: PlatformDep
) -> FileResponse:
    """The LoRA adapter as a Tinker checkpoint archive (a tar: adapter_config.json and
    adapter_model.safetensors in Tinker's names), which `POST /api/models/import` reads back."""
    model = await service.get_model(session, model_id)
    target = await asyncio.to_thread(tinker_archives.export_archive, platform.settings, model)
    return FileResponse(target, media_type="application/x-tar", filename=f"{model.id}-tinker.tar")


@router.post("/{model_id}/export", responses={**_TINKER, **_DAMAGED, **_FULL_DISK})
async def export_model(model_id: str, session: SessionDep, platform: PlatformDep) -> ExportPublic:
    """Merge the adapter into the base model and save it (safetensors) on the server."""
    model = await service.get_model(session, model_id)
    return ExportPublic.of(await service.export_model(platform.settings, model))


@router.get("/{model_id}/export/download", response_class=StreamingResponse, responses=_ZIP)
async def download_export(
    model_id: str, session: SessionDep, platform: PlatformDep
) -> StreamingResponse:
    """The exported merged model, zipped (404 until it has been exported)."""
    model = await service.get_model(session, model_id)
    files = service.export_files(platform.settings, model.id)
    return _zip_response(files, f"{model.id}-merged.zip")


async def _detail(session: AsyncSession, platform: Platform, model: Model) -> ModelDetail:
    found = await service.lineage(session, model)
    dataset = None
    if model.dataset_id is not None:
        name = found.dataset.name if found.dataset is not None else None
        dataset = DatasetRef(id=model.dataset_id, name=name)
    job = JobRef.model_validate(found.job, from_attributes=True) if found.job else None
    parent = None
    if found.job is not None and found.job.parent_model_id is not None:
        row = await session.get(Model, found.job.parent_model_id)
        parent = ParentRef(id=found.job.parent_model_id, name=row.name if row else None)
    export = service.read_export(platform.settings, model.id)
    return ModelDetail(
        **ModelPublic.of(model).model_dump(),
        lineage=ModelLineage(
            base_model=model.base_model,
            parent_model=parent,
            dataset=dataset,
            job=job,
            step=model.step,
            stage=model.stage,
            metrics=model.metrics,
        ),
        export=ExportPublic.of(export) if export is not None else None,
    )


def _zip_response(files: list[tuple[Path, str]], filename: str) -> StreamingResponse:
    # `filename` is built from a server-made id: nothing to escape in the header.
    return StreamingResponse(
        service.zip_stream(files),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
