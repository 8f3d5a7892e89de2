"""`thinker datasets inspect FILE`: is this file ready to train on, and what will training see?

    thinker datasets inspect data.jsonl                        # detect, validate, render
    thinker datasets inspect qa.csv --kind problems --map prompt=question --map answer=reply
    thinker datasets inspect chat.jsonl --train-on-what all_assistant_messages --json

It detects the format, kind and field mapping (unless given), checks every row as an upload
is checked, renders the rows exactly as training will (thinker.data.stats) and prints the
statistics and the first rows with their trained text marked. The file is streamed once.

Exit codes: 0 the data is trainable; 3 it is not (bad rows, rows that train no token, rows
the renderer refuses); 2 a usage error (bad arguments, missing file, unknown renderer).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO, cast

from pydantic import BaseModel, Field, ValidationError

from thinker.data import stats
from thinker.data.detect import apply_mapping, detect_file, mapping_problems
from thinker.data.formats import Format, detect_format, read_rows
from thinker.data.stats import KINDS, DatasetStats, PreviewRow, RenderOptions, RowProblem
from thinker.data.validation import RowError
from thinker.errors import ThinkerError
from thinker.renderers import RENDERER_NAMES, TrainOnWhat

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_TRAINABLE = 3
MAX_LINE_BYTES = 1_000_000  # as the server's default `max_line_bytes`
MAX_SHOWN_ERRORS = 20
BAR_WIDTH = 40

# Marks around text when stdout is not a terminal (a pipe, a file, a CI log).
TRAINED_MARKS = ("⟦", "⟧")
CUT_MARKS = ("⟪", "⟫")
# ANSI styles when it is one.
STYLE_TRAINED = "\x1b[1;32m"  # bold green
STYLE_UNTRAINED = "\x1b[2m"  # dim
STYLE_CUT = "\x1b[2;9m"  # dim, struck through
STYLE_RESET = "\x1b[0m"

_SL_KINDS = ("chat", "prompt_completion")


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


class UsageError(ThinkerError, ValueError):
    """A bad command line or an input that cannot be inspected at all (exit code 2)."""


def inspect_main(argv: list[str]) -> int:
    """Run `thinker datasets inspect` with `argv` (after "inspect") and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        options = RenderOptions(
            base_model=args.base_model,
            renderer=args.renderer,
            train_on_what=args.train_on_what,
            max_length=args.max_length,
        )
        inspection = inspect_file(args.file, args.kind, _mapping(args.map), options, args.rows)
    except (ThinkerError, ValidationError, OSError) as e:
        print(f"[thinker] error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(inspection.model_dump_json(indent=2))
    else:
        print_report(inspection, sys.stdout, color=_use_color(sys.stdout))
    return EXIT_OK if inspection.trainable else EXIT_NOT_TRAINABLE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thinker datasets inspect",
        description="Detect, validate and render a dataset file as training will see it.",
        epilog="exit codes: 0 trainable; 3 not trainable (bad rows, rows that train no "
        "token); 2 usage error",
    )
    parser.add_argument("file", type=Path, help="JSONL, JSON, CSV or Parquet")
    parser.add_argument("--kind", choices=KINDS, help="default: detected from the file")
    parser.add_argument(
        "--map",
        action="append",
        metavar="CANONICAL=SOURCE",
        help="read field CANONICAL from the file's SOURCE field (repeatable; default: detected)",
    )
    parser.add_argument("--base-model", default=stats.DEFAULT_BASE_MODEL, help="its tokenizer")
    parser.add_argument("--renderer", choices=RENDERER_NAMES, help="default: the base model's own")
    parser.add_argument(
        "--train-on-what",
        choices=[t.value for t in TrainOnWhat],
        default=stats.DEFAULT_TRAIN_ON_WHAT.value,
        help="SL kinds only (default %(default)s)",
    )
    parser.add_argument(
        "--max-length", type=int, default=stats.DEFAULT_MAX_LENGTH, help="default %(default)s"
    )
    parser.add_argument("--rows", type=int, default=3, help="rows to show rendered (default 3)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    return parser


def _mapping(pairs: list[str] | None) -> dict[str, str] | None:
    if pairs is None:
        return None
    mapping = {}
    for pair in pairs:
        canonical, sep, source = pair.partition("=")
        if not sep or not canonical.strip() or not source.strip():
            raise UsageError(f"--map wants CANONICAL=SOURCE (e.g. prompt=question), got {pair!r}")
        mapping[canonical.strip()] = source.strip()
    return mapping


# ---- inspecting --------------------------------------------------------------------------


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
    # The server's check is the one an upload must pass; importing it here keeps the two equal.
    from thinker.server.datasets import row_check

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


# ---- printing ----------------------------------------------------------------------------


def print_report(inspection: Inspection, out: TextIO, color: bool = False) -> None:
    """The human-readable report: detection, validation, statistics, rendered rows."""
    for section in (_header, _validation, _statistics, _histogram, _errors, _preview, _verdict):
        lines = section(inspection, color)
        if lines:
            out.write("\n".join(lines) + "\n\n")


def _use_color(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def _header(i: Inspection, color: bool) -> list[str]:
    def how(name: str) -> str:
        return " (detected)" if name in i.detected else ""

    mapping = ", ".join(f"{c} <- {s}" for c, s in i.mapping.items()) or "as is"
    s = i.stats
    lines = [
        f"file        {i.file}",
        f"format      {i.format}{how('format')}",
        f"kind        {i.kind}{how('kind')}",
        f"mapping     {mapping}{how('mapping')}",
        f"rendering   {s.base_model}, renderer {s.renderer}, "
        + (f"train_on_what {s.train_on_what.value}, " if i.kind in _SL_KINDS else "")
        + (f"max_length {s.max_length}" if i.kind != "problems" else "no truncation (RL)"),
    ]
    return lines + [f"suggestion  {x}" for x in i.suggestions]


def _validation(i: Inspection, color: bool) -> list[str]:
    v = i.validation
    if not v.error_count:
        return [f"validation  {v.rows} rows read, no problems"]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(v.by_kind.items(), key=lambda x: -x[1]))
    lines = [f"validation  {v.error_count} problem(s) in {v.rows} rows read ({kinds})"]
    lines += [f"  {_where(e.line)}{e.message}" for e in v.errors]
    if v.error_count > len(v.errors):
        lines.append(f"  ... and {v.error_count - len(v.errors)} more")
    return lines


def _where(line: int) -> str:
    return f"line {line}: " if line else ""


def _statistics(i: Inspection, color: bool) -> list[str]:
    s = i.stats
    if s.rows == 0:
        return ["statistics  no valid row to render"]
    noun = "prompt tokens" if i.kind == "problems" else "tokens per row"
    lines = [f"{noun:<18}{_summary(s.tokens)}"]
    if i.kind != "problems":
        lines += [
            f"{'trained per row':<18}{_summary(s.trained_tokens)}",
            f"{'truncated':<18}{s.truncated.count} rows longer than {s.max_length} tokens"
            f"{_lines(s.truncated)}, {s.truncated_losing_trained.count} losing trained "
            f"tokens{_lines(s.truncated_losing_trained)}",
            f"{'zero trained':<18}{s.zero_trained.count} rows{_lines(s.zero_trained)}",
        ]
    roles = ", ".join(f"{role} {n}" for role, n in s.roles.items())
    turns = ", ".join(f"{n} messages: {c}" for n, c in s.turns.items())
    lines += [f"{'roles':<18}{roles}", f"{'turns (rows)':<18}{turns}"]
    if s.identical_pairs is not None and s.empty_sides is not None:
        lines.append(
            f"{'pairs':<18}{s.identical_pairs.count} chosen = rejected"
            f"{_lines(s.identical_pairs)}, {s.empty_sides.count} with a side that trains "
            f"nothing{_lines(s.empty_sides)}"
        )
    if s.with_answer is not None:
        lines.append(f"{'problems':<18}{s.with_answer} with an answer, {s.with_tests} with tests")
    return lines


def _summary(summary: stats.Summary) -> str:
    return (
        f"min {summary.min}  mean {summary.mean:.1f}  median {summary.median:g}  "
        f"p95 {summary.p95}  max {summary.max}  total {summary.total:,}"
    )


def _lines(found: stats.LineCount) -> str:
    if not found.count:
        return ""
    more = ", ..." if found.count > len(found.lines) else ""
    return f" (line {', '.join(map(str, found.lines[:5]))}{more})"


def _histogram(i: Inspection, color: bool) -> list[str]:
    bins = i.stats.histogram
    if not bins:
        return []
    top = max(b.count for b in bins)
    lines = ["length histogram (tokens per row)"]
    for b in bins:
        bar = "#" * (round(BAR_WIDTH * b.count / top) if top else 0)
        if b.count and not bar:
            bar = "."  # a bin with rows never looks empty
        label = f"{b.lo}-{b.hi - 1}"
        over = "  > max_length" if b.lo > i.stats.max_length else ""
        lines.append(f"  {label:>13}  {bar:<{BAR_WIDTH}} {b.count}{over}")
    return lines


def _errors(i: Inspection, color: bool) -> list[str]:
    s = i.stats
    if not s.error_count:
        return []
    lines = [f"rows training cannot use ({s.error_count})"]
    lines += [f"  {_where(e.line)}{e.message}" for e in s.errors]
    if s.error_count > len(s.errors):
        lines.append(f"  ... and {s.error_count - len(s.errors)} more")
    return lines


def _preview(i: Inspection, color: bool) -> list[str]:
    if not i.preview:
        return []
    legend = (
        "trained text bold green, untrained dim, cut by max_length struck through"
        if color
        else f"trained text in {''.join(TRAINED_MARKS)}, cut by max_length in {''.join(CUT_MARKS)}"
    )
    lines = [f"first {len(i.preview)} row(s) as training sees them ({legend})"]
    for row in i.preview:
        lines += _preview_row(row, color)
    return lines


def _preview_row(row: PreviewRow, color: bool) -> list[str]:
    if row.error is not None:
        return [f"line {row.line}: not renderable: {row.error}"]
    lines = []
    for seq in row.sequences:
        cut = ", truncated" if seq.truncated else ""
        name = "" if seq.name == "example" else f" {seq.name}"
        lines.append(
            f"line {row.line}{name} ({seq.num_tokens} tokens, "
            f"{seq.num_trained_tokens} trained{cut})"
        )
        text = "".join(_styled(s, color) for s in seq.segments)
        lines += [f"    {part}" if part else "" for part in text.split("\n")]
    return lines


def _styled(segment: stats.Segment, color: bool) -> str:
    if color:
        style = STYLE_CUT if segment.truncated else STYLE_TRAINED if segment.trained else ""
        style = style or STYLE_UNTRAINED
        return f"{style}{segment.text}{STYLE_RESET}"
    if segment.truncated:
        return f"{CUT_MARKS[0]}{segment.text}{CUT_MARKS[1]}"
    if segment.trained:
        return f"{TRAINED_MARKS[0]}{segment.text}{TRAINED_MARKS[1]}"
    return segment.text


def _verdict(i: Inspection, color: bool) -> list[str]:
    if i.trainable:
        return [f"trainable: {i.stats.rows} rows"]
    problems = Counter(
        {
            "bad rows": i.validation.error_count,
            "rows that train no token": i.stats.zero_trained.count,
            "rows the renderer refuses": i.stats.unrenderable.count,
        }
    )
    found = ", ".join(f"{n} {what}" for what, n in problems.items() if n)
    return [f"NOT trainable: {found or 'no rows'}"]
