"""Datasets on the server: storing an upload as checked JSONL, the shipped examples, deleting.

An upload is copied in chunks to a temporary file in the datasets directory (refused past
`max_upload_mb`), read in its format (`thinker.data.formats`), every row checked against the
dataset's kind with the validators of `thinker.data`, and written as normalised JSONL (one
JSON object a line, nothing else) to a second temporary file. Only when every row has passed
is that renamed to `<id>.jsonl` and the row inserted; whatever fails, both temporary files
are removed and nothing is inserted, so a rejected upload leaves nothing behind.

Only server-made ids name files. The uploaded filename and the dataset's name are labels.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, BinaryIO, Literal, get_args

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.data.formats import Format, detect_format, read_rows
from thinker.data.loading import check_conversation_row
from thinker.data.preferences import check_pair
from thinker.data.problems import check_problem_row
from thinker.data.validation import FILE_LEVEL, RowError
from thinker.errors import ConflictError, DatasetError, NotFoundError, ThinkerError
from thinker.server.settings import Settings
from thinker.store import Dataset, Job, new_id, now

if TYPE_CHECKING:
    from thinker.server.platform import Platform

DatasetKindName = Literal["chat", "prompt_completion", "preferences", "problems"]
KINDS: tuple[DatasetKindName, ...] = get_args(DatasetKindName)
RowCheck = Callable[[int, dict[str, object]], list[RowError]]

# A job in one of these states may still read its datasets (the rest are final).
UNFINISHED_STATES = ("queued", "starting", "running", "paused", "interrupted")
MAX_REPORTED_ERRORS = 50  # errors sent back in full; the total is counted past this
MIB = 1 << 20
CHUNK_BYTES = MIB
NAME_CHARS = 200  # the column's width
FILENAME_CHARS = 255
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")  # what new_id makes: no separator, no dots
# The repository's data/examples, present in a source checkout (not in an installed wheel).
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "data" / "examples"
EXAMPLES: tuple[tuple[str, str, DatasetKindName], ...] = (
    ("arithmetic-train", "arithmetic/train.jsonl", "chat"),
    ("arithmetic-test", "arithmetic/test.jsonl", "chat"),
    ("reversal-train", "reversal/train.jsonl", "prompt_completion"),
    ("code_review-train", "code_review/train.jsonl", "chat"),
    ("preferences-train", "preferences/train.jsonl", "preferences"),
    ("rl-train", "rl/train.jsonl", "problems"),
    ("rlhf-demos", "rlhf/demos.jsonl", "chat"),
    ("rlhf-prompts", "rlhf/prompts.jsonl", "problems"),
)
KIND_FIELDS: dict[DatasetKindName, str] = {
    "chat": '"messages"',
    "prompt_completion": '"prompt" and "completion"',
    "preferences": '"chosen" and "rejected", with "prompt" or "messages"',
    "problems": '"prompt" or "messages", with "answer" or "tests"',
}


class UploadRejected(DatasetError):
    """Rows that do not fit: `errors` holds the first 50 as JSON, `error_count` all of them."""

    def __init__(self, summary: str, errors: list[RowError], error_count: int) -> None:
        super().__init__(summary)
        self.errors = [{"line": e.line, "field": e.field, "message": e.message} for e in errors]
        self.error_count = error_count


class UploadTooLarge(ThinkerError, ValueError):
    """The uploaded file is over `max_upload_mb` (the server answers 413)."""


def too_large_message(max_upload_mb: int) -> str:
    return f"upload too large: the limit is {max_upload_mb} MiB per file (THINKER_MAX_UPLOAD_MB)"


def dataset_file(settings: Settings, dataset_id: str) -> Path:
    """Where a dataset's JSONL lives. Ids are server-made; the check keeps it that way."""
    if not _SAFE_ID.fullmatch(dataset_id):
        raise ValueError(f"not a dataset id: {dataset_id!r}")
    return settings.datasets_dir / f"{dataset_id}.jsonl"


# ---- storing -----------------------------------------------------------------------------


async def store_upload(
    platform: Platform,
    file: BinaryIO,
    filename: str | None,
    name: str | None,
    kind: DatasetKindName | None,
) -> Dataset:
    """Store an uploaded file as a dataset, every row checked; nothing is kept if it fails.

    Raises:
        UploadTooLarge: The file is over `max_upload_mb`.
        UploadRejected: A row is bad, or (without `kind`) the first row fits no kind.
    """
    label = (filename or "upload")[:FILENAME_CHARS]
    raw = _temp_path(platform.settings)
    try:
        await asyncio.to_thread(_copy_limited, file, raw, platform.settings.max_upload_mb)
        return await _store(platform, raw, _name(name, label), label, kind, builtin=False)
    finally:
        raw.unlink(missing_ok=True)


async def register_examples(platform: Platform) -> None:
    """Register the shipped example datasets not registered yet, as builtin.

    Does nothing where `data/examples/` is absent (an installed package).
    """
    if not EXAMPLES_DIR.is_dir():
        return
    async with platform.sessions() as session:
        query = select(Dataset.name).where(Dataset.builtin.is_(True))
        registered = set((await session.scalars(query)).all())
    for name, relative, kind in EXAMPLES:
        path = EXAMPLES_DIR / relative
        if name not in registered and path.is_file():
            await _store(platform, path, name, path.name, kind, builtin=True)


async def _store(
    platform: Platform,
    source: Path,
    name: str,
    filename: str,
    kind: DatasetKindName | None,
    builtin: bool,
) -> Dataset:
    """Convert `source` into the datasets directory, then insert its row."""
    dataset_id = new_id("ds")
    target = dataset_file(platform.settings, dataset_id)
    temp = _temp_path(platform.settings)
    try:
        stored = await asyncio.to_thread(convert, source, filename, kind, temp, platform.settings)
        temp.replace(target)  # atomic: readers see no file or the whole of it
    finally:
        temp.unlink(missing_ok=True)
    dataset = Dataset(
        id=dataset_id,
        name=name,
        filename=filename,
        builtin=builtin,
        created_at=now(),
        **stored.columns(),
    )
    try:
        async with platform.sessions() as session:
            session.add(dataset)
            await session.commit()
    except BaseException:
        target.unlink(missing_ok=True)  # no row, so no file either
        raise
    return dataset


def _temp_path(settings: Settings) -> Path:
    # In the datasets directory, so that the final rename stays on one file system.
    return settings.datasets_dir / f".tmp-{secrets.token_hex(8)}"


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


# ---- converting and checking -------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """What `convert` wrote."""

    kind: DatasetKindName
    source_format: Format
    num_rows: int
    size_bytes: int
    sha256: str

    def columns(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Problems:
    first: list[RowError] = field(default_factory=list)
    count: int = 0

    def add(self, errors: list[RowError]) -> None:
        self.count += len(errors)
        self.first.extend(errors[: max(MAX_REPORTED_ERRORS - len(self.first), 0)])

    def raise_if_any(self, rows: int, fmt: Format) -> None:
        if not self.count:
            return
        first = self.first[0]
        unit = "line" if fmt in ("jsonl", "csv") else "row"  # what the numbers count
        where = f"{unit} {first.line}: " if first.line != FILE_LEVEL else ""
        what = f"{first.field}: {first.message}" if first.field else first.message
        summary = (
            f"upload rejected: {self.count} problem(s) in {rows} row(s) read from {fmt}; "
            f"first: {where}{what}"
        )
        raise UploadRejected(summary, self.first, self.count)


def convert(
    source: Path, filename: str, kind: DatasetKindName | None, target: Path, settings: Settings
) -> Stored:
    """Check every row of `source` and write the rows to `target` as JSONL.

    Raises:
        UploadRejected: Any row is bad (all are checked), or the first row fits no kind.
    """
    fmt = detect_format(source, filename, settings.max_line_bytes)
    problems, digest, rows, size = _Problems(), hashlib.sha256(), 0, 0
    check = row_check(kind) if kind else None
    with open(target, "wb") as out:
        for line, row in read_rows(source, fmt, settings.max_line_bytes):
            rows += 1
            if rows > settings.max_rows:
                problems.add([RowError(line, None, f"more than {settings.max_rows} rows")])
                break
            if isinstance(row, RowError):
                problems.add([row])
                continue
            if check is None:
                kind = infer_kind(line, row)
                check = row_check(kind)
            data, errors = encode_row(line, row, settings.max_line_bytes)
            problems.add(check(line, row) + errors)
            if not problems.count:  # once a row is bad nothing will be kept: stop writing
                out.write(data)
                digest.update(data)
                size += len(data)
    if rows == 0:
        problems.add([RowError(FILE_LEVEL, None, "file has no rows", "no_rows")])
    problems.raise_if_any(rows, fmt)
    assert kind is not None  # set by the first good row, and there was one
    return Stored(kind, fmt, rows, size, digest.hexdigest())


def encode_row(line: int, row: dict[str, object], max_bytes: int) -> tuple[bytes, list[RowError]]:
    """The row as one JSONL line, or why it cannot be one."""
    try:
        data = json.dumps(row, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which JSON's \\u escapes can spell
        return b"", [RowError(line, None, "holds a lone UTF-16 surrogate, which is not text")]
    except ValueError:
        return b"", [RowError(line, None, "holds NaN or Infinity, which JSON cannot store")]
    if len(data) > max_bytes:
        message = f"row is {len(data)} bytes as JSON, over the limit of {max_bytes}"
        return b"", [RowError(line, None, message)]
    return data + b"\n", []


def row_check(kind: DatasetKindName) -> RowCheck:
    """The `thinker.data` check of one kind of row: what training loads it with."""
    if kind == "preferences":
        return check_pair
    if kind == "problems":
        return check_problem_row
    field = "messages" if kind == "chat" else "prompt"

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        if field not in row:  # SL reads either form, but a dataset holds the kind it says
            return [RowError(line, field, f"missing (a {kind} row needs {field!r})", "missing")]
        return check_conversation_row(line, row)

    return check


def infer_kind(line: int, row: dict[str, object]) -> DatasetKindName:
    """The kind that the fields of a row (the first) call for.

    Raises:
        UploadRejected: The fields fit no kind; the message says what each kind needs.
    """
    keys = set(row)
    if {"chosen", "rejected"} <= keys:
        return "preferences"
    if keys & {"prompt", "messages"} and keys & {"answer", "tests"}:
        return "problems"
    if "messages" in keys:
        return "chat"
    if {"prompt", "completion"} <= keys:
        return "prompt_completion"
    found = ", ".join(f'"{k}"' for k in sorted(keys)[:20]) or "none"
    needs = "; ".join(f"{k} needs {fields}" for k, fields in KIND_FIELDS.items())
    message = f"cannot tell the dataset kind from the first row's fields ({found}): {needs}"
    error = RowError(line, None, message + "; or give `kind`")
    raise UploadRejected(f"upload rejected: line {line}: {error.message}", [error], 1)


# ---- reading and deleting ----------------------------------------------------------------


async def get_dataset(session: AsyncSession, dataset_id: str) -> Dataset:
    dataset = await session.get(Dataset, dataset_id)
    if dataset is None:
        raise NotFoundError(f"no dataset with id {dataset_id[:40]!r}")
    return dataset


async def list_datasets(
    session: AsyncSession, kind: DatasetKindName | None, offset: int, limit: int
) -> tuple[list[Dataset], int]:
    """A page of datasets, newest first, and how many there are in all."""
    query = select(Dataset) if kind is None else select(Dataset).where(Dataset.kind == kind)
    count = await session.scalar(select(func.count()).select_from(query.subquery()))
    page = query.order_by(Dataset.created_at.desc(), Dataset.id).offset(offset).limit(limit)
    return list((await session.scalars(page)).all()), count or 0


async def dataset_jobs(session: AsyncSession, dataset_id: str) -> list[Job]:
    """The jobs whose main dataset it is, oldest first."""
    query = select(Job).where(Job.dataset_id == dataset_id).order_by(Job.created_at)
    return list((await session.scalars(query)).all())


async def preview_rows(path: Path, offset: int, limit: int) -> list[dict[str, object]]:
    """Rows `offset` to `offset + limit` of a stored dataset, as stored."""

    def read() -> list[dict[str, object]]:
        with open(path, "rb") as f:
            return [json.loads(line) for line in itertools.islice(f, offset, offset + limit)]

    return await asyncio.to_thread(read)


async def remove_dataset(platform: Platform, dataset_id: str) -> None:
    """Delete a dataset's row and file.

    Raises:
        NotFoundError: No such dataset.
        ConflictError: An unfinished job reads it.
    """
    async with platform.sessions() as session:
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
    dataset_file(platform.settings, dataset.id).unlink(missing_ok=True)


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
