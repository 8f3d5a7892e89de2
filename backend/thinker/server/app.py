"""The ASGI application: FastAPI routes under /api and /v1, Socket.IO on the same port,
the built dashboard at /.

`create_app(settings)` is what `thinker serve` runs under uvicorn and what tests mount.
"""

from __future__ import annotations

import gc
import posixpath
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import socketio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from thinker import __version__
from thinker.errors import (
    AuthError,
    BackendError,
    ConfigError,
    ConflictError,
    DatasetError,
    NotFoundError,
    OverloadedError,
    StorageError,
    ThinkerError,
)
from thinker.files import DISK_FULL, is_disk_full
from thinker.server import limits
from thinker.server.deps import require_token
from thinker.server.events import register_import_handlers, register_socket_handlers
from thinker.server.openapi_doc import document_errors
from thinker.server.platform import Platform
from thinker.server.routes import (
    base_models,
    dataset_import,
    dataset_insights,
    datasets,
    deployments,
    evaluations,
    health,
    jobs,
    models,
    openai,
    reviews,
    sampling,
    tinker_api,
    tokens,
)
from thinker.server.routes import settings as settings_routes
from thinker.settings import Settings

_STATUS: list[tuple[type[ThinkerError], int]] = [
    (AuthError, 401),
    (NotFoundError, 404),
    (ConflictError, 409),
    (ConfigError, 422),
    (DatasetError, 422),
    (OverloadedError, 429),  # a full queue: retry after `Retry-After` seconds
    (StorageError, 507),  # disk full or not writable
    (BackendError, 503),  # a backend that cannot serve now: no Tinker key, unreachable
]
API_PREFIXES = ("api", "v1", "socket.io")  # paths the dashboard never answers
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# The collector's thresholds for a serving process: a young collection after this many
# container allocations (CPython's default is 700), a middle one after 20 of those, a full
# one after 10 middle ones (and only when the long-lived heap grew by a quarter).
GC_THRESHOLDS = (50_000, 20, 10)


def settle_gc() -> None:
    """Keep the garbage collector's pauses off the serving path (`thinker serve` calls this
    once the app is built).

    A full collection stops the event loop while it walks every tracked object: with torch
    and transformers imported that is half a million objects before a single request, and a
    thousand Socket.IO clients add as many. With CPython's default thresholds the server ran a
    full collection every few seconds under their events, each 0.3 to 0.9 s, and REST p99 was
    what those pauses made it (docs/benchmarks.md). So the objects that exist now (modules,
    the app) are frozen out of every later collection, and young collections run 70 times
    less often. Cyclic garbage is still collected; it waits a little longer.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def create_app(settings: Settings | None = None) -> Any:
    """The FastAPI app wrapped in Socket.IO's ASGI app (the object to serve)."""
    settings = settings or Settings()
    sio = socketio.AsyncServer(
        async_mode="asgi", cors_allowed_origins=_origin_check(settings), logger=False
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.platform = await Platform.start(settings, sio)
        try:
            yield
        finally:
            await app.state.platform.stop()

    app = FastAPI(
        title="Thinker",
        version=__version__,
        description="Post-train language models with LoRA: SL, RL, RLHF and DPO.",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.cors_origins),
        allow_methods=["*"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
    )
    _add_error_handlers(app)
    _add_routes(app)
    document_errors(app)  # error statuses and bodies in the OpenAPI document
    if settings.static_dir is not None and settings.static_dir.is_dir():
        app.mount("/", DashboardFiles(directory=settings.static_dir, html=True), name="dashboard")
    register_socket_handlers(sio, app)
    register_import_handlers(sio)
    return socketio.ASGIApp(sio, other_asgi_app=app, socketio_path="socket.io")


class DashboardFiles(StaticFiles):
    """The built dashboard; any other path that is not a file gets index.html, so that the
    app's own routes (/training/job_..., /models) load on a reload or a shared link."""

    async def get_response(self, path: str, scope: Any) -> Any:
        if _is_api_path(scope["path"]):
            raise StarletteHTTPException(404)  # app.py's handler: a JSON 404, or 405
        try:
            return await super().get_response(path, scope)
        except StarletteHTTPException as e:
            if e.status_code != 404 or "." in path.rsplit("/", 1)[-1]:
                raise  # a missing asset stays a 404
            return await super().get_response("index.html", scope)


def _is_api_path(path: str) -> bool:
    """Whether `path` is under /api, /v1 or /socket.io, as sent (`/api/..%2f..` included) or
    once normalised (`/x/../api`)."""
    sent = path.lstrip("/").split("/", 1)[0]
    normalised = posixpath.normpath("/" + path).lstrip("/").split("/", 1)[0]
    return sent in API_PREFIXES or normalised in API_PREFIXES


def _origin_check(settings: Settings) -> Any:
    """Socket.IO accepts the page's own origin (the dashboard the server serves) and the
    configured ones; a list alone would refuse the server's own pages."""
    allowed = set(settings.cors_origins)

    def check(origin: str | None, environ: dict[str, Any]) -> bool:
        scheme, host = environ.get("wsgi.url_scheme", "http"), environ.get("HTTP_HOST")
        return origin in allowed or (host is not None and origin == f"{scheme}://{host}")

    return check


def _operation_id(route: APIRoute) -> str:
    """The handler's name (`read_jobs`, `create_job`): what a generated client calls."""
    return route.name


def _add_routes(app: FastAPI) -> None:
    # Every route checks the token, then the request's bounds (limits.py); the text of
    # prompts and dataset rows never reaches the database, so it may hold any control but NUL.
    checked = [Depends(limits.check_request)]
    free_text = [Depends(limits.check_free_text_request)]
    api = APIRouter(prefix="/api", dependencies=[Depends(require_token)])
    routers = (
        (health, checked),
        (base_models, checked),
        (datasets, free_text),
        (dataset_import, checked),
        (dataset_insights, checked),
        (deployments, checked),
        (evaluations, checked),
        (jobs, checked),
        (models, checked),
        (reviews, checked),
        (sampling, free_text),
        (settings_routes, checked),
        (tokens, checked),
    )
    for module, bounds in routers:
        api.include_router(module.router, dependencies=bounds)
    app.include_router(api)
    app.include_router(tinker_api.router)  # the SDK's types bound its requests
    app.include_router(tinker_api.links)  # signed download links: no API key
    app.include_router(openai.router, dependencies=[Depends(require_token), *free_text])


def _add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ThinkerError, _thinker_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(OSError, _os_error)  # type: ignore[arg-type]
    app.add_exception_handler(DBAPIError, _os_error)  # type: ignore[arg-type]


async def _thinker_error(request: Request, exc: ThinkerError) -> JSONResponse:
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 400)
    body: dict[str, Any] = {"detail": str(exc).split("\n")[0]}
    if isinstance(exc, ConfigError):
        body["problems"] = exc.problems
    if isinstance(exc, DatasetError) and getattr(exc, "errors", None):
        body["errors"] = exc.errors  # type: ignore[attr-defined]
        body["error_count"] = getattr(exc, "error_count", len(body["errors"]))
        body["error_counts"] = getattr(exc, "error_counts", {})
    if getattr(exc, "detection", None) is not None:
        body["detection"] = exc.detection  # type: ignore[attr-defined]
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, OverloadedError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
    return JSONResponse(body, status_code=status, headers=headers)


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return JSONResponse(
        {"detail": "invalid request: " + "; ".join(problems), "problems": problems},
        status_code=422,
    )


async def _http_error(request: Request, exc: StarletteHTTPException) -> Any:
    """A body too deep to parse is a 422 naming the limit; a path that other methods serve
    is a 405 whose `Allow` lists them all (Starlette names the first route's only)."""
    if (problem := limits.parse_problem(exc.__cause__)) is not None:
        return await _thinker_error(request, limits.limit_error([problem]))
    if exc.status_code in (404, 405):
        allowed = _allowed_methods(request)
        if allowed and request.method not in allowed:
            headers = {"Allow": ", ".join(allowed)}
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers=headers)
    if exc.status_code == 404 and exc.detail == "Not Found":  # no route: say which was asked
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        path = raw.decode("latin-1")[:300]  # as sent (%2f stays %2f)
        return JSONResponse(
            {"detail": f"Not Found: no operation {request.method} {path} (see /docs)"},
            status_code=404,
        )
    return await http_exception_handler(request, exc)


def _allowed_methods(request: Request) -> list[str]:
    """The documented methods of the path template this request's path fits, the most literal
    first (`/api/datasets/detect` before `/api/datasets/{dataset_id}`); none for a path the
    OpenAPI document does not hold (the dashboard's, /docs)."""
    path = request.scope["path"]
    fits = [
        (template.count("{"), operations)
        for template, operations in request.app.openapi()["paths"].items()
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path)
    ]
    if not fits:
        return []
    operations = min(fits, key=lambda fit: fit[0])[1]
    return [m for m in METHODS if m.lower() in operations]


async def _os_error(request: Request, exc: Exception) -> JSONResponse:
    """A full disk anywhere is a 507 that says so; any other error stays a 500."""
    if not is_disk_full(exc):
        raise exc
    detail = f"{DISK_FULL}: nothing was stored; free disk space on the server"
    return JSONResponse({"detail": detail}, status_code=507)
