"""A dataset file, checked whole: how to read it (its format, its kind, the field mapping:
given, or detection's proposal when it is sure), then every row read, mapped, checked against
its kind (`thinker.data.rows`) and written as canonical JSONL, while `DuplicateFinder` notes
each row for the exact-duplicate check that follows.

The scan streams: memory holds a batch of rows, the duplicate filter (16 MiB) and a block of
its bookkeeping, whatever the file's size (a JSON document, parsed whole, aside).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from thinker.data.formats import (
    Format,
    Item,
    detect_format,
    exact_jsonl_rows,
    out_of_range,
    read_rows,
)
from thinker.data.kinds import DatasetKind
from thinker.data.rows import (
    RowCheck,
    UploadRejected,
    encode_row,
    error_json,
    infer_kind,
    row_check,
)
from thinker.data.validation import FILE_LEVEL, DuplicateFinder, ErrorSummary, RowError
from thinker.dataprep.detect import Detection, apply_mapping, detect_file, mapping_problems
from thinker.errors import NotTextError
from thinker.files import storage_guard
from thinker.settings import Settings

MAX_REPORTED_ERRORS = 50  # errors sent back in full; the total is counted past this
WRITE_BATCH_ROWS = 4096  # rows joined into one write (and one hash update)


def temp_path(settings: Settings) -> Path:
    """A new temporary file's path in the datasets directory, so that the final rename stays
    on one file system."""
    return settings.datasets_dir / f".tmp-{secrets.token_hex(8)}"


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
    if kind is not None and kind not in tuple(DatasetKind):
        kinds = ", ".join(DatasetKind)
        raise UploadRejected(f"unknown kind {kind!r}; expected one of {kinds}", [], 1)
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
    return UploadRejected(f"upload rejected: {what}", [error], 1, detection=asdict(detection))


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
    temp, check_kind = temp_path(settings), kind is not None or bool(mapping)
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
