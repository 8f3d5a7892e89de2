"""Inspecting a dataset file as training will see it: its format, kind and field mapping
(detected unless given), every row checked as an upload is (`thinker.data.rows`), rendered as
training renders it, and counted (`thinker.dataprep.stats`). The file is streamed once.
`thinker datasets inspect` prints what this finds."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import cast

from pydantic import BaseModel, Field

from thinker.data.formats import Format, detect_format, read_rows
from thinker.data.rows import row_check
from thinker.data.validation import RowError
from thinker.dataprep import stats
from thinker.dataprep.detect import apply_mapping, detect_file, mapping_problems
from thinker.dataprep.stats import DatasetStats, PreviewRow, RenderOptions, RowProblem
from thinker.errors import ThinkerError

MAX_LINE_BYTES = 1_000_000  # as the server's default `max_line_bytes`
MAX_SHOWN_ERRORS = 20


class UsageError(ThinkerError, ValueError):
    """A bad command line or an input that cannot be inspected at all (exit code 2)."""


class ValidationReport(BaseModel):
    """Every row checked: the first problems in full, and how many there are of each kind."""

    rows: int = 0
    error_count: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)
    errors: list[RowProblem] = Field(default_factory=list)

    def add(self, errors: list[RowError]) -> None:
        self.error_count += len(errors)
        for error in errors:
            self.by_kind[error.kind] = self.by_kind.get(error.kind, 0) + 1
            if len(self.errors) < MAX_SHOWN_ERRORS:
                what = f"{error.field}: {error.message}" if error.field else error.message
                self.errors.append(RowProblem(line=error.line, message=what))


class Inspection(BaseModel):
    """What `inspect` found; `--json` prints it as is."""

    file: str
    format: str
    kind: str
    mapping: dict[str, str]  # canonical field -> source field; empty: as is
    detected: list[str]  # which of format, kind, mapping came from detection
    suggestions: list[str]  # detection's guesses to confirm, and why a file does not fit
    validation: ValidationReport
    stats: DatasetStats
    preview: list[PreviewRow]
    trainable: bool


def inspect_file(
    path: Path,
    kind: str | None,
    mapping: dict[str, str] | None,
    options: RenderOptions,
    preview_rows: int = 3,
) -> Inspection:
    """Detect (what is not given), validate, render and count `path`, reading it once.

    Raises:
        UsageError: The file is missing, or its kind cannot be told and was not given.
        ConfigError: The renderer does not fit the base model's tokenizer.
        BackendError: The base model's tokenizer cannot be loaded.
    """
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    rendering = stats.load_rendering(options)  # first: a bad renderer fails before the read
    fmt, kind, mapping, detected, suggestions = _detect(path, kind, mapping)
    report = ValidationReport()
    head: list[tuple[int, dict[str, object]]] = []
    rows = _keep_head(_checked_rows(path, fmt, kind, mapping, report), head, preview_rows)
    dataset_stats = stats.compute_stats(rows, kind, rendering)
    if report.rows == 0:
        report.add([RowError(0, None, "file has no rows", "no_rows")])
    return Inspection(
        file=str(path),
        format=fmt,
        kind=kind,
        mapping=mapping,
        detected=detected,
        suggestions=suggestions,
        validation=report,
        stats=dataset_stats,
        preview=stats.preview(head, kind, rendering, preview_rows),
        trainable=report.error_count == 0 and dataset_stats.trainable,
    )


def _detect(
    path: Path, kind: str | None, mapping: dict[str, str] | None
) -> tuple[Format, str, dict[str, str], list[str], list[str]]:
    """Format, kind and mapping: as given, else as detection proposes them."""
    if mapping is not None and (problems := mapping_problems(mapping)):
        raise UsageError("bad --map: " + "; ".join(problems))
    if kind is not None and mapping is not None:
        return detect_format(path, path.name, MAX_LINE_BYTES), kind, mapping, ["format"], []
    detection = detect_file(path, path.name)
    detected = ["format"]
    if kind is None:
        kind, detected = detection.kind, [*detected, "kind"]
    if kind is None:
        why = "; ".join(detection.suggestions)
        raise UsageError(f"{path}: cannot tell the dataset kind ({why}); pass --kind")
    if mapping is None:
        # A mapping proposed for another kind would rename the wrong fields.
        mapping = dict(detection.mapping) if kind == detection.kind else {}
        detected.append("mapping")
    fmt = cast(Format, detection.format)
    return fmt, kind, mapping, detected, list(detection.suggestions)


def _checked_rows(
    path: Path, fmt: Format, kind: str, mapping: dict[str, str], report: ValidationReport
) -> Iterator[tuple[int, dict[str, object]]]:
    """The rows that pass an upload's checks, mapped; the others go into `report`."""
    # The check an upload must pass (the same function), so the two always agree.
    check = row_check(kind)  # type: ignore[arg-type]
    for line, row in read_rows(path, fmt, MAX_LINE_BYTES):
        report.rows += 1
        if isinstance(row, RowError):
            report.add([row])
            continue
        mapped = apply_mapping(row, mapping)
        errors = check(line, mapped)
        if errors:
            report.add(errors)
        else:
            yield line, mapped


def _keep_head(
    rows: Iterable[tuple[int, dict[str, object]]],
    head: list[tuple[int, dict[str, object]]],
    n: int,
) -> Iterator[tuple[int, dict[str, object]]]:
    """`rows` unchanged, keeping the first `n` in `head` for the preview."""
    for item in rows:
        if len(head) < n:
            head.append(item)
        yield item
