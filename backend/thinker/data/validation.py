"""The dataset validator of the pipeline's `validate` stage.

It streams a JSONL file one line at a time (memory stays constant whatever the file's
size) and checks every row against a list of `SchemaField`s: present when required, of the
right JSON type, not empty unless allowed. A dataset *kind* adds structural checks that a
flat schema cannot express (the `messages` list of a chat row). Every problem is collected
with its line number, so one run reports all of them; nothing stops at the first.

Line numbers are 1-based physical lines of the file, blank lines included, so they match
what an editor shows. Indices inside `messages` are 0-based, as in Python and JSONPath.

Lines are parsed with orjson, several times faster than the standard library; a line orjson
refuses is parsed again with `json`, whose messages name the problem and which alone accepts
what JSON allows and orjson does not (a lone UTF-16 surrogate escape, which the server then
refuses to store). One difference is left: an integer past 64 bits becomes a float (the
server finds those rows again and refuses them: `thinker.server.datasets.scan`).

`ErrorSummary` and `DuplicateFinder` are the parts of the server's whole-file validation
(`thinker.server.datasets.convert`) that do not depend on the dataset's kind.
"""

from __future__ import annotations

import codecs
import heapq
import itertools
import json
import math
import os
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import orjson

from thinker.data.kinds import SL_KINDS, DatasetKind
from thinker.errors import ConfigError, DatasetError

FieldType = Literal["string", "number", "integer", "boolean", "object", "array"]
ErrorKind = Literal[
    "unreadable",  # the file is missing or not a regular file
    "no_rows",  # the file holds no non-blank line
    "not_text",  # the file looks binary (a NUL byte, or mostly bytes text does not hold)
    "invalid_utf8",
    "malformed_json",
    "not_object",  # the line is valid JSON but not an object
    "missing",  # a required field is absent
    "wrong_type",
    "empty",  # "", [] or {} where allow_empty is False
    "invalid_value",  # right type, wrong value (an unknown role, no assistant message)
    "too_long",  # a line (or a row as JSON) over the server's limit
    "too_deep",  # arrays and objects nested deeper than the limit
    "too_many_columns",  # a row with more fields (a file with more columns) than the limit
    "out_of_range",  # an integer past 64 bits, which JSON readers do not hold exactly
    "duplicate",  # the same row as an earlier one, byte for byte once normalised
]

ROLES = ("system", "user", "assistant", "tool")
FILE_LEVEL = 0  # the `line` of an error about the whole file
SNIFF_BYTES = 8192  # the start of a file that tells text from binary
MAX_ROW_DEPTH = 254  # levels of arrays and objects in a row: what orjson writes
BINARY_SHARE = 0.3  # of those bytes not text (not UTF-8, or controls): binary
# Control characters that text holds: backspace, tab, newline, vertical tab, form feed, CR, ESC
_TEXT_CONTROLS = frozenset(b"\b\t\n\v\f\r\x1b")
_CONTROL_BYTES = [bytes([b]) for b in [*range(32), 127] if b not in _TEXT_CONTROLS]


@dataclass(frozen=True)
class SchemaField:
    """One top-level field of a row: its JSON type, and whether it may be absent or empty."""

    name: str
    type: FieldType
    required: bool = True
    allow_empty: bool = False  # "" (or whitespace only), [] and {} count as empty


@dataclass(frozen=True)
class RowError:
    """One problem: the line it is on (0 for the whole file), the field, and what is wrong."""

    line: int
    field: str | None
    message: str
    kind: ErrorKind = "invalid_value"

    def format(self, path: Path | str) -> str:
        """`<file>:<line>: <field>: <what is wrong>`, leaving out the parts that do not apply."""
        where = f"{path}" if self.line == FILE_LEVEL else f"{path}:{self.line}"
        what = f"{self.field}: {self.message}" if self.field else self.message
        return f"{where}: {what}"


@dataclass
class ValidationResult:
    """Every problem found in one file; `rows_checked` counts non-blank lines read."""

    path: Path
    rows_checked: int
    errors: list[RowError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self, max_errors: int = 20) -> str:
        """The first `max_errors` problems in full, then how many there are of each kind."""
        if self.ok:
            return f"{self.path}: {self.rows_checked} rows OK"
        counts = Counter(e.kind for e in self.errors)
        by_kind = ", ".join(f"{n} {kind}" for kind, n in counts.most_common())
        head = (
            f"{self.path}: {len(self.errors)} problem(s) in {self.rows_checked} row(s) checked "
            f"({by_kind})"
        )
        lines = [f"  {e.format(self.path)}" for e in self.errors[:max_errors]]
        if len(self.errors) > max_errors:
            lines.append(f"  ... and {len(self.errors) - max_errors} more not shown")
        return "\n".join([head, *lines])

    def raise_for_errors(self, max_errors: int = 20) -> None:
        """Raise `DatasetError` with the summary if any problem was found."""
        if not self.ok:
            raise DatasetError(self.summary(max_errors))


def schema_for_kind(kind: DatasetKind) -> list[SchemaField]:
    """The top-level fields of a row of each dataset kind."""
    if kind == "chat":
        return [SchemaField("messages", "array")]
    if kind == "prompt_completion":
        return [
            SchemaField("prompt", "string"),
            SchemaField("completion", "string"),
            SchemaField("system", "string", required=False),
        ]
    raise ConfigError(f"unknown dataset kind {kind!r}; expected one of {', '.join(SL_KINDS)}")


def validate_jsonl(
    path: Path,
    schema: list[SchemaField] | None = None,
    kind: str | None = None,
    max_examples: int | None = None,
) -> ValidationResult:
    """Check every row of a JSONL file and report every problem found.

    Args:
        path: The JSONL file.
        schema: Top-level fields to check on top of the kind's; where both name a field,
            this one wins. With neither, each row need only be a JSON object.
        kind: "chat" or "prompt_completion": the kind's fields and structural checks.
        max_examples: Stop after this many non-blank rows (None: read the whole file).

    Returns:
        The result; it does not raise for bad rows (see `ValidationResult.raise_for_errors`).

    Raises:
        ConfigError: `kind` is unknown or `max_examples` is below 1.
    """
    fields = _merge(schema_for_kind(kind) if kind else [], schema or [])  # type: ignore[arg-type]
    return scan_rows(Path(path), lambda line, row: check_row(line, row, fields, kind), max_examples)


def scan_rows(
    path: Path,
    check: Callable[[int, dict[str, object]], list[RowError]],
    max_examples: int | None = None,
) -> ValidationResult:
    """Run `check(line, row)` on each row that parses to an object and collect every problem.

    Lines that are not UTF-8, not JSON or not an object become errors without reaching
    `check`; an unreadable or empty file becomes one file-level error.
    """
    result = ValidationResult(path=path, rows_checked=0)
    for line, row in iter_rows(path, max_examples):
        if isinstance(row, RowError) and row.kind in ("unreadable", "not_text"):
            result.errors.append(row)
            return result
        result.rows_checked += 1
        result.errors.extend([row] if isinstance(row, RowError) else check(line, row))
    if result.rows_checked == 0:
        result.errors.append(RowError(FILE_LEVEL, None, "file has no rows", "no_rows"))
    return result


def iter_rows(
    path: Path, max_examples: int | None = None
) -> Iterator[tuple[int, dict[str, object] | RowError]]:
    """Yield `(line, row)` for each non-blank line, or `(line, error)` where it is not an object.

    An unreadable or binary file yields a single file-level error and nothing else.
    """
    if max_examples is not None and max_examples < 1:
        raise ConfigError(f"max_examples must be at least 1 (or None for all), got {max_examples}")
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, f"file {what}", "unreadable")
        return
    seen = 0
    with open(path, "rb") as f:
        if problem := not_text_problem(f.read(SNIFF_BYTES)):
            yield FILE_LEVEL, RowError(FILE_LEVEL, None, problem, "not_text")
            return
        f.seek(0)
        for line, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            yield line, _parse_line(line, raw)
            seen += 1
            if seen == max_examples:
                return


def not_text_problem(head: bytes) -> str | None:
    """Why a file that starts with `head` is not text, or None: a NUL byte, which UTF-8 text
    never holds, or over BINARY_SHARE of bytes that are not UTF-8 or are control characters
    other than whitespace, some of them controls. Text in a legacy encoding (Latin-1, Greek
    ISO-8859-7) may be mostly bytes that are not UTF-8 but holds no controls: it reads as text,
    and its lines are reported as invalid UTF-8."""
    if (nul := head.find(b"\0")) >= 0:
        return _not_text(f"NUL byte at byte {nul}")
    # Incremental: a character that `head` cuts off at its end is held back, not counted.
    invalid = codecs.getincrementaldecoder("utf-8")("replace").decode(head).count("\ufffd")
    controls = sum(map(head.count, _CONTROL_BYTES))
    odd = invalid + controls
    if controls > 0.01 * len(head) and odd > BINARY_SHARE * len(head):
        return _not_text(f"{odd * 100 // len(head)}% of its first {len(head)} bytes are not text")
    return None


def _not_text(sign: str) -> str:
    return f"not a text file (it looks binary: {sign}); upload JSONL, JSON, CSV or Parquet"


def check_row(
    line: int, row: dict[str, object], schema: list[SchemaField], kind: str | None = None
) -> list[RowError]:
    """Every problem with one parsed row: its schema fields, then the kind's structure."""
    errors = [e for f in schema for e in _check_field(line, row, f)]
    messages = row.get("messages")
    if kind == "chat" and isinstance(messages, list) and messages:
        errors.extend(_check_messages(line, messages))
    return errors


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type (a bool is a boolean, never a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _merge(kind_fields: list[SchemaField], schema: list[SchemaField]) -> list[SchemaField]:
    """The kind's fields plus the schema's; where both name a field, the schema's wins."""
    named = {f.name for f in schema}
    return [f for f in kind_fields if f.name not in named] + schema


def _parse_line(line: int, raw: bytes) -> dict[str, object] | RowError:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _parse_line_slowly(line, raw)
    if type(value) is dict:
        return value
    return RowError(
        line, None, f"row is a JSON {json_type(value)}, expected an object", "not_object"
    )


def _parse_line_slowly(line: int, raw: bytes) -> dict[str, object] | RowError:
    """The standard library's parse of a line orjson refused: its messages, its leniency."""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")  # so JSON errors point into this line
    except UnicodeDecodeError as e:
        bad = raw[e.start : e.start + 1].hex()
        return RowError(
            line, None, f"invalid UTF-8: byte 0x{bad} at byte offset {e.start}", "invalid_utf8"
        )
    if line == 1:  # a byte-order mark is legal at the start of a UTF-8 file, nowhere else
        text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=finite_float)
    except json.JSONDecodeError as e:
        return RowError(line, None, f"malformed JSON: {e.msg} (column {e.colno})", "malformed_json")
    except ValueError as e:  # NaN / Infinity, which JSON does not allow
        return RowError(line, None, f"malformed JSON: {e}", "malformed_json")
    except RecursionError:  # past orjson's 1,024 levels, and then past Python's stack
        return too_deep(line)
    if not isinstance(value, dict):
        return RowError(
            line, None, f"row is a JSON {json_type(value)}, expected an object", "not_object"
        )
    return value


def too_deep(line: int) -> RowError:
    message = f"arrays and objects nested deeper than {MAX_ROW_DEPTH} levels (the limit)"
    return RowError(line, None, message, "too_deep")


def finite_float(text: str) -> float:
    """`float(text)`, refusing a number too large for a double (JSON has no Infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _check_field(line: int, row: dict[str, object], f: SchemaField) -> list[RowError]:
    value = row.get(f.name)
    if value is None:  # null in an optional field means "not given"
        if f.name in row and f.required:
            return [RowError(line, f.name, f"expected {f.type}, got null", "wrong_type")]
        return [RowError(line, f.name, "missing", "missing")] if f.required else []
    return _check_value(line, f.name, value, f.type, f.allow_empty)


def _check_value(
    line: int, name: str, value: object, expected: FieldType, allow_empty: bool = False
) -> list[RowError]:
    actual = json_type(value)
    if not (actual == expected or (expected == "number" and actual == "integer")):
        return [RowError(line, name, f"expected {expected}, got {actual}", "wrong_type")]
    if not allow_empty and _is_empty(value):
        return [RowError(line, name, "is empty", "empty")]
    return []


def _is_empty(value: object) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, list | dict) and not value


def _check_messages(line: int, messages: list[object]) -> list[RowError]:
    errors: list[RowError] = []
    for i, message in enumerate(messages):
        name = f"messages[{i}]"
        if not isinstance(message, dict):
            actual = json_type(message)
            errors.append(RowError(line, name, f"expected object, got {actual}", "wrong_type"))
            continue
        errors.extend(_check_message(line, name, message))
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    if "assistant" not in roles:
        errors.append(RowError(line, "messages", "has no assistant message", "invalid_value"))
    return errors


def _check_message(line: int, name: str, message: dict[str, object]) -> list[RowError]:
    errors: list[RowError] = []
    for key in ("role", "content"):
        if key not in message:
            errors.append(RowError(line, f"{name}.{key}", "missing", "missing"))
        else:
            errors.extend(_check_value(line, f"{name}.{key}", message[key], "string"))
    role = message.get("role")
    if isinstance(role, str) and role.strip() and role not in ROLES:
        allowed = ", ".join(ROLES)
        errors.append(RowError(line, f"{name}.role", f"unknown role {role!r} (expected {allowed})"))
    if "trainable" in message:
        errors.extend(_check_value(line, f"{name}.trainable", message["trainable"], "boolean"))
    return errors


# ---- whole-file validation: the error summary and exact duplicates -----------------------


@dataclass
class ErrorSummary:
    """Every problem counted by kind, with the first `limit` of them (by line) kept in full."""

    limit: int = 50
    first: list[RowError] = field(default_factory=list)
    count: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, errors: Iterable[RowError]) -> None:
        for error in errors:
            self.count += 1
            self.counts[error.kind] += 1
            if len(self.first) < self.limit:
                self.first.append(error)

    def merged(self, other: ErrorSummary) -> ErrorSummary:
        """Both summaries as one; each must have come in line order (the merge keeps it)."""
        first = list(heapq.merge(self.first, other.first, key=lambda e: e.line))[: self.limit]
        return ErrorSummary(self.limit, first, self.count + other.count, self.counts + other.counts)


class DuplicateFinder:
    """Exact duplicate rows of a JSONL file being written, in memory that does not grow.

    `add_rows` records each row's 64-bit hash, line number and end offset in the file, a
    block of about 16,384 rows at a time, to a scratch file on disk (24 bytes a row).
    `duplicates` then reads that file back with numpy. A Bloom filter of fixed size (16 MiB,
    2 probes) marks every row whose hash may have come before; those hashes are the
    candidates. A second read verifies each candidate exactly, comparing the bytes of the
    two rows in the written file, so neither a hash collision nor a false positive of the
    filter is ever reported. At most `max_candidates` hashes are held at once: past that,
    candidates are verified in rounds, each reporting only the duplicates in the blocks that
    raised its candidates. Memory: the filter, a block, the candidates; the disk holds what
    grows with the file.
    """

    BLOCK_ROWS = 1 << 14

    def __init__(
        self,
        rows_file: Path,
        filter_bits: int = 1 << 27,
        max_candidates: int = 1 << 18,
        row_hash: Callable[[bytes], int] = hash,  # any 64-bit hash: collisions are verified
    ) -> None:
        self.rows_file = rows_file
        self.row_hash = row_hash
        self.filter_bits = filter_bits
        self.max_candidates = max_candidates
        # Closed by `close` (or the `with` block); deleted by the OS when closed.
        self._side = tempfile.TemporaryFile(dir=rows_file.parent, prefix=".tmp-dups-")  # noqa: SIM115
        self._hashes, self._lines, self._ends = array("q"), array("q"), array("q")
        self._blocks = 0
        self._offset = 0  # where the next row starts in `rows_file`

    def add_rows(self, rows: list[bytes], lines: list[int]) -> None:
        """Rows just appended to `rows_file` (each its bytes, newline included), and the line
        each came from. Python's bytes hash is 64-bit SipHash, the same within a process."""
        self._hashes.extend(map(self.row_hash, rows))
        self._lines.extend(lines)
        ends = itertools.accumulate(map(len, rows), initial=self._offset)
        self._ends.extend(itertools.islice(ends, 1, None))
        self._offset = self._ends[-1] if self._ends else self._offset
        if len(self._hashes) >= self.BLOCK_ROWS:
            self._flush()

    def duplicates(self) -> Iterator[tuple[int, int]]:
        """`(line, first line)` of each row that repeats an earlier one, in line order.

        Call once `rows_file` is flushed and every row added.
        """
        self._flush()
        bits = np.zeros(self.filter_bits // 8, np.uint8)
        pending: set[int] = set()
        window_start = 0
        with open(self.rows_file, "rb") as rows:
            for index, (hashes, _, _) in enumerate(self._read_blocks(self._blocks)):
                pending.update(self._maybe_seen(hashes, bits))
                if len(pending) >= self.max_candidates or index == self._blocks - 1:
                    yield from self._verify(pending, window_start, index + 1, rows.fileno())
                    pending, window_start = set(), index + 1

    def close(self) -> None:
        self._side.close()

    def __enter__(self) -> DuplicateFinder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush(self) -> None:
        if not self._hashes:
            return
        self._side.write(np.int64(len(self._hashes)).tobytes())
        for values in (self._hashes, self._lines, self._ends):
            self._side.write(values.tobytes())
        self._hashes, self._lines, self._ends = array("q"), array("q"), array("q")
        self._blocks += 1

    def _read_blocks(self, count: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The first `count` blocks: (hashes as uint64, lines, end offsets)."""
        self._side.seek(0)
        for _ in range(count):
            n = int(np.frombuffer(self._side.read(8), np.int64)[0])
            columns = np.frombuffer(self._side.read(24 * n), np.int64).reshape(3, n)
            yield columns[0].view(np.uint64), columns[1], columns[2]

    def _maybe_seen(self, hashes: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """The hashes of this block that the filter has seen, or that repeat in the block;
        then the block goes into the filter."""
        mask = np.uint64(self.filter_bits - 1)
        probes = (hashes & mask, (hashes >> np.uint64(32)) & mask)
        seen = np.ones(len(hashes), bool)
        for probe in probes:
            seen &= (bits[probe >> np.uint64(3)] >> (probe & np.uint64(7)).astype(np.uint8)) & 1 > 0
        _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
        candidates = np.unique(hashes[seen | (counts[inverse] > 1)])
        for probe in probes:
            np.bitwise_or.at(
                bits, probe >> np.uint64(3), np.left_shift(1, probe & np.uint64(7)).astype(np.uint8)
            )
        return candidates.astype(np.int64).tolist()

    def _verify(
        self, candidates: set[int], start: int, stop: int, fd: int
    ) -> Iterator[tuple[int, int]]:
        """Duplicates among rows whose hash is a candidate, reported for blocks [start, stop)."""
        if not candidates:
            return
        wanted = np.array(sorted(candidates), np.int64).view(np.uint64)
        firsts: dict[int, list[tuple[int, int, int]]] = {}  # hash -> distinct (line, start, end)
        previous_end = 0
        for index, (hashes, lines, ends) in enumerate(self._read_blocks(stop)):
            starts = np.concatenate(([previous_end], ends[:-1]))
            previous_end = int(ends[-1])
            for i in np.flatnonzero(np.isin(hashes, wanted)):
                row = (int(lines[i]), int(starts[i]), int(ends[i]))
                first = _same_row(firsts.setdefault(int(hashes[i]), []), row, fd)
                if first is not None and index >= start:
                    yield row[0], first


def _same_row(firsts: list[tuple[int, int, int]], row: tuple[int, int, int], fd: int) -> int | None:
    """The line of the row in `firsts` whose bytes equal `row`'s; else `row` joins them."""
    data = os.pread(fd, row[2] - row[1], row[1])
    for line, start, end in firsts:
        if end - start == len(data) and os.pread(fd, end - start, start) == data:
            return line
    firsts.append(row)
    return None
