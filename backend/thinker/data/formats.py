"""Reading a dataset file in any accepted format as numbered rows (JSON objects).

| format  | what the file holds                                  | a row's number            |
| ------- | ---------------------------------------------------- | ------------------------- |
| jsonl   | one JSON object a line                               | its line (blank lines too) |
| csv     | a header line, then one record a line                | its line (the header is 1) |
| json    | an array of objects, or an object of equal-length arrays (columns) | position, from 1 |
| parquet | a table, read a batch at a time                      | position, from 1          |

JSONL, CSV and Parquet are read in constant memory; a JSON document is parsed whole (the
standard library has no streaming JSON parser), which the upload limit bounds.

In the columnar formats (CSV, Parquet, a JSON object of columns) every row has every column,
so an empty cell or a null means "this row has no such field" and the key is left out. A CSV
cell of `messages`, `conversations`, `chosen`, `rejected` or `tests` that holds a JSON array
or object is parsed, so that a conversation fits in one cell; every other cell stays a string.

A problem with one row comes out as a `RowError` in that row's place, so that every problem
is reported; a problem that stops the reading (a JSON document that does not parse, a CSV
quoting error, a file pyarrow cannot read) is the last item.

No row ever holds NaN or an infinite number (JSON has neither): JSONL and JSON refuse them
when parsing, a CSV cell that would hold one stays text, and a Parquet row with one is a
`RowError`. So a row can be written back as JSON without checking its numbers again.

Bounds: a row has at most `MAX_COLUMNS` fields (a CSV header or a Parquet schema at most as
many columns, checked before any row is read); a row nested deeper than the JSON parser goes
is a `RowError`, never a RecursionError. What a row's values must fit to be stored (64-bit
integers, `MAX_ROW_DEPTH` levels) is checked where rows are written (`server.datasets`).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, BinaryIO, Literal, get_args

import orjson

from thinker.data.validation import (
    FILE_LEVEL,
    SNIFF_BYTES,
    RowError,
    _parse_line,
    _parse_line_slowly,
    finite_float,
    json_type,
    not_text_problem,
    too_deep,
)
from thinker.errors import NotTextError

if TYPE_CHECKING:
    from _csv import _reader

Format = Literal["jsonl", "json", "csv", "parquet"]
FORMATS: tuple[Format, ...] = get_args(Format)
Item = tuple[int, dict[str, object] | RowError]

EXTENSIONS: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
JSON_COLUMNS = (
    "messages",
    "conversations",
    "chosen",
    "rejected",
    "tests",
)  # CSV cells that may hold JSON
PARQUET_BATCH_ROWS = 1024
MAX_COLUMNS = 1000  # fields of a row, columns of a CSV header or a Parquet schema
INT_RANGE = (-(2**63), 2**64 - 1)  # the integers a row holds exactly (orjson's)
_SKIP_CHUNK = 1 << 16  # how much of an over-long line is read (and dropped) at a time


def detect_format(path: Path, filename: str | None = None, max_line_bytes: int = 1 << 20) -> Format:
    """The format of `path`: from the extension of `filename`, else from the content.

    A `.json` file whose first line is a whole object and which has more lines is taken as
    JSONL, which is often named `.json`. Without a known extension: Parquet's magic bytes,
    then `[` (a JSON array), `{` (JSONL if the first line is a whole object, else a JSON
    object of columns), and anything else is read as CSV.

    Raises:
        NotTextError: The file is neither Parquet nor text (see `not_text_problem`).
    """
    hinted = EXTENSIONS.get(PurePath(filename).suffix.lower()) if filename else None
    if hinted == "parquet":
        return hinted
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
        if head.startswith(b"PAR1"):
            return "parquet"
        if problem := not_text_problem(head):
            raise NotTextError(f"{filename or path.name} is {problem}")
        if hinted is not None and hinted != "json":
            return hinted
        f.seek(0)
        lines = _first_lines(f, max_line_bytes)
    start = lines[0].lstrip(b"\xef\xbb\xbf \t\r\n")[:1] if lines else b""
    if start == b"{" and _is_object_line(lines[0]) and (hinted is None or len(lines) > 1):
        return "jsonl"
    if start in (b"[", b"{"):
        return "json"
    return hinted or "csv"


def read_rows(path: Path, fmt: Format, max_line_bytes: int) -> Iterator[Item]:
    """Yield `(number, row)` for each row of `path`, or `(number, RowError)` where one is bad.

    Args:
        path: The file.
        fmt: Its format (see `detect_format`).
        max_line_bytes: The longest JSONL or CSV line accepted; longer ones are never held
            whole in memory.
    """
    if fmt == "jsonl":
        return _jsonl_rows(path, max_line_bytes)
    if fmt == "csv":
        return _csv_rows(path, max_line_bytes)
    if fmt == "json":
        return _json_rows(path)
    return _parquet_rows(path)


# ---- JSONL -------------------------------------------------------------------------------


def _jsonl_rows(path: Path, max_line_bytes: int) -> Iterator[Item]:
    # One flat loop: this is the hot path of validating a large upload.
    with open(path, "rb", buffering=1 << 20) as f:
        readline, line = f.readline, 0
        while raw := readline(max_line_bytes + 1):
            line += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                _skip_line(f)
                yield line, _too_long(line, max_line_bytes)
            elif not raw.isspace():  # the validate stage's parser, inlined: a call a row counts
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    yield line, _parse_line_slowly(line, raw)
                    continue
                if type(row) is not dict:
                    yield line, _parse_line(line, raw)
                elif len(row) > MAX_COLUMNS:
                    yield line, too_many_fields(line, len(row))
                else:
                    yield line, row


def _skip_line(f: BinaryIO) -> None:
    """Read and drop the rest of an over-long line, a chunk at a time."""
    while (raw := f.readline(_SKIP_CHUNK)) and not raw.endswith(b"\n"):
        pass


def _bounded_lines(f: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """Each line of `f`, or None in place of one longer than `limit` bytes (its newline aside)."""
    while raw := f.readline(limit + 1):
        if len(raw) <= limit or raw.endswith(b"\n"):  # read whole: at most `limit` + newline
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):  # drop the rest of the line, a chunk at a time
            raw = f.readline(_SKIP_CHUNK)
        yield None


def _too_long(line: int, limit: int) -> RowError:
    message = f"line is longer than {limit} bytes (the server's limit)"
    return RowError(line, None, message, "too_long")


def too_many_fields(line: int, count: int) -> RowError:
    message = f"row has {count} fields, over the limit of {MAX_COLUMNS}"
    return RowError(line, None, message, "too_many_columns")


def exact_jsonl_rows(path: Path, lines: set[int], max_line_bytes: int) -> Iterator[Item]:
    """The rows of `lines` (numbered as `read_rows` numbers them), parsed by the standard
    library, which keeps an integer past 64 bits exact where orjson makes it a float."""
    with open(path, "rb") as f:
        for line, raw in enumerate(_bounded_lines(f, max_line_bytes), start=1):
            if line in lines and raw is not None:
                yield line, _parse_line_slowly(line, raw)


def out_of_range(line: int, row: dict[str, object]) -> RowError | None:
    """The first integer of `row` that a row cannot hold exactly (see `INT_RANGE`), or None."""
    stack: list[tuple[str, object]] = [(str(k), v) for k, v in reversed(row.items())]
    while stack:  # not recursive: a row may be nested deeper than Python's stack
        place, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{place}.{k}", v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{place}[{i}]", v) for i, v in reversed([*enumerate(value)]))
        elif isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
            digits = str(value)
            shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits)} digits)"
            message = (
                f"integer {shown} is outside the 64-bit range ({INT_RANGE[0]} to "
                f"{INT_RANGE[1]}) that JSON readers hold exactly: write it as a string"
            )
            return RowError(line, place, message, "out_of_range")
    return None


def _first_lines(f: BinaryIO, limit: int) -> list[bytes]:
    """Up to two non-blank lines from the start of `f`, stopping at an over-long one."""
    lines: list[bytes] = []
    for raw in _bounded_lines(f, limit):
        if raw is None:
            break
        if raw.strip():
            lines.append(raw)
        if len(lines) == 2:
            break
    return lines


def _is_object_line(raw: bytes) -> bool:
    parsed = _parse_line(1, raw)
    return not isinstance(parsed, RowError)


# ---- CSV ---------------------------------------------------------------------------------


class _StopReading(Exception):
    def __init__(self, error: RowError) -> None:
        self.error = error


def _csv_rows(path: Path, max_line_bytes: int) -> Iterator[Item]:
    # csv refuses fields over 128 KiB by default; a field may be as long as a line. The
    # limit is process-wide, so it is only ever raised.
    csv.field_size_limit(max(csv.field_size_limit(), max_line_bytes))
    with open(path, "rb") as f:
        reader = csv.reader(_csv_lines(f, max_line_bytes))
        try:
            yield from _csv_records(reader)
        except _StopReading as stop:
            yield stop.error.line, stop.error
        except csv.Error as e:
            yield reader.line_num, RowError(reader.line_num, None, f"malformed CSV: {e}")


def _csv_lines(f: BinaryIO, limit: int) -> Iterator[str]:
    """Decoded lines for csv.reader; an over-long or non-UTF-8 line stops the reading (csv
    cannot skip one line of a record that may span several)."""
    for line, raw in enumerate(_bounded_lines(f, limit), start=1):
        if raw is None:
            raise _StopReading(_too_long(line, limit))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            bad = raw[e.start : e.start + 1].hex()
            message = f"invalid UTF-8: byte 0x{bad} at byte offset {e.start}"
            raise _StopReading(RowError(line, None, message, "invalid_utf8")) from e
        yield text.removeprefix("\ufeff") if line == 1 else text


def _csv_records(reader: _reader) -> Iterator[Item]:
    header = next(reader, None)
    if header is None or not any(h.strip() for h in header):
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, "CSV file has no header line", "no_rows")
        return
    columns = [h.strip() for h in header]
    if len(columns) > MAX_COLUMNS:
        message = f"CSV header has {len(columns)} columns, over the limit of {MAX_COLUMNS}"
        yield 1, RowError(1, None, message, "too_many_columns")
        return
    if problem := _header_problem(columns):
        yield 1, RowError(1, None, problem)
        return
    start = reader.line_num + 1
    for cells in reader:
        if any(c.strip() for c in cells):
            yield start, _csv_row(start, columns, cells)
        start = reader.line_num + 1


def _header_problem(columns: list[str]) -> str | None:
    if "" in columns:
        return f"CSV header has an empty column name (column {columns.index('') + 1})"
    duplicates = sorted(c for c, n in Counter(columns).items() if n > 1)
    return f"CSV header repeats column(s) {', '.join(duplicates)}" if duplicates else None


def _csv_row(line: int, columns: list[str], cells: list[str]) -> dict[str, object] | RowError:
    if len(cells) != len(columns):
        message = f"has {len(cells)} cells, but the header has {len(columns)} columns"
        return RowError(line, None, message)
    return {c: _cell(c, v) for c, v in zip(columns, cells, strict=True) if v != ""}


def _cell(column: str, text: str) -> object:
    """A JSON array or object where the column may hold one, else the text as it is."""
    if column in JSON_COLUMNS and text.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(text, parse_constant=_no_nan, parse_float=finite_float)
        except (ValueError, RecursionError):  # not JSON, NaN / Infinity in it, too deep
            return text  # the kind's validator reports the wrong type, with the line
    return text


# ---- JSON --------------------------------------------------------------------------------


def _json_rows(path: Path) -> Iterator[Item]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
        document = json.loads(text, parse_constant=_no_nan, parse_float=finite_float)
    except UnicodeDecodeError as e:
        message = f"invalid UTF-8: byte at offset {e.start}"
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, message, "invalid_utf8")
        return
    except json.JSONDecodeError as e:
        yield e.lineno, RowError(e.lineno, None, _json_problem(e), "malformed_json")
        return
    except ValueError as e:  # NaN / Infinity
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, f"malformed JSON: {e}", "malformed_json")
        return
    except RecursionError:
        yield FILE_LEVEL, too_deep(FILE_LEVEL)
        return
    if isinstance(document, list):
        yield from _array_rows(document)
    elif isinstance(document, dict) and document:
        yield from _column_rows(document)
    else:
        message = (
            f"the JSON file holds {json_type(document)} {str(document)[:20]!r}; expected an "
            "array of objects or an object of equal-length arrays"
        )
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, message, "not_object")


def _no_nan(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _json_problem(e: json.JSONDecodeError) -> str:
    message = f"malformed JSON: {e.msg} (line {e.lineno}, column {e.colno})"
    if e.msg == "Extra data":
        message += "; one object a line is JSONL: name the file .jsonl"
    return message


def _array_rows(items: list[object]) -> Iterator[Item]:
    for number, item in enumerate(items, start=1):
        if isinstance(item, dict) and len(item) > MAX_COLUMNS:
            yield number, too_many_fields(number, len(item))
        elif isinstance(item, dict):
            yield number, item
        else:
            message = f"row is a JSON {json_type(item)}, expected an object"
            yield number, RowError(number, None, message, "not_object")


def _column_rows(columns: dict[str, object]) -> Iterator[Item]:
    if len(columns) > MAX_COLUMNS:
        message = f"the JSON object has {len(columns)} columns, over the limit of {MAX_COLUMNS}"
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, message, "too_many_columns")
        return
    lengths = {k: len(v) if isinstance(v, list) else None for k, v in columns.items()}
    if None in lengths.values() or len(set(lengths.values())) > 1:
        shapes = ", ".join(
            f"{k}: {'not an array' if n is None else f'{n} values'}" for k, n in lengths.items()
        )
        message = f"a JSON object of columns needs arrays of equal length ({shapes})"
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, message, "wrong_type")
        return
    arrays = [(k, v) for k, v in columns.items() if isinstance(v, list)]
    for index in range(len(arrays[0][1])):
        row = {k: v[index] for k, v in arrays if v[index] is not None}
        yield index + 1, row


# ---- Parquet -----------------------------------------------------------------------------


def _parquet_rows(path: Path) -> Iterator[Item]:
    # Deferred: pyarrow takes a moment to import; only Parquet needs it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    number = 0
    try:
        table = pq.ParquetFile(path)
        if (width := len(table.schema_arrow)) > MAX_COLUMNS:
            message = f"the table has {width} columns, over the limit of {MAX_COLUMNS}"
            yield FILE_LEVEL, RowError(FILE_LEVEL, None, message, "too_many_columns")
            return
        for batch in table.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for row in batch.to_pylist():
                number += 1
                yield number, _plain_row(number, row)
    except (pa.ArrowException, OSError) as e:
        where = number + 1 if number else FILE_LEVEL
        yield where, RowError(where, None, f"unreadable Parquet: {e}", "unreadable")


def _plain_row(number: int, row: dict[str, object]) -> dict[str, object] | RowError:
    """The row as JSON values; nulls left out, here and in structs (see the module docstring)."""
    plain: dict[str, object] = {}
    for column, value in row.items():
        if value is None:
            continue
        try:
            plain[column] = _plain(value)
        except (TypeError, UnicodeDecodeError) as e:
            return RowError(number, column, f"cannot be stored as JSON: {e}", "wrong_type")
    return plain


def _plain(value: object) -> object:
    """pyarrow's Python values as JSON values: bytes as UTF-8 text, times as ISO 8601."""
    if isinstance(value, dict):  # a struct: a null field is an absent one, as at the top
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)  # exact, where a float would round
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"{value}, which JSON cannot hold")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"a {type(value).__name__} value")
