"""Reading a JSONL dataset into conversations, splitting it, and fingerprinting it.

Each line is either a chat row, `{"messages": [{"role", "content", "trainable"?}, ...]}`,
or a prompt/completion row, `{"prompt", "completion", "system"?}`, which becomes
`[system?, user, assistant]`. The two forms may be mixed in one file. Rows are checked with
the same rules as the `validate` stage (`validation.py`), and every bad row is reported at
once.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from thinker.data.kinds import DatasetKind
from thinker.data.validation import (
    RowError,
    check_row,
    scan_rows,
    schema_for_kind,
)
from thinker.errors import ConfigError

if TYPE_CHECKING:  # the renderers package imports the tinker SDK, which takes seconds
    from thinker.renderers.base import Message

T = TypeVar("T")


def load_conversations(path: Path, max_examples: int | None = None) -> list[list[Message]]:
    """Read every row of a JSONL file as a list of messages.

    Args:
        path: The JSONL file; blank lines are skipped.
        max_examples: Read at most this many rows (None: all of them).

    Raises:
        DatasetError: The file is unreadable, empty, or has bad rows. The message lists the
            first 20 problems as `<file>:<line>: <field>: <what is wrong>`, then the total.
    """
    conversations: list[list[Message]] = []

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        errors = check_conversation_row(line, row)
        if not errors:
            conversations.append(_to_messages(row, _row_kind(row)))  # type: ignore[arg-type]
        return errors

    scan_rows(Path(path), check, max_examples).raise_for_errors()
    return conversations


def check_conversation_row(line: int, row: dict[str, object]) -> list[RowError]:
    """Every problem of one SL row, chat (`messages`) or prompt/completion."""
    kind = _row_kind(row)
    if kind is None:
        message = 'missing (a row needs "messages", or "prompt" and "completion")'
        return [RowError(line, "messages", message, "missing")]
    if kind == "chat" and ("prompt" in row or "completion" in row):
        message = 'row has both "messages" and "prompt"/"completion"; use one form'
        return [RowError(line, "messages", message, "invalid_value")]
    return check_row(line, row, schema_for_kind(kind), kind)


def split_train_eval(items: list[T], eval_fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """Shuffle a copy of `items` with `random.Random(seed)` and cut off an eval share.

    The eval share is `round(len(items) * eval_fraction)`, but at least 1 when
    `eval_fraction > 0` and there are two items or more, and never all of them.

    Returns:
        `(train, eval)`, both in shuffled order; `items` itself is left alone.
    """
    if not 0.0 <= eval_fraction < 1.0:
        raise ConfigError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    n_eval = round(len(shuffled) * eval_fraction)
    if eval_fraction > 0 and len(shuffled) >= 2:
        n_eval = min(max(n_eval, 1), len(shuffled) - 1)
    return shuffled[n_eval:], shuffled[:n_eval]


def dataset_sha256(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _row_kind(row: dict[str, object]) -> DatasetKind | None:
    if "messages" in row:
        return DatasetKind.CHAT
    if "prompt" in row or "completion" in row:
        return DatasetKind.PROMPT_COMPLETION
    return None


def row_messages(row: dict[str, object]) -> list[Message]:
    """A checked SL row (chat or prompt/completion) as the messages training renders."""
    return _to_messages(row, _row_kind(row) or DatasetKind.CHAT)


def _to_messages(row: dict[str, object], kind: DatasetKind) -> list[Message]:
    """A checked row as messages; only the keys a `Message` has are kept."""
    if kind == "prompt_completion":
        system = row.get("system")
        head: list[Message] = [{"role": "system", "content": str(system)}] if system else []
        return [
            *head,
            {"role": "user", "content": str(row["prompt"])},
            {"role": "assistant", "content": str(row["completion"])},
        ]
    return [_to_message(m) for m in cast(list[dict[str, object]], row["messages"])]


def _to_message(raw: dict[str, object]) -> Message:
    message: Message = {"role": str(raw["role"]), "content": str(raw["content"])}
    if "trainable" in raw:
        message["trainable"] = bool(raw["trainable"])
    return message
