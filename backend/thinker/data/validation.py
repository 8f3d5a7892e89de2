"""The dataset validator of the pipeline's `validate` stage.

It streams a JSONL file one line at a time (memory stays constant whatever the file's
size) and checks every row against a list of `SchemaField`s: present when required, of the
right JSON type, not empty unless allowed. A dataset *kind* adds structural checks that a
flat schema cannot express (the `messages` list of a chat row). Every problem is collected
with its line number, so one run reports all of them; nothing stops at the first.

Line numbers are 1-based physical lines of the file, blank lines included, so they match
what an editor shows. Indices inside `messages` are 0-based, as in Python and JSONPath.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from thinker.errors import ConfigError, DatasetError

FieldType = Literal["string", "number", "integer", "boolean", "object", "array"]
DatasetKind = Literal["chat", "prompt_completion"]
ErrorKind = Literal[
    "unreadable",  # the file is missing or not a regular file
    "no_rows",  # the file holds no non-blank line
    "invalid_utf8",
    "malformed_json",
    "not_object",  # the line is valid JSON but not an object
    "missing",  # a required field is absent
    "wrong_type",
    "empty",  # "", [] or {} where allow_empty is False
    "invalid_value",  # right type, wrong value (an unknown role, no assistant message)
]

ROLES = ("system", "user", "assistant", "tool")
FILE_LEVEL = 0  # the `line` of an error about the whole file


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
    raise ConfigError(f"unknown dataset kind {kind!r}; expected one of {get_args(DatasetKind)}")


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
        if isinstance(row, RowError) and row.kind == "unreadable":
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

    An unreadable file yields a single file-level error and nothing else.
    """
    if max_examples is not None and max_examples < 1:
        raise ConfigError(f"max_examples must be at least 1 (or None for all), got {max_examples}")
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        yield FILE_LEVEL, RowError(FILE_LEVEL, None, f"file {what}", "unreadable")
        return
    seen = 0
    with open(path, "rb") as f:
        for line, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            yield line, _parse_line(line, raw)
            seen += 1
            if seen == max_examples:
                return


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
        text = raw.decode("utf-8").rstrip("\r\n")  # so JSON errors point into this line
    except UnicodeDecodeError as e:
        bad = raw[e.start : e.start + 1].hex()
        return RowError(
            line, None, f"invalid UTF-8: byte 0x{bad} at byte offset {e.start}", "invalid_utf8"
        )
    if line == 1:  # a byte-order mark is legal at the start of a UTF-8 file, nowhere else
        text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        return RowError(line, None, f"malformed JSON: {e.msg} (column {e.colno})", "malformed_json")
    except ValueError as e:  # NaN / Infinity, which JSON does not allow
        return RowError(line, None, f"malformed JSON: {e}", "malformed_json")
    if not isinstance(value, dict):
        return RowError(
            line, None, f"row is a JSON {json_type(value)}, expected an object", "not_object"
        )
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
