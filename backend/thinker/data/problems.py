"""Reading RL problems: `{"prompt": str | "messages": [...], "answer"?: str, "tests"?: [str]}`.

The prompt becomes the conversation the policy continues (a string prompt is one user
message); `answer` is what exact-match rewards compare against and `tests` what code
rewards run. The whole row is kept for user-supplied reward functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from thinker.data.validation import RowError, SchemaField, check_row, scan_rows
from thinker.errors import DatasetError
from thinker.rewards.base import Problem

_SCHEMA = [
    SchemaField("prompt", "string", required=False),
    SchemaField("messages", "array", required=False),
    SchemaField("answer", "string", required=False, allow_empty=True),
    SchemaField("tests", "array", required=False),
]


def load_problems(path: Path, max_examples: int | None = None) -> list[Problem]:
    """Every row of `path` as a Problem; all bad rows reported at once with their lines."""
    problems: list[Problem] = []

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        errors = check_problem_row(line, row)
        if not errors:
            problems.append(row_problem(row))
        return errors

    result = scan_rows(Path(path), check, max_examples)
    if not result.ok:
        raise DatasetError(result.summary())
    return problems


def check_problem_row(line: int, row: dict[str, object]) -> list[RowError]:
    """Every problem of one RL row (what load_problems refuses it for)."""
    errors = check_row(line, _normalised(row), _SCHEMA) + _check_messages(line, row)
    if ("prompt" in row) == ("messages" in row):
        kind = "missing" if "prompt" not in row else "invalid_value"
        errors.append(RowError(line, "prompt", "give exactly one of 'prompt' or 'messages'", kind))
    return errors


def _check_messages(line: int, row: dict[str, object]) -> list[RowError]:
    messages = row.get("messages")
    if not isinstance(messages, list):
        return []
    return [
        RowError(
            line,
            f"messages[{i}]",
            "expected an object with string 'role' and 'content'",
            "wrong_type",
        )
        for i, m in enumerate(messages)
        if not (
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
        )
    ]


def _normalised(row: dict[str, object]) -> dict[str, object]:
    """Numbers are fine as answers ("answer": 7): compare them as text."""
    answer = row.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        return {**row, "answer": str(answer)}
    return row


def row_problem(row: dict[str, object]) -> Problem:
    """A checked RL row as the Problem that RL samples and scores."""
    if "messages" in row:
        messages = [dict(m) for m in cast(list[dict[str, str]], row["messages"])]
    else:
        messages = [{"role": "user", "content": cast(str, row["prompt"])}]
    answer = _normalised(row).get("answer")
    tests = row.get("tests")
    return Problem(
        messages=messages,  # type: ignore[arg-type]
        answer=cast(str | None, answer),
        tests=[str(t) for t in cast(list[object], tests)] if tests is not None else None,
        row=dict(row),
    )


__all__ = ["DatasetError", "load_problems"]
