"""Telling a dataset file's format and kind from its first rows, with the field mapping it needs.

`detect_file` reads up to `sample_rows` rows and proposes a kind (`chat`,
`prompt_completion`, `preferences`, `problems`, or None when it cannot tell) and a mapping
from the kind's canonical fields to the file's fields. Layouts that are known exactly are
mapped without a word: OpenAI `messages`, ShareGPT `conversations` (`from`/`value`, roles
`human`/`gpt`), Alpaca `instruction`/`input`/`output`, Anthropic HH preference pairs whose
`chosen`/`rejected` carry the whole conversation, and the canonical fields themselves. A
guess (a field that only looks like the completion, a short `answer` that may be an RL
reference answer) is proposed too, and named in `suggestions` for the user to confirm.

## The mapping language

A mapping is `{canonical field: source expression}`; `apply_mapping` computes every
expression from the row as read, then drops the source fields it used and keeps the rest.

- `field`: the field's value, renamed.
- `a+b`: the strings `a` and `b` joined by a blank line, absent or empty parts skipped
  (Alpaca: `{"prompt": "instruction+input"}`).
- `sharegpt:field`: a list of `{"from", "value"}` turns as messages, the roles renamed by
  `ROLE_NAMES` (`human` -> user, `gpt` -> assistant).
- `transcript:field`: a `Human: ... Assistant: ...` text (HH's blank-line markers, or
  `### Human:`) as messages.
- `context:field`: messages, or a transcript: the turns before the last assistant turn.
- `reply:field`: messages, or a transcript: the content of the last assistant turn.

HH pairs map as `{"messages": "context:chosen", "chosen": "reply:chosen", "rejected":
"reply:rejected"}` (the context is taken from `chosen`; HH's two transcripts share it). A
value that does not have the shape an expression needs is passed through unchanged, so that
validation reports it with its line. Field names holding `:` or `+` cannot be mapped.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinker.data.formats import detect_format, read_rows
from thinker.data.validation import ROLES, RowError

Row = dict[str, Any]
Proposal = tuple[str | None, dict[str, str], list[str]]  # kind, mapping, suggestions

SAMPLE_KEPT = 5
DETECT_MAX_LINE_BYTES = 1 << 24  # lines longer than this are left out of the sample
OPERATIONS = ("sharegpt", "transcript", "context", "reply")
ROLE_NAMES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "chatgpt": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
}
# Source fields that commonly hold each canonical field, most telling first.
CHAT_FIELDS = ("messages", "conversations", "conversation", "dialog", "dialogue", "turns")
PROMPT_FIELDS = ("prompt", "question", "query", "instruction", "input", "problem")
COMPLETION_FIELDS = ("completion", "response", "output", "target", "reply", "answer", "solution")
REFERENCE_FIELDS = ("ground_truth", "final_answer", "reference_answer", "gold")
TESTS_FIELDS = ("tests", "test_list", "test_cases", "unit_tests")
CHOSEN_FIELDS = ("chosen", "chosen_response", "preferred", "accepted")
REJECTED_FIELDS = ("rejected", "rejected_response", "dispreferred")
TEXT_FIELDS = ("text", "content", "document")
CANONICAL_FIELDS = ("messages", "prompt", "completion", "chosen", "rejected", "answer", "tests")
SHORT_ANSWER_CHARS = 40  # answers no longer than this read as RL reference answers
_TURN = re.compile(r"(?:\A\s*|\n\n|\s*###\s*)(Human|Assistant|User|System):[ \t]?")
_TURN_ROLES = {"Human": "user", "User": "user", "Assistant": "assistant", "System": "system"}


@dataclass
class Detection:
    """What a file holds, and how its fields map onto a kind's."""

    format: str  # jsonl | json | csv | parquet
    kind: str | None  # chat | prompt_completion | preferences | problems; None = cannot tell
    mapping: dict[str, str]  # canonical field -> source expression, only where they differ
    fields: list[str]  # source fields seen in the sampled rows, in first-seen order
    suggestions: list[str]  # guesses for the user to confirm, and why a file does not fit
    sample: list[dict[str, Any]]  # the first rows as read (at most 5)


def detect_file(path: Path, filename: str | None = None, sample_rows: int = 100) -> Detection:
    """The format, kind and proposed mapping of a dataset file, from its first rows.

    Args:
        path: The file.
        filename: Its name as uploaded, whose extension names the format.
        sample_rows: How many rows (that parse to objects) to look at.
    """
    fmt = detect_format(path, filename)
    items = read_rows(path, fmt, DETECT_MAX_LINE_BYTES)
    good = (row for _, row in items if not isinstance(row, RowError))
    rows: list[Row] = list(itertools.islice(good, sample_rows))
    fields = list(dict.fromkeys(key for row in rows for key in row))
    if not rows:
        return Detection(fmt, None, {}, [], ["the file has no rows that read as objects"], [])
    kind, mapping, suggestions = propose(rows, fields)
    return Detection(fmt, kind, mapping, fields, suggestions, rows[:SAMPLE_KEPT])


def propose(rows: list[Row], fields: list[str]) -> Proposal:
    """The kind, mapping and suggestions that the sampled rows call for."""
    for rule in (_preferences, _canonical_problems, _chat, _alpaca, _pairs, _raw_text):
        if (found := rule(rows, fields)) is not None:
            return found
    return _unknown(rows, fields)


# ---- applying a mapping ------------------------------------------------------------------


def apply_mapping(row: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """The row with each canonical field computed from its source expression.

    Source fields that an expression reads are dropped; unmapped fields are kept. A source
    field absent from the row leaves its canonical field absent (validation reports it).
    """
    if not mapping:
        return row
    mapped: Row = {}
    for canonical, expression in mapping.items():
        value = _evaluate(row, expression)
        if value is not None:
            mapped[canonical] = value
    used = {name for expression in mapping.values() for name in source_fields(expression)}
    return mapped | {k: v for k, v in row.items() if k not in used and k not in mapped}


def source_fields(expression: str) -> list[str]:
    """The row fields an expression reads."""
    _, _, operand = expression.rpartition(":")
    return operand.split("+")


def mapping_problems(mapping: object) -> list[str]:
    """Why a mapping (as received, parsed JSON) is not one; empty when it is."""
    if not isinstance(mapping, dict):
        return ["mapping must be a JSON object of {canonical field: source expression}"]
    problems = []
    for canonical, expression in mapping.items():
        if not isinstance(expression, str) or not expression.strip():
            problems.append(f"mapping[{canonical!r}] must be a non-empty string")
            continue
        operation, _, operand = expression.rpartition(":")
        if operation and operation not in OPERATIONS:
            known = ", ".join(OPERATIONS)
            problems.append(f"mapping[{canonical!r}]: unknown operation {operation!r} ({known})")
        if not all(part.strip() for part in operand.split("+")):
            problems.append(f"mapping[{canonical!r}]: empty field name in {expression!r}")
    return problems


def _evaluate(row: Row, expression: str) -> object:
    operation, _, operand = expression.rpartition(":")
    if operation:
        return _OPERATIONS[operation](row.get(operand))
    if "+" in operand:
        return _joined([row.get(part) for part in operand.split("+")])
    return row.get(operand)


def _joined(parts: list[object]) -> object:
    """Strings joined by a blank line; a part that is not a string is passed on as it is."""
    present = [p for p in parts if p is not None and p != ""]
    odd = next((p for p in present if not isinstance(p, str)), None)
    if odd is not None:
        return odd
    return "\n\n".join(present) if present else None  # type: ignore[arg-type]


def _sharegpt(value: object) -> object:
    if not isinstance(value, list):
        return value
    return [_sharegpt_turn(turn) if isinstance(turn, dict) else turn for turn in value]


def _sharegpt_turn(turn: Row) -> Row:
    role = turn.get("from", turn.get("role"))
    content = turn.get("value", turn.get("content"))
    message: Row = {}
    if role is not None:
        message["role"] = ROLE_NAMES.get(role.lower(), role) if isinstance(role, str) else role
    if content is not None:
        message["content"] = content
    return message


def _transcript(value: object) -> object:
    """`Human: ... Assistant: ...` text as messages; other values unchanged."""
    if not isinstance(value, str):
        return value
    parts = _TURN.split(value)
    if parts[0].strip() or len(parts) < 3:
        return value  # text before the first marker, or no marker: not a transcript
    turns = zip(parts[1::2], parts[2::2], strict=True)
    return [{"role": _TURN_ROLES[role], "content": text.strip()} for role, text in turns]


def _last_assistant(value: object) -> tuple[list[Row], int] | None:
    messages = _transcript(value)
    if not isinstance(messages, list):
        return None
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if "assistant" not in roles:
        return None
    return messages, len(roles) - 1 - roles[::-1].index("assistant")


def _context(value: object) -> object:
    found = _last_assistant(value)
    return value if found is None else found[0][: found[1]]


def _reply(value: object) -> object:
    found = _last_assistant(value)
    return value if found is None else found[0][found[1]].get("content")


_OPERATIONS: dict[str, Callable[[object], object]] = {
    "sharegpt": _sharegpt,
    "transcript": _transcript,
    "context": _context,
    "reply": _reply,
}


# ---- the rules, one a kind ---------------------------------------------------------------


def _preferences(rows: list[Row], fields: list[str]) -> Proposal | None:
    chosen, rejected = _pick(fields, CHOSEN_FIELDS), _pick(fields, REJECTED_FIELDS)
    if chosen is None or rejected is None:
        return None
    mapping, suggestions = _renames({"chosen": chosen, "rejected": rejected})
    value = _first_value(rows, chosen)
    if _carries_conversation(value):
        mapping |= {"chosen": f"reply:{chosen}", "rejected": f"reply:{rejected}"}
        if "prompt" not in fields and "messages" not in fields:
            mapping["messages"] = f"context:{chosen}"
        return "preferences", mapping, suggestions
    if "prompt" in fields or "messages" in fields:
        return "preferences", mapping, suggestions
    prompt = _pick(fields, PROMPT_FIELDS)
    if prompt is not None:
        mapping["prompt"] = prompt
        suggestions.append(_looks_like(prompt, "prompt"))
    else:
        suggestions.append(
            "the pairs have no prompt: map the field that holds it to `prompt` (a string) "
            "or `messages` (a list of messages)"
        )
    return "preferences", mapping, suggestions


def _carries_conversation(value: object) -> bool:
    """A chosen answer that holds the whole conversation: an HH transcript, or messages
    with a turn before the answer."""
    if isinstance(value, str):
        return isinstance(_transcript(value), list)
    if not isinstance(value, list):
        return False
    return any(isinstance(m, dict) and m.get("role", "assistant") != "assistant" for m in value)


def _canonical_problems(rows: list[Row], fields: list[str]) -> Proposal | None:
    has_prompt = "prompt" in fields or "messages" in fields
    if has_prompt and ("answer" in fields or "tests" in fields) and "completion" not in fields:
        return "problems", {}, []
    return None


def _chat(rows: list[Row], fields: list[str]) -> Proposal | None:
    source = next((f for f in CHAT_FIELDS if isinstance(_first_value(rows, f), list)), None)
    if source is None:
        return None
    turns = [t for t in _first_value(rows, source) if isinstance(t, dict)]
    roles = {r for t in turns if isinstance(r := t.get("from", t.get("role")), str)}
    if any("from" in t or "value" in t for t in turns) or roles - set(ROLES):
        return "chat", {"messages": f"sharegpt:{source}"}, []
    if source in ("messages", "conversations"):
        return "chat", ({} if source == "messages" else {"messages": source}), []
    return "chat", {"messages": source}, [_looks_like(source, "messages")]


def _alpaca(rows: list[Row], fields: list[str]) -> Proposal | None:
    if "instruction" not in fields or "output" not in fields:
        return None
    prompt = "instruction+input" if "input" in fields else "instruction"
    return "prompt_completion", {"prompt": prompt, "completion": "output"}, []


def _pairs(rows: list[Row], fields: list[str]) -> Proposal | None:
    """A prompt and what answers it: SL completions, or RL reference answers and tests."""
    prompt = _pick(fields, PROMPT_FIELDS)
    if prompt is None:
        return None
    rest = [f for f in fields if f != prompt]
    tests, reference = _pick(rest, TESTS_FIELDS), _pick(rest, REFERENCE_FIELDS)
    if tests is not None or reference is not None:
        renames = {"prompt": prompt, "tests": tests, "answer": reference}
        mapping, suggestions = _renames(renames)
        return "problems", mapping, suggestions
    completion = _pick(rest, COMPLETION_FIELDS)
    if completion is None:
        return None
    if completion in ("answer", "solution") and _short(rows, completion):
        mapping, suggestions = _renames({"prompt": prompt, "answer": completion})
        suggestions.append(
            f"`{completion}` holds short answers: read as RL reference answers (kind problems); "
            f"for supervised learning map it to `completion` (kind prompt_completion)"
        )
        return "problems", mapping, suggestions
    mapping, suggestions = _renames({"prompt": prompt, "completion": completion})
    return "prompt_completion", mapping, suggestions


def _raw_text(rows: list[Row], fields: list[str]) -> Proposal | None:
    text = _pick(fields, TEXT_FIELDS)
    if text is None:
        return None
    if isinstance(_transcript(_first_value(rows, text)), list):
        message = f"`{text}` reads as a Human/Assistant transcript: map it to `messages`?"
        return "chat", {"messages": f"transcript:{text}"}, [message]
    message = (
        f"the rows hold raw text (`{text}`), not conversations: supervised learning with a "
        "chat renderer trains on the assistant's turns, and raw text has none. Split each "
        f'row into a prompt and a completion (e.g. mapping {{"prompt": "<field>", '
        f'"completion": "{text}"}}, where another field holds the prompt), or into `messages`'
    )
    return None, {}, [message]


def _unknown(rows: list[Row], fields: list[str]) -> Proposal:
    """No rule fits: try the canonical names that fields are close to (typos, case), else say
    what each kind needs."""
    close = {}
    for name in fields:
        match = difflib.get_close_matches(name.lower(), CANONICAL_FIELDS, n=1, cutoff=0.75)
        if match and match[0] != name and match[0] not in fields:
            close.setdefault(match[0], name)
    suggestions = [_looks_like(source, canonical) for canonical, source in close.items()]
    if close:
        renamed = [apply_mapping(row, close) for row in rows]
        kind, mapping, more = propose(renamed, list(dict.fromkeys(k for r in renamed for k in r)))
        if kind is not None:
            return kind, close | mapping, suggestions + more
    found = ", ".join(f'"{f}"' for f in fields[:20]) or "none"
    needs = (
        'chat needs "messages"; prompt_completion "prompt" and "completion"; preferences '
        '"chosen" and "rejected" with "prompt" or "messages"; problems "prompt" or "messages" '
        'with "answer" or "tests"'
    )
    return None, {}, [f"cannot tell the kind from the fields ({found}): {needs}", *suggestions]


# ---- helpers -----------------------------------------------------------------------------


def _pick(fields: Iterable[str], candidates: tuple[str, ...]) -> str | None:
    """The source field that holds one of `candidates`: by name, then ignoring case."""
    present = list(fields)
    for name in candidates:
        if name in present:
            return name
    lowered = {f.lower(): f for f in present}
    return next((lowered[c] for c in candidates if c in lowered), None)


def _renames(renames: dict[str, str | None]) -> tuple[dict[str, str], list[str]]:
    """The mapping entries where a source field differs from its canonical name, each with
    its suggestion."""
    mapping = {k: v for k, v in renames.items() if v is not None and v != k}
    return mapping, [_looks_like(v, k) for k, v in mapping.items()]


def _looks_like(source: str, canonical: str) -> str:
    return f"field `{source}` looks like the {canonical}: map it?"


def _first_value(rows: list[Row], name: str) -> Any:
    return next((row[name] for row in rows if row.get(name) is not None), None)


def _short(rows: list[Row], name: str) -> bool:
    values = [row[name] for row in rows if row.get(name) is not None]
    return all(
        len(v if isinstance(v, str) else json.dumps(v)) <= SHORT_ANSWER_CHARS for v in values
    )
