"""The dataset service: store a file as a checked dataset (an upload, an import, a shipped
example, a new version of one), read datasets back, delete them. The upload route, the Hugging
Face import (REST and CLI) and the shipped examples all store through `DatasetService`.

An upload is copied in chunks to a temporary file in the datasets directory (refused past
`max_upload_mb`); `store_file` does the rest, for uploads and imports alike: the file is checked
whole and written as canonical JSONL (`thinker.services.dataset_files`). Only when no row has
a problem is that renamed to `<id>.jsonl` and the row inserted; whatever fails, the temporary
files are removed and nothing is inserted, so a rejected upload leaves nothing behind.

A full disk is a `StorageError` (507) with nothing kept; a stored file that is gone or not
the size it was stored at is a `DamagedError` (503) when it is read, never an empty dataset.

Only server-made ids name files. The uploaded filename and the dataset's name are labels.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, BinaryIO

import orjson
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from thinker.data.formats import detect_format
from thinker.data.kinds import DatasetKind
from thinker.errors import ConfigError, ConflictError, DamagedError, NotFoundError, ThinkerError
from thinker.files import storage_guard
from thinker.jobs.states import UNFINISHED_STATES
from thinker.names import check_name
from thinker.services.dataset_files import Plan, convert, plan_for, temp_path
from thinker.settings import Settings
from thinker.store import Dataset, Job, Model, new_id, now

MIB = 1 << 20
CHUNK_BYTES = MIB
NAME_CHARS = 200  # the column's width
FILENAME_CHARS = 255
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")  # what new_id makes: no separator, no dots
# The repository's data/examples, present in a source checkout (not in an installed wheel).
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "data" / "examples"
EXAMPLES: tuple[tuple[str, str, DatasetKind], ...] = (
    ("arithmetic-train", "arithmetic/train.jsonl", "chat"),
    ("arithmetic-test", "arithmetic/test.jsonl", "chat"),
    ("reversal-train", "reversal/train.jsonl", "prompt_completion"),
    ("code_review-train", "code_review/train.jsonl", "chat"),
    ("preferences-train", "preferences/train.jsonl", "preferences"),
    ("rl-train", "rl/train.jsonl", "problems"),
    ("rl-warmup", "rl/warmup_hedged.jsonl", "chat"),  # SL before RL: the answers' format
    ("rlhf-demos", "rlhf/demos.jsonl", "chat"),
    ("rlhf-prompts", "rlhf/prompts.jsonl", "problems"),
)


class UploadTooLarge(ThinkerError, ValueError):
    """The uploaded file is over `max_upload_mb` (the server answers 413)."""


def too_large_message(max_upload_mb: int) -> str:
    return f"upload too large: the limit is {max_upload_mb} MiB per file (THINKER_MAX_UPLOAD_MB)"


@dataclass
class DatasetService:
    """Datasets of one data directory and database: the files under `settings.datasets_dir`,
    the rows through `sessions`."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]

    def path(self, dataset_id: str) -> Path:
        """Where a dataset's JSONL lives. Ids are server-made; the check keeps it that way."""
        if not _SAFE_ID.fullmatch(dataset_id):
            raise ValueError(f"not a dataset id: {dataset_id!r}")
        return self.settings.datasets_dir / f"{dataset_id}.jsonl"

    def stored_file(self, dataset: Dataset) -> Path:
        """A dataset's JSONL, checked to be on disk at the size it was stored at.

        Raises:
            DamagedError: The file is gone or its size changed (503: the request is right, the
                server's copy is not, and only restoring or uploading the data again helps).
        """
        path = self.path(dataset.id)
        where = (
            path.relative_to(self.settings.data_dir)
            if path.is_relative_to(self.settings.data_dir)
            else path
        )
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise DamagedError(
                f"dataset {dataset.id}: its file {where} is missing on disk (removed outside "
                "Thinker); restore the file, or upload the data again as a new dataset"
            ) from None
        if size != dataset.size_bytes:
            raise DamagedError(
                f"dataset {dataset.id}: its file {where} is {size} bytes on disk, not the "
                f"{dataset.size_bytes} it was stored with (changed outside Thinker); restore the "
                "file, or upload the data again as a new dataset"
            )
        return path

    async def store_upload(
        self,
        file: BinaryIO,
        filename: str | None,
        name: str | None,
        kind: DatasetKind | None,
        mapping: dict[str, str] | None = None,
        parent_id: str | None = None,
    ) -> Dataset:
        """Store an uploaded file as a dataset (with `parent_id`: the next version of that one),
        every row checked; nothing is kept if it fails.

        Raises:
            UploadTooLarge: The file is over `max_upload_mb`.
            UploadRejected: A row is bad, or the file needs a mapping or kind to be confirmed.
        """
        label = check_name("filename", (filename or "upload")[:FILENAME_CHARS])
        async with self.received(file) as raw:
            return await self.store_file(
                raw,
                filename=label,
                name=name,
                kind=kind,
                mapping=mapping,
                parent_id=parent_id,
            )

    @asynccontextmanager
    async def received(self, file: BinaryIO) -> AsyncIterator[Path]:
        """An uploaded file copied to a temporary path (refused past `max_upload_mb`), removed
        when the block ends."""
        raw = temp_path(self.settings)
        try:
            with storage_guard("the upload"):
                await asyncio.to_thread(_copy_limited, file, raw, self.settings.max_upload_mb)
            yield raw
        finally:
            raw.unlink(missing_ok=True)

    async def store_file(
        self,
        path: Path,
        *,
        filename: str,
        name: str | None,
        kind: str | None,
        mapping: dict[str, str] | None,
        origin: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> Dataset:
        """Store a file as a new dataset: every row mapped, checked and written as canonical JSONL.

        The caller owns `path` and deletes it. Without `kind` and `mapping`, detection's proposal
        is used when it is sure (a known layout, no guess to confirm). With `parent_id`, the
        dataset is the next version of the parent's lineage.

        Raises:
            UploadRejected: A row is bad (all are checked), or the file needs a mapping or kind
                that was not given (`detection` holds the proposal); nothing is stored.
            NotFoundError: `parent_id` names no dataset.
        """
        filename = filename[:FILENAME_CHARS]
        plan = await asyncio.to_thread(plan_for, path, filename, kind, mapping)
        lineage = await self._lineage(parent_id)
        extra = {"mapping": plan.mapping or None, "origin": origin, **lineage}
        return await self._store(path, _name(name, filename), filename, plan, extra)

    async def register_examples(self) -> None:
        """Register the shipped example datasets not registered yet, as builtin.

        Does nothing where `data/examples/` is absent (an installed package).
        """
        if not EXAMPLES_DIR.is_dir():
            return
        async with self.sessions() as session:
            query = select(Dataset.name).where(Dataset.builtin.is_(True))
            registered = set((await session.scalars(query)).all())
        for name, relative, kind in EXAMPLES:
            path = EXAMPLES_DIR / relative
            if name not in registered and path.is_file():
                plan = Plan(detect_format(path, path.name), kind, {})
                await self._store(path, name, path.name, plan, {"builtin": True})

    async def _store(
        self,
        source: Path,
        name: str,
        filename: str,
        plan: Plan,
        extra: dict[str, Any],
    ) -> Dataset:
        """Convert `source` into the datasets directory, then insert its row; on any failure
        (a full disk included: StorageError) neither is kept."""
        dataset_id = new_id("ds")
        target = self.path(dataset_id)
        temp = temp_path(self.settings)
        try:
            with storage_guard(f"dataset {name!r}"):
                stored = await asyncio.to_thread(convert, source, plan, temp, self.settings)
                temp.replace(target)  # atomic: readers see no file or the whole of it
        finally:
            temp.unlink(missing_ok=True)
        dataset = Dataset(
            id=dataset_id,
            name=name,
            filename=filename,
            created_at=now(),
            **stored.columns(),
            **extra,
        )
        try:
            with storage_guard(f"dataset {name!r}"):
                async with self.sessions() as session:
                    session.add(dataset)
                    await session.commit()
        except BaseException:
            target.unlink(missing_ok=True)  # no row, so no file either
            raise
        return dataset

    async def _lineage(self, parent_id: str | None) -> dict[str, Any]:
        """The root, version and parent columns of a new version of `parent_id` (none: v1)."""
        if parent_id is None:
            return {}
        async with self.sessions() as session:
            parent = await get_dataset(session, parent_id)
            root = parent.root_id or parent.id
            in_lineage = (Dataset.id == root) | (Dataset.root_id == root)
            latest = await session.scalar(select(func.max(Dataset.version)).where(in_lineage))
        return {"root_id": root, "version": (latest or 1) + 1, "parent_id": parent.id}

    async def new_version(
        self, parent_id: str, edit: Edit, name: str | None, kind: str | None
    ) -> Dataset:
        """A new version of `parent_id`: its stored rows with `edit` applied, checked like an
        upload. The parent is never changed.

        Raises:
            NotFoundError: No such dataset.
            ConfigError: An edit names a line the parent does not have.
            ConflictError: The edit changes nothing.
            UploadRejected: A resulting row is bad; nothing is stored.
        """
        async with self.sessions() as session:
            parent = await get_dataset(session, parent_id)
        if not (edit.mapping or edit.delete or edit.replace or edit.append):
            raise ConflictError(f"no change to dataset {parent.id} given; nothing stored")
        bad = sorted(n for n in {*edit.delete, *edit.replace} if not 1 <= n <= parent.num_rows)
        if bad:
            raise ConfigError(
                f"lines {bad[:10]} are not in dataset {parent.id} (1..{parent.num_rows})"
            )
        temp = temp_path(self.settings)
        try:
            source = self.stored_file(parent)
            with storage_guard(f"the new version of dataset {parent.id}"):
                await asyncio.to_thread(_write_edited, source, temp, edit)
            return await self.store_file(
                temp,
                filename=parent.filename,
                name=name or parent.name,
                kind=kind or parent.kind,
                mapping=edit.mapping or None,
                origin=parent.origin,
                parent_id=parent.id,
            )
        finally:
            temp.unlink(missing_ok=True)

    async def remove(self, dataset_id: str) -> None:
        """Delete a dataset's row and file.

        Raises:
            NotFoundError: No such dataset.
            ConflictError: An unfinished job reads it.
        """
        async with self.sessions() as session:
            dataset = await get_dataset(session, dataset_id)
            users = await _unfinished_users(session, dataset.id)
            if users:
                raise ConflictError(
                    f"dataset {dataset.id} is in use by unfinished job(s) {', '.join(users)}; "
                    "cancel them or wait for them to finish"
                )
            # Finished jobs keep their record but drop the link, as the foreign key allows no
            # dangling id; the models they made keep the dataset id in their own lineage.
            finished = Job.state.not_in(UNFINISHED_STATES)
            unlink = update(Job).where(Job.dataset_id == dataset.id, finished)
            await session.execute(unlink.values(dataset_id=None))
            await session.delete(dataset)
            try:
                await session.commit()
            except IntegrityError as e:  # a job that reads it was created meanwhile
                raise ConflictError(f"dataset {dataset.id} was just taken by a new job") from e
        self.path(dataset.id).unlink(missing_ok=True)
        for cached in self.settings.datasets_dir.glob(f"{dataset.id}.stats.*.json"):
            cached.unlink(missing_ok=True)  # statistics computed for the deleted rows


def _name(name: str | None, filename: str) -> str:
    """The name given, else the uploaded file's stem: a label either way, never a path."""
    label = (name or "").strip() or PurePath(filename).stem.strip() or "dataset"
    return label[:NAME_CHARS]


def _copy_limited(source: BinaryIO, target: Path, max_upload_mb: int) -> None:
    limit, size = max_upload_mb * MIB, 0
    with open(target, "wb") as out:
        while chunk := source.read(CHUNK_BYTES):
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(too_large_message(max_upload_mb))
            out.write(chunk)


async def get_dataset(session: AsyncSession, dataset_id: str) -> Dataset:
    dataset = await session.get(Dataset, dataset_id)
    if dataset is None:
        raise NotFoundError(f"no dataset with id {dataset_id[:40]!r}")
    return dataset


async def list_datasets(
    session: AsyncSession, kind: DatasetKind | None, offset: int, limit: int
) -> tuple[list[Dataset], int]:
    """A page of datasets, newest first, and how many there are in all."""
    query = select(Dataset) if kind is None else select(Dataset).where(Dataset.kind == kind)
    count = await session.scalar(select(func.count()).select_from(query.subquery()))
    page = query.order_by(Dataset.created_at.desc(), Dataset.id).offset(offset).limit(limit)
    return list((await session.scalars(page)).all()), count or 0


async def dataset_jobs(session: AsyncSession, dataset_id: str) -> list[Job]:
    """The jobs that read the dataset (as their dataset, or by an id in their config: an eval
    set, an rlhf stage's data), oldest first."""
    rows = (await session.scalars(select(Job).order_by(Job.created_at))).all()
    return [j for j in rows if dataset_id in {j.dataset_id, *_ids_in(j.config)}]


async def dataset_models(session: AsyncSession, dataset_id: str) -> list[Model]:
    """The models trained on the dataset (their job's main dataset), oldest first."""
    query = select(Model).where(Model.dataset_id == dataset_id).order_by(Model.created_at)
    return list((await session.scalars(query)).all())


async def dataset_versions(session: AsyncSession, dataset: Dataset) -> list[Dataset]:
    """Every version of the dataset's lineage, first to last."""
    root = dataset.root_id or dataset.id
    query = select(Dataset).where((Dataset.id == root) | (Dataset.root_id == root))
    return list((await session.scalars(query.order_by(Dataset.version))).all())


@dataclass
class Edit:
    """How a new version differs from its parent's stored rows (lines count from 1)."""

    mapping: dict[str, str] = field(default_factory=dict)  # applied to every kept row
    delete: set[int] = field(default_factory=set)
    replace: dict[int, dict[str, Any]] = field(default_factory=dict)
    append: list[dict[str, Any]] = field(default_factory=list)


def _write_edited(source: Path, target: Path, edit: Edit) -> None:
    """The parent's rows with lines deleted, replaced and appended (store_file maps them)."""
    with open(source, "rb") as rows, open(target, "wb") as out:
        for line, raw in enumerate(rows, start=1):
            if line in edit.delete:
                continue
            replaced = edit.replace.get(line)
            out.write(raw if replaced is None else orjson.dumps(replaced) + b"\n")
        for row in edit.append:
            out.write(orjson.dumps(row) + b"\n")


async def preview_rows(path: Path, offset: int, limit: int) -> list[dict[str, object]]:
    """Rows `offset` to `offset + limit` of a stored dataset, as stored."""

    def read() -> list[dict[str, object]]:
        with open(path, "rb") as f:
            return [json.loads(line) for line in itertools.islice(f, offset, offset + limit)]

    return await asyncio.to_thread(read)


async def _unfinished_users(session: AsyncSession, dataset_id: str) -> list[str]:
    """Unfinished jobs that read the dataset: as their dataset, or by an id in their config
    (an eval set, an rlhf stage's dataset)."""
    query = select(Job.id, Job.dataset_id, Job.config).where(Job.state.in_(UNFINISHED_STATES))
    rows = (await session.execute(query)).all()
    return [job_id for job_id, main, config in rows if dataset_id in {main, *_ids_in(config)}]


def _ids_in(value: object) -> set[str]:
    """Every string under a key ending in `dataset_id`, at any depth."""
    if isinstance(value, list):
        return set().union(*map(_ids_in, value))
    if not isinstance(value, dict):
        return set()
    named = {v for k, v in value.items() if str(k).endswith("dataset_id") and isinstance(v, str)}
    return named.union(*map(_ids_in, value.values()))
