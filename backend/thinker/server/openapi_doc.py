"""The OpenAPI document's error responses: every operation lists the error statuses it can send,
each with the body the server really sends (app.py's handlers; OpenAI's shape under /v1).

Statuses are derived from the routes: 401 from the token dependency, 422 (400 on /v1) from
parameters or a body, 400 from a body (one that cannot be parsed), 404 from a path parameter,
413 from the upload limit; the rest
(409, 429, 503, 507, ...) from `responses=` declared on a route, e.g.
`@router.post("/{job_id}/cancel", responses={409: {"description": "the job has ended"}})`.
"""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from typing import Any, NotRequired

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from typing_extensions import TypedDict

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before included routers were kept whole: routes are flat

    def iter_route_contexts(routes: list[Any]) -> list[Any]:  # type: ignore[misc]
        return routes


from thinker.server.deps import require_token
from thinker.server.routes.datasets import DetectionBase, ErrorPublic, UploadLimitRoute
from thinker.server.routes.openai import OpenAIRoute

REF = "#/components/schemas/{model}"


class ErrorBody(TypedDict):
    """Every error answer under /api. `detail` is always there; the other fields come with the
    errors they describe."""

    detail: str  # one line: what is wrong, naming the field and the limit where one applies
    problems: NotRequired[list[str]]  # a 422's every problem, `field: message`
    errors: NotRequired[list[ErrorPublic]]  # a rejected dataset: its first rows in error
    error_count: NotRequired[int]  # a rejected dataset: how many rows are in error
    error_counts: NotRequired[dict[str, int]]  # ... by error kind
    detection: NotRequired[DetectionBase]  # a kind or mapping to confirm before storing


class OpenAIError(TypedDict):
    message: str
    type: str  # invalid_request_error | rate_limit_error | server_error
    param: str | None  # the request parameter at fault, when one is
    code: str | None  # invalid_api_key | model_not_found | invalid_value | server_busy | ...


class OpenAIErrorBody(TypedDict):
    """Every error answer under /v1, in OpenAI's format (which OpenAI's clients parse)."""

    error: OpenAIError


ERROR_BODIES = [("ErrorBody", ErrorBody), ("OpenAIErrorBody", OpenAIErrorBody)]
DESCRIPTIONS = {
    400: "A body that cannot be parsed; under /v1, any invalid request (OpenAI's status)",
    401: "Missing, malformed, unknown or revoked API token (when auth is on)",
    404: "The id in the path (or a model named in the body) names nothing",
    409: "The resource's state forbids this now",
    413: "The upload is larger than `max_upload_mb`",
    422: "Invalid request: `problems` names each field at fault and its limit",
    429: "At capacity: retry after `Retry-After` seconds",
    503: "The backend or the stored files cannot serve this now",
    507: "The disk is full or not writable; nothing half-written was kept",
}
HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}, "required": True}},
    429: {"Retry-After": {"schema": {"type": "integer", "minimum": 1}, "required": True}},
}


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` list every operation's error statuses with their bodies."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _with_errors(generate(), app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_errors(spec: dict[str, Any], app: FastAPI) -> dict[str, Any]:
    components = spec.setdefault("components", {})
    _, defs = TypeAdapter.json_schemas(
        [(name, "serialization", TypeAdapter(t)) for name, t in ERROR_BODIES], ref_template=REF
    )
    for name, schema in defs["$defs"].items():
        components.setdefault("schemas", {}).setdefault(name, schema)
    for route in _api_routes(app):
        for method in route.methods:
            _document(spec["paths"][route.path_format][method.lower()], route, method)
    _drop_unused(components["schemas"], spec["paths"])
    if any("security" in op for ops in spec["paths"].values() for op in ops.values()):
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return spec


def _api_routes(app: FastAPI) -> list[Any]:
    """Each documented route as mounted (its prefix, dependencies and responses merged with
    those of the routers it is included in)."""
    return [
        route
        for route in iter_route_contexts(app.routes)
        if isinstance(_original(route), APIRoute) and route.include_in_schema
    ]


def _original(route: Any) -> Any:
    return getattr(route, "original_route", route)  # the route as declared (its class)


def _document(operation: dict[str, Any], route: Any, method: str) -> None:
    openai = isinstance(_original(route), OpenAIRoute)
    responses: dict[str, Any] = operation["responses"]
    if openai:
        responses.pop("422", None)  # FastAPI's default; /v1 answers 400 (OpenAI's status)
    for status in _statuses(operation, route, method, openai):
        answer = responses.setdefault(str(status), {})
        declared = route.responses.get(status) or route.responses.get(str(status)) or {}
        answer["description"] = declared.get("description") or DESCRIPTIONS.get(
            status, HTTPStatus(status).phrase
        )
        answer["content"] = {"application/json": {"schema": _body(answer, openai)}}
        if status in HEADERS:
            answer["headers"] = HEADERS[status]
    if _needs_token(route):
        operation["security"] = [{"bearer": []}]


def _statuses(operation: dict[str, Any], route: Any, method: str, openai: bool) -> list[int]:
    """The error statuses `route` can answer with."""
    parameters = operation.get("parameters", [])
    found = {int(s) for s in route.responses if str(s).isdigit() and int(s) >= 400}
    if _needs_token(route):
        found.add(401)
    if parameters or "requestBody" in operation:
        found.add(400 if openai else 422)
    if "requestBody" in operation:
        found.add(400)  # a body that cannot be parsed (FastAPI's own answer)
    if any(p["in"] == "path" for p in parameters):
        found.add(404)
    if isinstance(_original(route), UploadLimitRoute) and method == "POST":
        found.add(413)
    return sorted(found)


def _needs_token(route: Any) -> bool:
    return any(d.dependency is require_token for d in route.dependencies)


def _body(answer: dict[str, Any], openai: bool) -> dict[str, Any]:
    """The generic error body, or, where a route declares its own model, either of the two."""
    generic = {"$ref": REF.format(model="OpenAIErrorBody" if openai else "ErrorBody")}
    declared = answer.get("content", {}).get("application/json", {}).get("schema")
    if not declared or declared == generic or declared.get("$ref", "").endswith("ValidationError"):
        return generic
    return {"anyOf": [declared, generic]}


def _drop_unused(schemas: dict[str, Any], paths: dict[str, Any]) -> None:
    """The schemas nothing in `paths` refers to, even through other schemas: FastAPI's default
    422 ones, and the models a body is read as where the document shows another
    (`PlainValidator(..., json_schema_input_type=...)`)."""
    used: set[str] = set()
    todo = _refs(paths)
    while todo:
        name = todo.pop()
        if name not in used and name in schemas:
            used.add(name)
            todo |= _refs(schemas[name])
    for name in set(schemas) - used:
        del schemas[name]


def _refs(node: Any) -> set[str]:
    """The names of the schemas `node` refers to."""
    return set(_REF.findall(json.dumps(node)))


_REF = re.compile('"' + re.escape(REF.format(model="")) + '([^"]+)"')
