"""Preference pairs for DPO: a prompt, a chosen completion and a rejected one.

Each JSONL line is one pair:

    {"prompt": "3+4", "chosen": "7", "rejected": "I am not sure, maybe 8."}
    {"messages": [{"role": "user", "content": "3+4"}],
     "chosen": [{"role": "assistant", "content": "7"}],
     "rejected": [{"role": "assistant", "content": "8"}]}

A string prompt is one user message; a string completion is one assistant message. The two
forms may be mixed, field by field. An empty rejected answer is a pair like any other (a model
that said nothing answered worse: the playground's A/B feedback records such pairs); an empty
prompt or chosen answer is refused. Every bad row is reported at once, with its line number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from thinker.data.validation import ROLES, RowError, json_type, scan_rows

if TYPE_CHECKING:  # the renderers package imports the tinker SDK, which takes seconds
    from thinker.renderers.base import Message


@dataclass(frozen=True)
class PreferencePair:
    """One comparison: the same prompt, followed by a better and a worse completion."""

    prompt_messages: list[Message]
    chosen_messages: list[Message]
    rejected_messages: list[Message]


def load_preference_pairs(path: Path, max_examples: int | None = None) -> list[PreferencePair]:
    """Read every row of a preference JSONL file.

    Args:
        path: The JSONL file; blank lines are skipped.
        max_examples: Read at most this many rows (None: all of them).

    Raises:
        DatasetError: The file is unreadable, empty, or has bad rows. The message lists the
            first 20 problems as `<file>:<line>: <field>: <what is wrong>`, then the total.
    """
    pairs: list[PreferencePair] = []

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        errors = check_pair(line, row)
        if not errors:
            pairs.append(row_pair(row))
        return errors

    scan_rows(Path(path), check, max_examples).raise_for_errors()
    return pairs


def check_pair(line: int, row: dict[str, object]) -> list[RowError]:
    errors: list[RowError] = []
    if ("prompt" in row) == ("messages" in row):
        message = 'a row needs exactly one of "prompt" (a string) or "messages" (a list)'
        errors.append(
            RowError(line, "prompt", message, "missing" if "prompt" not in row else "invalid_value")
        )
    for name in ("prompt", "messages"):
        if name in row:
            errors += _check_turns(line, name, row[name], needs_assistant=False)
    for name in ("chosen", "rejected"):
        if name not in row:
            errors.append(RowError(line, name, "missing", "missing"))
        else:
            empty_answer_ok = name == "rejected"
            errors += _check_turns(line, name, row[name], True, empty_answer_ok)
    if not errors and row["chosen"] == row["rejected"]:
        message = "is identical to chosen: the pair carries no preference"
        errors.append(RowError(line, "rejected", message))
    return errors


def _check_turns(
    line: int, name: str, value: object, needs_assistant: bool, empty_answer_ok: bool = False
) -> list[RowError]:
    """A non-empty string, or a non-empty list of {"role", "content"} messages; with
    `empty_answer_ok`, an assistant answer (the string, or an assistant message's content)
    may be empty."""
    if isinstance(value, str):
        return (
            [] if value.strip() or empty_answer_ok else [RowError(line, name, "is empty", "empty")]
        )
    if not isinstance(value, list):
        message = f"expected string or array of messages, got {json_type(value)}"
        return [RowError(line, name, message, "wrong_type")]
    if not value:
        return [RowError(line, name, "is empty", "empty")]
    errors = [
        e
        for i, m in enumerate(value)
        for e in _check_message(line, f"{name}[{i}]", m, empty_answer_ok)
    ]
    roles = [m.get("role") for m in value if isinstance(m, dict)]
    if needs_assistant and "assistant" not in roles:
        errors.append(RowError(line, name, "has no assistant message"))
    return errors


def _check_message(
    line: int, name: str, message: object, empty_answer_ok: bool = False
) -> list[RowError]:
    if not isinstance(message, dict):
        return [RowError(line, name, f"expected object, got {json_type(message)}", "wrong_type")]
    errors = []
    answer = message.get("role") == "assistant"
    for key in ("role", "content"):
        value = message.get(key)
        if key not in message:
            errors.append(RowError(line, f"{name}.{key}", "missing", "missing"))
        elif not isinstance(value, str):
            message_text = f"expected string, got {json_type(value)}"
            errors.append(RowError(line, f"{name}.{key}", message_text, "wrong_type"))
        elif not value.strip() and not (key == "content" and answer and empty_answer_ok):
            errors.append(RowError(line, f"{name}.{key}", "is empty", "empty"))
    role = message.get("role")
    if isinstance(role, str) and role.strip() and role not in ROLES:
        allowed = ", ".join(ROLES)
        errors.append(RowError(line, f"{name}.role", f"unknown role {role!r} (expected {allowed})"))
    return errors


def row_pair(row: dict[str, object]) -> PreferencePair:
    """A checked preference row as the pair DPO and the reward model train on."""
    prompt = row["prompt"] if "prompt" in row else row["messages"]
    return PreferencePair(
        prompt_messages=_to_messages(prompt, "user"),
        chosen_messages=_to_messages(row["chosen"], "assistant"),
        rejected_messages=_to_messages(row["rejected"], "assistant"),
    )


def _to_messages(value: object, role: str) -> list[Message]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    raws = cast(list[dict[str, object]], value)
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in raws]
