"""Bounds on what a request may hold, checked before any handler runs, and what a full disk
answers.

`check_request` (every /api and /v1 route, installed in app.py) refuses with one 422 that
names each problem's place (`body.config.lora.rank`, `query.offset`) and the limit:

- JSON bodies nest at most `MAX_DEPTH` levels; their integers fit a signed 64-bit integer
  and their numbers are finite (JSON has no NaN, but Python's parser reads `NaN`);
- no string (body, query or path) holds NUL or an unpaired UTF-16 surrogate, which
  PostgreSQL cannot store; strings that may reach the database hold no other control
  character than tab, newline and carriage return (`check_free_text_request` relaxes this
  for routes whose text never reaches it: prompts, dataset rows);
- integer query parameters fit a signed 64-bit integer (SQL's OFFSET overflows past it);
- a path id that `store.new_id` cannot have made (`job_` + 12 hex digits, ...) is a 404
  without a database query.

Names (`thinker.names`) and full disks (`thinker.files.storage_guard`) are checked below
the server, where the services that store them run.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, get_args

from fastapi import Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from thinker.errors import ConfigError, NotFoundError
from thinker.names import NOT_STORABLE, TEXT_CONTROLS, character

MAX_DEPTH = 32  # levels of arrays and objects in a request body
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Path parameters that hold a server-made id (`store.new_id`: a prefix, `_`, 12 hex digits).
ID_PARAMS = {
    "dataset_id": ("ds", "dataset"),
    "job_id": ("job", "job"),
    "model_id": ("mdl", "model"),
    "token_id": ("tok", "API token"),
    "import_id": ("imp", "import"),
}
_ID = re.compile(r"([a-z]+)_[0-9a-f]{12}")

# Characters refused in strings: any character of each class holds the whole string back.
_STRICT = re.compile(f"[{NOT_STORABLE}{TEXT_CONTROLS}]")
_FREE_TEXT = re.compile(f"[{NOT_STORABLE}]")

Offset = Annotated[int, Query(ge=0, le=INT64_MAX, description="rows to skip")]


# ---- the dependency ----------------------------------------------------------------------


async def check_request(request: Request) -> None:
    """Refuse a request outside the bounds above (see the module docstring)."""
    await _check(request, _STRICT)


async def check_free_text_request(request: Request) -> None:
    """`check_request` for routes whose body text never reaches the database (prompts,
    dataset rows): only NUL and lone surrogates are refused in body strings."""
    await _check(request, _FREE_TEXT)


async def _check(request: Request, body_rule: re.Pattern[str]) -> None:
    _check_ids(request.path_params)
    route = request.scope.get("route")
    problems = _query_problems(request, route)
    if isinstance(route, APIRoute) and route.body_field is not None and _is_json(request):
        try:
            body = await request.json()  # parsed already by FastAPI: read from its cache
        except (ValueError, RecursionError):
            body = None  # FastAPI has answered already; nothing more to say here
        problems += json_problems(body, "body", body_rule)
    if problems:
        raise limit_error(problems)


def limit_error(problems: list[str]) -> ConfigError:
    """The 422 for `problems` (each `place: what is wrong`)."""
    shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
    return ConfigError(f"request outside the server's limits: {shown}", problems)


def _is_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def _check_ids(path_params: dict[str, Any]) -> None:
    for param, value in path_params.items():
        if not param.endswith("_id") or not isinstance(value, str):
            continue
        prefix, noun = ID_PARAMS.get(param, (None, param.removesuffix("_id")))
        found = _ID.fullmatch(value)
        if found is None or (prefix is not None and found[1] != prefix):
            raise NotFoundError(f"no {noun} with id {value[:40]!r}")


def _query_problems(request: Request, route: object) -> list[str]:
    problems: list[str] = []
    for key, value in request.query_params.multi_items():
        problems += string_problems(value, f"query.{_shown(key)}", _STRICT)
    if not isinstance(route, APIRoute):
        return problems
    for key in _int_params(route.dependant):
        for value in request.query_params.getlist(key):
            problems += _integer_problems(_as_int(value), f"query.{key}")
    return problems


def _int_params(dependant: Dependant) -> set[str]:
    """The names of a route's integer query parameters, its dependencies' included."""
    names: set[str] = set()
    for field in dependant.query_params:
        annotation = field.field_info.annotation  # int, or int | None
        if annotation is int or int in get_args(annotation):
            names.add(field.alias)
    for sub in dependant.dependencies:
        names |= _int_params(sub)
    return names


_INT = TypeAdapter(int)


def _as_int(text: str) -> int | None:
    """`text` read as pydantic will read it (`"1_000"`, `"5.0"`), or None: its own error."""
    try:
        return _INT.validate_python(text)
    except ValidationError:
        return None


# ---- JSON values -------------------------------------------------------------------------


def json_problems(value: object, where: str, strings: re.Pattern[str] = _STRICT) -> list[str]:
    """Every place in a parsed JSON `value` that is too deep, out of range or holds a refused
    character, as `place: problem` (`where` names the value itself, e.g. `body`).

    Iterative, so that no value can exhaust the stack; a branch deeper than `MAX_DEPTH` is
    reported once and not entered.
    """
    problems: list[str] = []
    stack: list[tuple[object, str, int]] = [(value, where, 0)]
    while stack and len(problems) < 20:
        item, place, depth = stack.pop()
        if isinstance(item, dict | list) and depth == MAX_DEPTH:
            problems.append(too_deep(place))
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                name = _shown(str(key))
                problems += string_problems(str(key), f"{place} (key {name})", strings)
                stack.append((child, f"{place}.{name}", depth + 1))
        elif isinstance(item, list):
            stack.extend(
                (child, f"{place}.{i}", depth + 1) for i, child in reversed([*enumerate(item)])
            )
        elif isinstance(item, str):
            problems += string_problems(item, place, strings)
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{place}: {item} is not a finite number")
        elif isinstance(item, int) and not isinstance(item, bool):
            problems += _integer_problems(item, place)
    return problems


def too_deep(place: str) -> str:
    return f"{place}: nested deeper than {MAX_DEPTH} levels (the limit)"


def _integer_problems(value: int | None, place: str) -> list[str]:
    if value is None or INT64_MIN <= value <= INT64_MAX:
        return []
    digits = str(value)
    shown = digits if len(digits) <= 24 else digits[:20] + f"... ({len(digits)} digits)"
    return [f"{place}: {shown} is outside the signed 64-bit range ({INT64_MIN} to {INT64_MAX})"]


def string_problems(text: str, place: str, rule: re.Pattern[str] = _STRICT) -> list[str]:
    """The first refused character of `text` under `rule`, as a one-item list (or none)."""
    found = rule.search(text)
    if found is None:
        return []
    allowed = "" if rule is _FREE_TEXT else " (tab, newline and carriage return are allowed)"
    return [f"{place}: holds {character(found[0])} at position {found.start()}{allowed}"]


def parse_problem(error: BaseException | None) -> str | None:
    """Why a JSON body could not be parsed at all when it is a limit: too deep for the parser
    (a RecursionError), or an integer too long to convert (Python's 4,300 digits)."""
    if isinstance(error, RecursionError):
        return too_deep("body")
    if isinstance(error, ValueError) and "digits" in str(error):
        return f"body: an integer is outside the signed 64-bit range ({INT64_MIN} to {INT64_MAX})"
    return None


def _shown(text: str) -> str:
    """`text` for an error message: at most 40 characters, controls escaped."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text[:40])
