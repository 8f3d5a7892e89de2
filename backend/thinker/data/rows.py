"""Rows as a dataset of one kind holds them: the kinds, the check of one row of each kind
(what training loads it with), the kind a row's fields call for, and a row's canonical JSONL
line. The whole-file scan that applies them is `thinker.services.dataset_files`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from thinker.data.formats import out_of_range
from thinker.data.kinds import KIND_FIELDS, DatasetKind
from thinker.data.loading import check_conversation_row
from thinker.data.preferences import check_pair
from thinker.data.problems import check_problem_row
from thinker.data.validation import ROLES, RowError, too_deep
from thinker.errors import DatasetError

RowCheck = Callable[[int, dict[str, object]], list[RowError]]
_ROLES = frozenset(ROLES)


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
        detection: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(summary)
        self.errors = [error_json(e) for e in errors]
        self.error_count = error_count
        self.error_counts = error_counts or dict(Counter(e.kind for e in errors))
        self.detection = detection


def error_json(error: RowError) -> dict[str, object]:
    return {"line": error.line, "field": error.field, "message": error.message, "kind": error.kind}


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


def row_check(kind: DatasetKind) -> RowCheck:
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


def infer_kind(line: int, row: dict[str, object]) -> DatasetKind:
    """The kind that the fields of a row (the first, once mapped) call for.

    Raises:
        UploadRejected: The fields fit no kind; the message says what each kind needs.
    """
    keys = set(row)
    if {"chosen", "rejected"} <= keys:
        return DatasetKind.PREFERENCES
    if keys & {"prompt", "messages"} and keys & {"answer", "tests"}:
        return DatasetKind.PROBLEMS
    if "messages" in keys:
        return DatasetKind.CHAT
    if {"prompt", "completion"} <= keys:
        return DatasetKind.PROMPT_COMPLETION
    found = ", ".join(f'"{k}"' for k in sorted(keys)[:20]) or "none"
    needs = "; ".join(f"{k} needs {fields}" for k, fields in KIND_FIELDS.items())
    message = f"cannot tell the dataset kind from the first row's fields ({found}): {needs}"
    error = RowError(line, None, message + "; or give `kind`", "missing")
    raise UploadRejected(f"upload rejected: line {line}: {error.message}", [error], 1)
