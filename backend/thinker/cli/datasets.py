"""`thinker datasets inspect | import`: check a dataset file as training will see it, or import
a Hugging Face dataset into the server's data directory.

`inspect` detects the format, kind and field mapping (unless given), checks every row as an
upload is checked, renders the rows exactly as training will (`thinker.services.inspect`) and
prints the statistics and the first rows with their trained text marked. `import` reads a hub
dataset (or a local copy) and stores it through the dataset service, as the server does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError
from tqdm import tqdm

from thinker.data.kinds import DatasetKind
from thinker.dataprep.hf_import import (
    HubRequest,
    Proposal,
    check_name_part,
    redact,
    resolve_cli_source,
)
from thinker.errors import ThinkerError
from thinker.settings import Settings
from thinker.store import open_database

if TYPE_CHECKING:
    from thinker.dataprep import stats
    from thinker.dataprep.stats import PreviewRow
    from thinker.services.inspect import Inspection

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_TRAINABLE = 3
BAR_WIDTH = 40
_SL_KINDS = ("chat", "prompt_completion")

# Marks around text when stdout is not a terminal (a pipe, a file, a CI log).
TRAINED_MARKS = ("⟦", "⟧")
CUT_MARKS = ("⟪", "⟫")
# ANSI styles when it is one.
STYLE_TRAINED = "\x1b[1;32m"  # bold green
STYLE_UNTRAINED = "\x1b[2m"  # dim
STYLE_CUT = "\x1b[2;9m"  # dim, struck through
STYLE_RESET = "\x1b[0m"

HELP = "inspect a dataset file, or import a Hugging Face dataset"
INSPECT_HELP = "detect, validate and preview a dataset file as training will see it"
INSPECT_EPILOG = """\
examples:
  thinker datasets inspect data.jsonl
  thinker datasets inspect qa.csv --kind problems --map prompt=question --map answer=reply
  thinker datasets inspect chat.jsonl --train-on-what all_assistant_messages --json

exit codes: 0 trainable; 3 not trainable (bad rows, rows that train no token, rows the
renderer refuses); 2 a usage error (bad arguments, missing file, unknown renderer)
"""
IMPORT_HELP = "import a Hugging Face dataset (hub id or local directory)"
IMPORT_EPILOG = """\
A gated or private dataset needs a token in the HF_TOKEN environment variable (a flag would
show in `ps`). The new dataset's id is printed on stdout; progress goes to stderr.

examples:
  thinker datasets import openai/gsm8k --config main --split train --limit 1000
  thinker datasets import ./my_saved_dataset --map prompt=question --map answer=solution

exit codes: 0 imported; 2 the source, a row or the command line is wrong
"""


class UsageError(ThinkerError, ValueError):
    """A bad command line (exit code 2)."""


def add_commands(commands: Any) -> None:
    parser = commands.add_parser("datasets", help=HELP, description=HELP)
    actions = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    _add_inspect(actions)
    _add_import(actions)


def _add_inspect(actions: Any) -> None:
    parser = actions.add_parser(
        "inspect",
        help=INSPECT_HELP,
        description=INSPECT_HELP.capitalize() + ".",
        epilog=INSPECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", type=Path, help="JSONL, JSON, CSV or Parquet")
    parser.add_argument("--kind", choices=list(DatasetKind), help="default: detected")
    parser.add_argument(
        "--map",
        action="append",
        metavar="CANONICAL=SOURCE",
        help="read field CANONICAL from the file's SOURCE field (repeatable; default: detected)",
    )
    parser.add_argument(
        "--base-model", help="its tokenizer renders the rows (default thinker/tiny)"
    )
    parser.add_argument("--renderer", help="default: the base model's own")
    parser.add_argument("--train-on-what", help="SL kinds only (default last_assistant_message)")
    parser.add_argument("--max-length", type=int, help="tokens (default 1024)")
    parser.add_argument("--rows", type=int, default=3, help="rows to show rendered (default 3)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(handler=inspect)


def _add_import(actions: Any) -> None:
    parser = actions.add_parser(
        "import",
        help=IMPORT_HELP,
        description="Import a Hugging Face dataset (hub id or local directory) as a dataset.",
        epilog=IMPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", help="hub id (org/name) or a directory in a hub layout")
    parser.add_argument("--config", help="the config (subset) to read")
    splits = parser.add_mutually_exclusive_group()
    splits.add_argument("--split", help="the split to read (default: all, into one dataset)")
    splits.add_argument("--all-splits", action="store_true", help="every split (the default)")
    parser.add_argument("--revision", help="a branch, tag or commit of the hub repository")
    parser.add_argument("--limit", type=_positive, help="import at most N rows")
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="CANONICAL=SOURCE",
        help="field mapping, e.g. --map prompt=question --map completion=answer "
        "(default: proposed from the data)",
    )
    parser.add_argument("--kind", choices=list(DatasetKind))
    parser.add_argument("--name", help="the dataset's name (default: from the source)")
    parser.add_argument("--data-dir", type=Path, help="the server's data directory")
    parser.set_defaults(handler=import_)


# ---- inspect -------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> int:
    """Run `thinker datasets inspect`; the exit code."""
    # Deferred: rendering the rows imports torch and transformers.
    from thinker.dataprep.stats import RenderOptions
    from thinker.services.inspect import inspect_file

    try:
        given = {
            "base_model": args.base_model,
            "renderer": args.renderer,
            "train_on_what": args.train_on_what,
            "max_length": args.max_length,
        }
        options = RenderOptions(**{k: v for k, v in given.items() if v is not None})
        mapping = parse_mapping(args.map)
        inspection = inspect_file(args.file, args.kind, mapping, options, args.rows)
    except (ThinkerError, ValidationError, OSError) as e:
        print(f"[thinker] error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(inspection.model_dump_json(indent=2))
    else:
        print_report(inspection, sys.stdout, color=_use_color(sys.stdout))
    return EXIT_OK if inspection.trainable else EXIT_NOT_TRAINABLE


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


# ---- import --------------------------------------------------------------------------------


def import_(args: argparse.Namespace) -> int:
    """Run `thinker datasets import`; the exit code. The token comes from `HF_TOKEN` only."""
    try:
        dataset_id = asyncio.run(_import(args))
    except (ThinkerError, ValidationError) as e:  # ValidationError: a bad THINKER_* variable
        detail = str(e).split("\n")[0]
        print(f"[thinker] error: {redact(detail, os.environ.get('HF_TOKEN'))}", file=sys.stderr)
        return EXIT_USAGE
    print(dataset_id)
    return EXIT_OK


async def _import(args: argparse.Namespace) -> str:
    """Open the platform's database like `thinker token` does, import, store; the new id."""
    # Deferred: the import stores through the dataset service, which imports torch.
    from thinker.services.datasets import DatasetService
    from thinker.services.imports import import_dataset

    settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
    request = HubRequest(
        source=resolve_cli_source(args.source),
        config=check_name_part("config", args.config),
        split=check_name_part("split", args.split),
        revision=check_name_part("revision", args.revision),
        limit=args.limit,
    )
    mapping = parse_mapping(args.map)
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    async with open_database(settings) as sessions:
        with _progress_bar() as progress:
            dataset = await import_dataset(
                DatasetService(settings, sessions),
                request,
                token=os.environ.get("HF_TOKEN") or None,
                name=args.name,
                kind=args.kind,
                mapping=mapping,
                observer=progress,
            )
    print(
        f"[thinker] imported {dataset.num_rows} row(s) of {request.label} as {dataset.kind} "
        f"dataset {dataset.id} ({dataset.name!r})",
        file=sys.stderr,
    )
    return dataset.id


class _ProgressBar:
    """A tqdm bar on stderr from the first batch on, fed from the import thread; then the
    proposal, on stderr too."""

    def __init__(self) -> None:
        self.bar: Any = None

    def progress(self, done: int, total: int | None) -> None:
        if self.bar is None:
            self.bar = tqdm(unit=" rows", desc="importing", file=sys.stderr, dynamic_ncols=True)
        if total is not None and self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def proposed(self, proposal: Proposal) -> None:
        self.close()
        shown = json.dumps(proposal.mapping) if proposal.mapping else "fields as they are"
        print(
            f"[thinker] storing as {proposal.kind or 'the kind the rows fit'}: {shown}",
            file=sys.stderr,
        )
        for suggestion in proposal.suggestions:
            print(f"[thinker] note: {suggestion}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextmanager
def _progress_bar() -> Iterator[_ProgressBar]:
    bar = _ProgressBar()
    try:
        yield bar
    finally:
        bar.close()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def parse_mapping(pairs: list[str] | None) -> dict[str, str] | None:
    """`["prompt=question", ...]` (repeated `--map`) as `{"prompt": "question"}`; None when
    none was given."""
    mapping: dict[str, str] = {}
    for pair in pairs or []:
        canonical, sep, source = pair.partition("=")
        if not sep or not canonical.strip() or not source.strip():
            raise UsageError(f"--map takes CANONICAL=SOURCE (e.g. prompt=question), got {pair!r}")
        mapping[canonical.strip()] = source.strip()
    return mapping or None
