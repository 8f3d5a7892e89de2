"""The model library: every sampler checkpoint of every job, with its lineage and its files.

A local job keeps its checkpoints in its run directory, `<data dir>/runs/<job id>/` (an RLHF
stage's in `runs/<job id>/<stage>/`), so a model's adapter is `checkpoints.resolve(sampler_path,
that directory)`. Tinker models have no files here: their weights stay on Tinker's servers.

An export folds the adapter into the base model's weights and saves a full model (safetensors
only, with its tokenizer) to `<data dir>/exports/<model id>/`, which the local engine can use
as a `base_model`. It is written under a temporary name and renamed into place, so a crashed
export leaves no half-written model behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import torch
from peft import PeftModel
from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.engine.local import checkpoints
from thinker.engine.local.models import Placement, load_base_model, load_tokenizer
from thinker.engine.local.training import ADAPTER_FILE
from thinker.errors import ConflictError, NotFoundError, StorageError
from thinker.files import is_disk_full, nearly_full, no_space_left
from thinker.jobs.start import local_checkpoint
from thinker.settings import Settings
from thinker.store import Dataset, Job, Model

Lifecycle = Literal["active", "deprecated", "archived"]
LIFECYCLES: tuple[str, ...] = get_args(Lifecycle)
ADAPTER_CONFIG = "adapter_config.json"
EXPORT_META = "thinker_export.json"
_CHUNK = 1 << 20
_export_locks: dict[str, threading.Lock] = {}  # one export of a model at a time


@dataclass(frozen=True)
class ModelFilters:
    job_id: str | None = None
    base_model: str | None = None
    dataset_id: str | None = None
    lifecycle: Lifecycle | None = None


@dataclass(frozen=True)
class Lineage:
    job: Job | None
    dataset: Dataset | None  # None when the model has no dataset or it was deleted


@dataclass(frozen=True)
class ExportInfo:
    path: Path
    files: list[str]
    size_bytes: int


# ---- rows --------------------------------------------------------------------------------
async def list_models(
    session: AsyncSession, filters: ModelFilters, offset: int, limit: int
) -> tuple[list[Model], int]:
    """One page of models matching `filters`, newest first, and how many match in all."""
    conditions = [
        getattr(Model, field) == value
        for field, value in vars(filters).items()
        if value is not None
    ]
    count = await session.scalar(select(func.count()).select_from(Model).where(*conditions))
    rows = await session.scalars(
        select(Model)
        .where(*conditions)
        .order_by(Model.created_at.desc(), Model.id)
        .offset(offset)
        .limit(limit)
    )
    return list(rows), count or 0


async def get_model(session: AsyncSession, model_id: str) -> Model:
    model = await session.get(Model, model_id)
    if model is None:
        raise NotFoundError(f"no model {model_id!r}")
    return model


async def lineage(session: AsyncSession, model: Model) -> Lineage:
    dataset = await session.get(Dataset, model.dataset_id) if model.dataset_id else None
    return Lineage(job=await session.get(Job, model.job_id), dataset=dataset)


async def update_model(
    session: AsyncSession, model_id: str, name: str | None, lifecycle: Lifecycle | None
) -> Model:
    """Rename a model and/or move it to another lifecycle state; None leaves a field as is.

    Raises:
        StorageError: The database's disk is full.
    """
    model = await get_model(session, model_id)
    if name is not None:
        model.name = name
    if lifecycle is not None:
        model.lifecycle = lifecycle
    try:
        await session.commit()
    except DBAPIError as e:
        if not is_disk_full(e):
            raise
        raise StorageError(
            "no space left on device for the database: the change was not saved"
        ) from e
    return model


async def delete_model(session: AsyncSession, settings: Settings, model_id: str) -> None:
    """Remove the row, then its sampler weights and export; training states stay for resumes."""
    model = await get_model(session, model_id)
    directory = _local_dir_or_none(settings, model)
    await session.delete(model)
    await session.commit()
    # Files go after the commit: a failed commit then leaves the model whole, and a failed
    # removal leaves only unreferenced files.
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
    shutil.rmtree(export_dir(settings, model_id), ignore_errors=True)


# ---- files -------------------------------------------------------------------------------
def sampler_dir(settings: Settings, model: Model) -> Path:
    """The directory of the model's PEFT adapter on this server.

    Raises:
        ConflictError: a Tinker model (its weights are not stored here).
        NotFoundError: its files are gone.
    """
    if model.backend != "local" or not checkpoints.is_path(model.sampler_path):
        raise ConflictError(
            f"model {model.id} was trained on Tinker: its weights live on Tinker's servers, not "
            f"on this one; fetch them with the Tinker SDK from {model.sampler_path}"
        )
    directory = local_checkpoint(settings.runs_dir, model, model.sampler_path)
    if not ((directory / ADAPTER_FILE).is_file() and (directory / ADAPTER_CONFIG).is_file()):
        raise NotFoundError(f"the adapter files of model {model.id} are gone from {directory}")
    return directory


def _local_dir_or_none(settings: Settings, model: Model) -> Path | None:
    try:
        return sampler_dir(settings, model)
    except (ConflictError, NotFoundError):
        return None


def adapter_files(settings: Settings, model: Model) -> list[tuple[Path, str]]:
    """(file, name in the archive) for the PEFT adapter: its config and its safetensors.

    Raises:
        DamagedError: They fail their checksums (a damaged file is not served).
    """
    directory = sampler_dir(settings, model)
    checkpoints.verify(directory)
    return [(directory / name, name) for name in (ADAPTER_CONFIG, ADAPTER_FILE)]


def export_dir(settings: Settings, model_id: str) -> Path:
    checkpoints.check_name(model_id)
    return settings.data_dir / "exports" / model_id


def read_export(settings: Settings, model_id: str) -> ExportInfo | None:
    """The finished export of a model, or None when it has not been exported."""
    directory = export_dir(settings, model_id)
    if not (directory / EXPORT_META).is_file():
        return None
    files = sorted(p for p in directory.iterdir() if p.is_file())
    return ExportInfo(
        path=directory,
        files=[p.name for p in files],
        size_bytes=sum(p.stat().st_size for p in files),
    )


def export_files(settings: Settings, model_id: str) -> list[tuple[Path, str]]:
    export = read_export(settings, model_id)
    if export is None:
        raise NotFoundError(
            f"model {model_id} has not been exported yet: POST /api/models/{model_id}/export"
        )
    return [(export.path / name, name) for name in export.files]


# ---- export ------------------------------------------------------------------------------
async def export_model(settings: Settings, model: Model) -> ExportInfo:
    """Merge the model's adapter into its base model and save it; an earlier export is kept.

    Raises:
        DamagedError: The adapter fails its checksums.
        StorageError: The disk filled up (nothing of the export is left).
    """
    source = sampler_dir(settings, model)
    await asyncio.to_thread(checkpoints.verify, source)
    meta: dict[str, object] = {
        "model_id": model.id,
        "base_model": model.base_model,
        "sampler_path": model.sampler_path,
        "job_id": model.job_id,
        "step": model.step,
        "created": time.time(),
    }
    return await asyncio.to_thread(_export_once, settings, model.base_model, source, meta)


def _export_once(
    settings: Settings, base_model: str, source: Path, meta: dict[str, object]
) -> ExportInfo:
    model_id = str(meta["model_id"])
    # A thread lock, not an asyncio one: the work runs in a thread, and the lock must not be
    # tied to one event loop.
    with _export_locks.setdefault(model_id, threading.Lock()):
        done = read_export(settings, model_id)
        if done is None:  # checkpoints never change, so neither does their merge
            _merge_and_save(base_model, source, export_dir(settings, model_id), meta)
            done = read_export(settings, model_id)
    assert done is not None
    return done


def _merge_and_save(
    base_model: str, adapter_dir: Path, target: Path, meta: dict[str, object]
) -> None:
    """Load base + adapter on the CPU in fp32, fold the adapter in, save atomically."""
    # The CPU, so an export never competes with training jobs for a GPU; fp32, so that a
    # small adapter delta is not rounded away by bf16 when it is added to the weights.
    base = load_base_model(base_model, Placement(torch.device("cpu"), torch.float32))
    # PEFT reads adapter_model.safetensors (sampler_dir checked it exists), never a pickle.
    merged = PeftModel.from_pretrained(base, adapter_dir, is_trainable=False).merge_and_unload()
    tokenizer = load_tokenizer(base_model)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        merged.save_pretrained(tmp, max_shard_size="5GB")  # transformers 5: safetensors only
        tokenizer.save_pretrained(tmp)
        (tmp / EXPORT_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        _fsync_files(tmp)
        shutil.rmtree(target, ignore_errors=True)  # a crashed export's leftovers, if any
        os.rename(tmp, target)
    except Exception as e:
        if not (is_disk_full(e) or nearly_full(target.parent)):
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # first, so that the free space said is true
        raise no_space_left(f"exporting model {meta['model_id']}", target.parent) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync_files(directory: Path) -> None:
    for path in directory.iterdir():
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())


# ---- zip archives, streamed --------------------------------------------------------------
class _Chunks:
    """A write-only sink that zipfile writes into and the response drains."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        return None

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def zip_stream(files: list[tuple[Path, str]]) -> Iterator[bytes]:
    """A zip archive of `files`, produced chunk by chunk: a 16 GB export needs no temp copy."""
    sink = _Chunks()
    # zipfile writes to an unseekable sink with data descriptors; weights barely compress.
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:  # type: ignore[arg-type]
        for path, name in files:
            with path.open("rb") as src, archive.open(name, "w", force_zip64=True) as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    yield sink.take()
    yield sink.take()
