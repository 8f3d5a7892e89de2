"""Datasets on the server: storing a file as checked JSONL, the shipped examples, deleting.

An upload is copied in chunks to a temporary file in the datasets directory (refused past
`max_upload_mb`); `store_file` does the rest, for uploads and imports alike. Its plan is the
kind and field mapping given, or else detection's proposal (`thinker.data.detect`) when that
is sure; a file whose mapping is only a guess is refused with the proposal, for the user to
confirm. Every row is read in its format (`thinker.data.formats`), mapped, checked against
the kind with the validators of `thinker.data`, and written as canonical JSONL (orjson's
compact form, one object a line) to a second temporary file, while `DuplicateFinder` notes
each row for the exact-duplicate check that follows. Only when no row has a problem is that
renamed to `<id>.jsonl` and the row inserted; whatever fails, the temporary files are removed
and nothing is inserted, so a rejected upload leaves nothing behind.

The scan streams: memory holds a batch of rows, the duplicate filter (16 MiB) and a block
of its bookkeeping, whatever the file's size (a JSON document, parsed whole, aside).

A full disk is a `StorageError` (507) with nothing kept; a stored file that is gone or not
the size it was stored at is a `DamagedError` (503) when it is read, never an empty dataset.

Only server-made ids name files. The uploaded filename and the dataset's name are labels.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, get_args

import orjson
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.data.detect import Detection, apply_mapping, detect_file, mapping_problems
from thinker.data.formats import (
    Format,
    Item,
    detect_format,
    exact_jsonl_rows,
    out_of_range,
    read_rows,
)
from thinker.data.loading import check_conversation_row
from thinker.data.preferences import check_pair
from thinker.data.problems import check_problem_row
from thinker.data.validation import (
    FILE_LEVEL,
    ROLES,
    DuplicateFinder,
    ErrorSummary,
    RowError,
    too_deep,
)
from thinker.errors import (
    ConfigError,
    ConflictError,
    DamagedError,
    DatasetError,
    NotFoundError,
    NotTextError,
    ThinkerError,
)
from thinker.server.limits import check_name, storage_guard
from thinker.server.settings import Settings
from thinker.store import Dataset, Job, Model, new_id, now

if TYPE_CHECKING:
    from thinker.server.platform import Platform

DatasetKindName = Literal["chat", "prompt_completion", "preferences", "problems"]
KINDS: tuple[DatasetKindName, ...] = get_args(DatasetKindName)
RowCheck = Callable[[int, dict[str, object]], list[RowError]]

# A job in one of these states may still read its datasets (the rest are final).
UNFINISHED_STATES = ("queued", "starting", "running", "paused", "interrupted")
MAX_REPORTED_ERRORS = 50  # errors sent back in full; the total is counted past this
WRITE_BATCH_ROWS = 4096  # rows joined into one write (and one hash update)
_ROLES = frozenset(ROLES)
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
    ("rl-warmup", "rl/warmup_hedged.jsonl", "chat"),  # SL before RL: the answers' format
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
    """A file that cannot be stored as it is: its problems, and what detection proposes.

    `errors` holds the first 50 problems as JSON, `error_count` all of them, `error_counts`
    them by kind; `detection` is set when the file needs a mapping (or kind) to be confirmed.
    """

    def __init__(
        self,
        summary: str,
        errors: list[RowError],
        error_count: int,
        error_counts: dict[str, int] | None = None,
        detection: Detection | None = None,
    ) -> None:
        super().__init__(summary)
        self.errors = [error_json(e) for e in errors]
        self.error_count = error_count
        self.error_counts = error_counts or dict(Counter(e.kind for e in errors))
        self.detection = asdict(detection) if detection is not None else None


def error_json(error: RowError) -> dict[str, object]:
    return {"line": error.line, "field": error.field, "message": error.message, "kind": error.kind}


class UploadTooLarge(ThinkerError, ValueError):
    """The uploaded file is over `max_upload_mb` (the server answers 413)."""


def too_large_message(max_upload_mb: int) -> str:
    return f"upload too large: the limit is {max_upload_mb} MiB per file (THINKER_MAX_UPLOAD_MB)"


def dataset_file(settings: Settings, dataset_id: str) -> Path:
    """Where a dataset's JSONL lives. Ids are server-made; the check keeps it that way."""
    if not _SAFE_ID.fullmatch(dataset_id):
        raise ValueError(f"not a dataset id: {dataset_id!r}")
    return settings.datasets_dir / f"{dataset_id}.jsonl"


def stored_file(settings: Settings, dataset: Dataset) -> Path:
    """A dataset's JSONL, checked to be on disk at the size it was stored at.

    Raises:
        DamagedError: The file is gone or its size changed (503: the request is right, the
            server's copy is not, and only restoring or uploading the data again helps).
    """
    path = dataset_file(settings, dataset.id)
    where = path.relative_to(settings.data_dir) if path.is_relative_to(settings.data_dir) else path
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


# ---- storing -----------------------------------------------------------------------------


async def store_upload(
    platform: Platform,
    file: BinaryIO,
    filename: str | None,
    name: str | None,
    kind: DatasetKindName | None,
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
    async with received(platform.settings, file) as raw:
        return await store_file(
            platform,
            raw,
            filename=label,
            name=name,
            kind=kind,
            mapping=mapping,
            parent_id=parent_id,
        )


@asynccontextmanager
async def received(settings: Settings, file: BinaryIO) -> AsyncIterator[Path]:
    """An uploaded file copied to a temporary path (refused past `max_upload_mb`), removed
    when the block ends."""
    raw = _temp_path(settings)
    try:
        with storage_guard("the upload"):
            await asyncio.to_thread(_copy_limited, file, raw, settings.max_upload_mb)
        yield raw
    finally:
        raw.unlink(missing_ok=True)


async def store_file(
    platform: Platform,
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
    lineage = await _lineage(platform, parent_id)
    extra = {"mapping": plan.mapping or None, "origin": origin, **lineage}
    return await _store(platform, path, _name(name, filename), filename, plan, extra)


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
            plan = Plan(detect_format(path, path.name), kind, {})
            await _store(platform, path, name, path.name, plan, {"builtin": True})


async def _store(
    platform: Platform,
    source: Path,
    name: str,
    filename: str,
    plan: Plan,
    extra: dict[str, Any],
) -> Dataset:
    """Convert `source` into the datasets directory, then insert its row; on any failure
    (a full disk included: StorageError) neither is kept."""
    dataset_id = new_id("ds")
    target = dataset_file(platform.settings, dataset_id)
    temp = _temp_path(platform.settings)
    try:
        with storage_guard(f"dataset {name!r}"):
            stored = await asyncio.to_thread(convert, source, plan, temp, platform.settings)
            temp.replace(target)  # atomic: readers see no file or the whole of it
    finally:
        temp.unlink(missing_ok=True)
    dataset = Dataset(
        id=dataset_id, name=name, filename=filename, created_at=now(), **stored.columns(), **extra
    )
    try:
        with storage_guard(f"dataset {name!r}"):
            async with platform.sessions() as session:
                session.add(dataset)
                await session.commit()
    except BaseException:
        target.unlink(missing_ok=True)  # no row, so no file either
        raise
    return dataset


async def _lineage(platform: Platform, parent_id: str | None) -> dict[str, Any]:
    """The root, version and parent columns of a new version of `parent_id` (none: v1)."""
    if parent_id is None:
        return {}
    async with platform.sessions() as session:
        parent = await get_dataset(session, parent_id)
        root = parent.root_id or parent.id
        in_lineage = (Dataset.id == root) | (Dataset.root_id == root)
        latest = await session.scalar(select(func.max(Dataset.version)).where(in_lineage))
    return {"root_id": root, "version": (latest or 1) + 1, "parent_id": parent.id}


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


# ---- deciding how to read a file ---------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """How a file becomes a dataset: its format, its kind (None: from the first mapped row)
    and the mapping applied to every row."""

    format: Format
    kind: str | None
    mapping: dict[str, str]


def plan_for(
    path: Path, filename: str | None, kind: str | None, mapping: dict[str, str] | None
) -> Plan:
    """The plan for an upload: as given, or detection's proposal where it is sure.

    Raises:
        UploadRejected: The mapping is malformed, the file is binary, or detection is unsure
            and nothing was given.
    """
    if mapping is not None and (problems := mapping_problems(mapping)):
        raise UploadRejected(f"invalid mapping: {'; '.join(problems)}", [], len(problems))
    if kind is not None and kind not in KINDS:
        raise UploadRejected(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}", [], 1)
    if kind is not None or mapping is not None:
        with _binary_rejected():
            return Plan(detect_format(path, filename), kind, mapping or {})
    with _binary_rejected():
        detection = detect_file(path, filename)
    if not detection.sample:  # no row reads: the scan reports why, line by line
        return Plan(detection.format, None, {})
    if detection.kind is None or detection.suggestions:
        raise needs_confirmation(detection)
    return Plan(detection.format, detection.kind, detection.mapping)  # type: ignore[arg-type]


@contextmanager
def _binary_rejected() -> Iterator[None]:
    """A binary file as a rejected upload: its one file-level error, named `not_text`."""
    try:
        yield
    except NotTextError as e:
        error = RowError(FILE_LEVEL, None, str(e), "not_text")
        raise UploadRejected(str(e), [error], 1) from e


def needs_confirmation(detection: Detection) -> UploadRejected:
    """The 422 for a file whose kind or mapping detection cannot settle alone."""
    found = ", ".join(f'"{f}"' for f in detection.fields[:20]) or "none"
    if detection.kind is None:
        what = f"cannot tell the dataset kind from the fields ({found}); give `kind` and `mapping`"
    else:
        proposed = json.dumps(detection.mapping)
        what = (
            f"the fields ({found}) need a mapping to be a {detection.kind} dataset: proposed "
            f"{proposed}; confirm it by sending `mapping` (and `kind`)"
        )
    message = "; ".join([what, *detection.suggestions])
    error = RowError(FILE_LEVEL, None, message, "missing")
    return UploadRejected(f"upload rejected: {what}", [error], 1, detection=detection)


def detect_and_validate(
    path: Path,
    filename: str | None,
    kind: str | None,
    mapping: dict[str, str] | None,
    settings: Settings,
) -> tuple[Detection, dict[str, Any]]:
    """A file's detection, and a validation of all of it under the given kind and mapping,
    else the proposed ones. Stores nothing: the rows go to a temporary file, then away.

    Raises:
        UploadRejected: The file is binary.
    """
    with _binary_rejected():
        detection = detect_file(path, filename)
    kind = kind or detection.kind
    mapping = detection.mapping if mapping is None else mapping
    plan = Plan(detection.format, kind, mapping)  # type: ignore[arg-type]
    temp, check_kind = _temp_path(settings), kind is not None or bool(mapping)
    try:
        with storage_guard("the checked copy of the file"):
            try:
                found = scan(path, plan, temp, settings, check_kind=check_kind)
            except UploadRejected:  # the mapped rows fit no kind: check what every row needs
                found = scan(path, plan, temp, settings, check_kind=False)
    finally:
        temp.unlink(missing_ok=True)
    errors = found.errors
    summary = {
        "kind": found.kind,
        "mapping": mapping,
        "rows": found.rows,
        "error_count": errors.count,
        "error_counts": dict(errors.counts),
        "errors": [error_json(e) for e in errors.first],
    }
    return detection, summary


# ---- converting and checking -------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """What `convert` wrote."""

    kind: str
    source_format: Format
    num_rows: int
    size_bytes: int
    sha256: str

    def columns(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Scan:
    """What `scan` found: the kind the rows were checked as, what it wrote, every problem."""

    kind: str | None
    rows: int
    size_bytes: int
    sha256: str
    errors: ErrorSummary


def convert(source: Path, plan: Plan, target: Path, settings: Settings) -> Stored:
    """Check every row of `source` and write the rows to `target` as canonical JSONL.

    Raises:
        UploadRejected: Any row is bad (all are checked), or the first row fits no kind.
    """
    found = scan(source, plan, target, settings)
    errors = found.errors
    if errors.count:
        raise UploadRejected(
            _summary(errors, found.rows, plan.format), errors.first, errors.count, errors.counts
        )
    assert found.kind is not None  # set by the first good row, and there was one
    return Stored(found.kind, plan.format, found.rows, found.size_bytes, found.sha256)


def scan(
    source: Path, plan: Plan, target: Path, settings: Settings, check_kind: bool = True
) -> Scan:
    """Read, map, check and write every row; the problems are returned, not raised.

    `check_kind=False` checks only what every dataset needs (readable rows, no duplicates),
    for a file whose kind is not known yet.

    Raises:
        UploadRejected: The plan has no kind and the first mapped row fits none.
    """
    kind = plan.kind
    if kind is None and check_kind:
        kind = _first_row_kind(source, plan, settings.max_line_bytes)
    check = row_check(kind) if kind is not None and check_kind else _no_check  # type: ignore[arg-type]
    rows = read_rows(source, plan.format, settings.max_line_bytes)
    items = _mapped(rows, plan.mapping) if plan.mapping else rows
    # closing: a write that fails (a full disk) must not leave the source open until the
    # garbage collector frees the frames its error holds; an unlinked upload keeps its space.
    with closing(rows), open(target, "wb") as out, DuplicateFinder(target) as finder:
        written = _write_checked(items, check, out, finder, settings)
        out.flush()  # the finder reads rows back from the file
        written.errors = written.errors.merged(_duplicates(finder))
    if written.suspects and plan.format == "jsonl":
        found = _inexact_integers(source, written.suspects, settings.max_line_bytes)
        written.errors = written.errors.merged(found)
    return Scan(kind, written.rows, written.size, written.digest, written.errors)


@dataclass
class _Written:
    rows: int
    size: int
    digest: str
    errors: ErrorSummary
    suspects: list[int]  # lines whose canonical form has a large float (see `_flush`)


def _write_checked(
    items: Iterator[Item],
    check: RowCheck,
    out: BinaryIO,
    finder: DuplicateFinder,
    settings: Settings,
) -> _Written:
    """The hot loop: every row checked, and written unless it cannot be JSON; every problem
    counted. Rows go out in batches, so that writing, hashing and duplicate bookkeeping run
    in C over many rows at once; a plainly right row skips the full check (`PLAIN_ROWS`)."""
    errors, digest = ErrorSummary(MAX_REPORTED_ERRORS), hashlib.sha256()
    rows = size = 0
    batch: list[bytes] = []
    lines: list[int] = []
    suspects: list[int] = []
    max_rows, max_bytes = settings.max_rows, settings.max_line_bytes
    plain = getattr(check, "plain", None)
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    for line, row in items:
        rows += 1
        if rows > max_rows:
            errors.add([RowError(line, None, f"more than {max_rows} rows", "too_many_rows")])
            rows -= 1
            break
        if type(row) is RowError:
            errors.add((row,))
            continue
        if (plain is None or not plain(row)) and (problems := check(line, row)):  # type: ignore[arg-type]
            errors.add(problems)
        try:
            data = dumps(row, option=newline)
        except orjson.JSONEncodeError:
            data = b""
        if not data or len(data) > max_bytes + 1:  # say why, or write it as `json` can
            data, problem = encode_row(line, row, max_bytes)  # type: ignore[arg-type]
            if problem is not None:
                errors.add((problem,))
                continue
        batch.append(data)
        lines.append(line)
        if len(batch) == WRITE_BATCH_ROWS:
            size += _flush(batch, lines, out, digest, finder, suspects)
    size += _flush(batch, lines, out, digest, finder, suspects)
    if rows == 0 and not errors.count:
        errors.add([RowError(FILE_LEVEL, None, "file has no rows", "no_rows")])
    return _Written(rows, size, digest.hexdigest(), errors, suspects)


def _flush(
    batch: list[bytes],
    lines: list[int],
    out: BinaryIO,
    digest: Any,
    finder: DuplicateFinder,
    suspects: list[int],
) -> int:
    """Write a batch of rows; how many bytes that was.

    orjson reads an integer past 64 bits as a float, and writes a float of 1e16 or more with
    an exponent (`1.2345678901234568e+23`): the lines of rows whose canonical form holds `e+`
    go to `suspects`, for `_inexact_integers` to read again exactly. One search of the whole
    batch keeps that off the per-row path.
    """
    data = b"".join(batch)
    if b"e+" in data:
        suspects.extend(line for line, row in zip(lines, batch, strict=True) if b"e+" in row)
    out.write(data)
    digest.update(data)
    finder.add_rows(batch, lines)
    batch.clear()
    lines.clear()
    return len(data)


def _mapped(items: Iterator[Item], mapping: dict[str, str]) -> Iterator[Item]:
    for line, row in items:
        yield line, row if isinstance(row, RowError) else apply_mapping(row, mapping)


def _first_row_kind(source: Path, plan: Plan, max_line_bytes: int) -> str:
    """The kind that the first row that parses calls for, once mapped."""
    with closing(read_rows(source, plan.format, max_line_bytes)) as rows:
        for line, row in rows:
            if not isinstance(row, RowError):
                return infer_kind(line, apply_mapping(row, plan.mapping))
    return "chat"  # no row parses: the scan reports why, whatever the kind


def _inexact_integers(source: Path, lines: list[int], max_line_bytes: int) -> ErrorSummary:
    """The `lines` of a JSONL file that hold an integer past 64 bits, read by the standard
    library (which keeps it exact), each an `out_of_range` error: stored, it would have been
    a float, silently another number."""
    found = ErrorSummary(MAX_REPORTED_ERRORS)
    for line, row in exact_jsonl_rows(source, set(lines), max_line_bytes):
        if type(row) is dict and (error := out_of_range(line, row)) is not None:
            found.add((error,))
    return found


def _duplicates(finder: DuplicateFinder) -> ErrorSummary:
    found = ErrorSummary(MAX_REPORTED_ERRORS)
    for line, first in finder.duplicates():
        message = f"duplicate of line {first} (the same row, byte for byte once normalised)"
        found.add((RowError(line, None, message, "duplicate"),))
    return found


def _no_check(line: int, row: dict[str, object]) -> list[RowError]:
    return []


def _summary(errors: ErrorSummary, rows: int, fmt: Format) -> str:
    first = errors.first[0]
    unit = "line" if fmt in ("jsonl", "csv") else "row"  # what the numbers count
    where = f"{unit} {first.line}: " if first.line != FILE_LEVEL else ""
    what = f"{first.field}: {first.message}" if first.field else first.message
    by_kind = ", ".join(f"{n} {kind}" for kind, n in errors.counts.most_common())
    return (
        f"upload rejected: {errors.count} problem(s) ({by_kind}) in {rows} row(s) read from "
        f"{fmt}; first: {where}{what}"
    )


def encode_row(line: int, row: dict[str, object], max_bytes: int) -> tuple[bytes, RowError | None]:
    """The row as one canonical JSONL line (orjson's compact form, newline included), or why
    it cannot be one: too long, an integer past 64 bits, nested deeper than MAX_ROW_DEPTH, or
    a lone UTF-16 surrogate (each of which orjson refuses to write)."""
    try:
        data = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as e:
        return b"", _unwritable(line, row, str(e))
    if len(data) > max_bytes + 1:
        message = f"row is {len(data) - 1} bytes as JSON, over the limit of {max_bytes}"
        return b"", RowError(line, None, message, "too_long")
    return data, None


def _unwritable(line: int, row: dict[str, object], reason: str) -> RowError:
    if (error := out_of_range(line, row)) is not None:
        return error
    if "surrogate" in reason:  # JSON's \\u escapes can spell one; UTF-8 cannot
        return RowError(line, None, "holds a lone UTF-16 surrogate, which is not text")
    if "ecursion" in reason:
        return too_deep(line)
    return RowError(line, None, f"cannot be written as JSON: {reason}")


def row_check(kind: DatasetKindName) -> RowCheck:
    """The `thinker.data` check of one kind of row: what training loads it with.

    The check of chat and prompt/completion rows carries `plain`, a quick test of rows that
    are plainly right, which the whole-file scan runs first: a row it does not accept gets the
    full check, which alone words the errors.
    """
    if kind == "preferences":
        return check_pair
    if kind == "problems":
        return check_problem_row
    field = "messages" if kind == "chat" else "prompt"

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        if field not in row:  # SL reads either form, but a dataset holds the kind it says
            return [RowError(line, field, f"missing (a {kind} row needs {field!r})", "missing")]
        return check_conversation_row(line, row)

    check.plain = _plain_chat if kind == "chat" else _plain_prompt_completion  # type: ignore[attr-defined]
    return check


def _plain_chat(row: dict[str, object]) -> bool:
    """A chat row that `check_conversation_row` accepts, tested fast: messages of exactly a
    known role and non-blank text, one of them the assistant's. A message that is not a dict
    of two keys fails by its length or by the KeyError or TypeError of reading it."""
    messages = row.get("messages")
    if type(messages) is not list or (len(row) > 1 and ("prompt" in row or "completion" in row)):
        return False
    assistant = False
    try:
        for message in messages:
            if len(message) != 2:
                return False
            role, content = message["role"], message["content"]
            if type(content) is not str or not content or content.isspace():
                return False
            if type(role) is not str or role not in _ROLES:
                return False
            if role == "assistant":
                assistant = True
    except (KeyError, TypeError):
        return False
    return assistant


def _plain_prompt_completion(row: dict[str, object]) -> bool:
    """A prompt/completion row that `check_conversation_row` accepts, tested fast."""
    if "messages" in row:
        return False
    system = row.get("system")
    if system is not None and not _text(system):
        return False
    return _text(row.get("prompt")) and _text(row.get("completion"))


def _text(value: object) -> bool:
    return type(value) is str and bool(value) and not value.isspace()


def infer_kind(line: int, row: dict[str, object]) -> DatasetKindName:
    """The kind that the fields of a row (the first, once mapped) call for.

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
    error = RowError(line, None, message + "; or give `kind`", "missing")
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


async def new_version(
    platform: Platform, parent_id: str, edit: Edit, name: str | None, kind: str | None
) -> Dataset:
    """A new version of `parent_id`: its stored rows with `edit` applied, checked like an
    upload. The parent is never changed.

    Raises:
        NotFoundError: No such dataset.
        ConfigError: An edit names a line the parent does not have.
        ConflictError: The edit changes nothing.
        UploadRejected: A resulting row is bad; nothing is stored.
    """
    async with platform.sessions() as session:
        parent = await get_dataset(session, parent_id)
    if not (edit.mapping or edit.delete or edit.replace or edit.append):
        raise ConflictError(f"no change to dataset {parent.id} given; nothing stored")
    bad = sorted(n for n in {*edit.delete, *edit.replace} if not 1 <= n <= parent.num_rows)
    if bad:
        raise ConfigError(f"lines {bad[:10]} are not in dataset {parent.id} (1..{parent.num_rows})")
    temp = _temp_path(platform.settings)
    try:
        source = stored_file(platform.settings, parent)
        with storage_guard(f"the new version of dataset {parent.id}"):
            await asyncio.to_thread(_write_edited, source, temp, edit)
        return await store_file(
            platform,
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
    for cached in platform.settings.datasets_dir.glob(f"{dataset.id}.stats.*.json"):
        cached.unlink(missing_ok=True)  # statistics computed for the deleted rows


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
