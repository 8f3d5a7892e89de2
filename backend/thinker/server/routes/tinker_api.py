"""Tinker's own HTTP API (`/api/v1/...`), so that the unmodified `tinker` SDK trains here.

A client points the SDK at the server's root: `tinker.ServiceClient(base_url="http://host:8000",
api_key="tml-...")`. The key is not checked while the server needs no tokens; when it does, the
key is `tml-` followed by a Thinker API token (`tml-thk_...`), since the SDK refuses a key
without that prefix. Each route parses the SDK's request with the SDK's own types and calls
services/tinker_wire.py. These routes are the SDK's protocol, not Thinker's REST API: they are
left out of Thinker's OpenAPI document.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from tinker import types

from thinker.engine.futures import EngineFuture
from thinker.engine.local import checkpoints
from thinker.engine.local.rest import LocalRestClient
from thinker.errors import AuthError, CheckpointError, ConfigError
from thinker.server.deps import PlatformDep, get_platform
from thinker.services import signed_links
from thinker.services.sdk_runs import batch_of
from thinker.services.tinker_wire import (
    ExpiredError,
    Result,
    TinkerWire,
    forward_backward_bytes,
    forward_backward_request,
    loss_config,
)
from thinker.services.tokens import authorize

KEY_PREFIX = "tml-"  # the SDK's; a Thinker token follows it


async def require_key(request: Request) -> None:
    """Check the key; the token's id is kept on the request (`token_id`: None when auth is off)
    for the jobs its training clients open."""
    platform = get_platform(request)
    request.state.token_id = None
    if not platform.settings.auth_required:
        return
    key = request.headers.get("x-api-key", "")
    if not key.startswith(KEY_PREFIX):
        raise AuthError(
            f"send X-API-Key: {KEY_PREFIX}<a Thinker API token> (`thinker token create`)"
        )
    token = "Bearer " + key[len(KEY_PREFIX) :]
    request.state.token_id = await authorize(platform.settings, platform.sessions, token)


router = APIRouter(prefix="/api/v1", dependencies=[Depends(require_key)], include_in_schema=False)


def _wire(platform: PlatformDep) -> TinkerWire:
    return platform.wire


Wire = Annotated[TinkerWire, Depends(_wire)]


async def _json(request: Request, model: type[Any]) -> Any:
    return model.model_validate(await request.json())


def _future(request_id: str, model_id: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"request_id": request_id, **extra}
    if model_id is not None:
        body["model_id"] = model_id
    return body


# ---- start-up and sessions -------------------------------------------------------------
@router.post("/client/config")
async def client_config() -> dict[str, Any]:
    """Plain API keys (no JWT exchange), the plain HTTP transport, losses on the client."""
    return {"pjwt_auth_enabled": False, "use_pyqwest_transport": False}


@router.post("/client/dynamic_config")
async def dynamic_config() -> dict[str, Any]:
    return {"refresh_interval_sec": 300}


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.post("/create_session")
async def create_session(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.CreateSessionRequest)
    return {"session_id": wire.create_session(body), "type": "create_session"}


@router.post("/session_heartbeat")
async def session_heartbeat(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.SessionHeartbeatRequest)
    if not wire.heartbeat(body.session_id):
        raise HTTPException(410, f"session {body.session_id} has finished")
    return {"type": "session_heartbeat"}


@router.post("/sessions/{session_id}/finish")
async def finish_session(session_id: str, request: Request, wire: Wire) -> dict[str, Any]:
    body = await request.json()
    reason = str((body.get("reason") or {}).get("type", "success"))
    wire.finish(session_id, reason, body.get("detail") or None)
    return {}


@router.get("/sessions/{session_id}")
async def read_session(session_id: str, wire: Wire) -> dict[str, Any]:
    session = wire.session(session_id)
    return {
        "training_run_ids": [wire.models[m].client.run_id for m in session.model_ids],
        "sampler_ids": list(session.sampler_ids),
        "user_metadata": session.user_metadata,
        "display_name": session.display_name,
    }


@router.get("/sessions")
async def read_sessions(wire: Wire, limit: int = 20, offset: int = 0) -> dict[str, Any]:
    return {"sessions": list(wire.sessions)[offset : offset + limit]}


@router.post("/telemetry")
async def telemetry() -> dict[str, str]:
    """Accepted and dropped: nothing leaves this server."""
    return {"status": "accepted"}


@router.get("/get_server_capabilities")
async def server_capabilities(wire: Wire) -> dict[str, Any]:
    return wire.engine.get_server_capabilities().model_dump(mode="json")


# ---- models --------------------------------------------------------------------------------
@router.post("/create_model")
async def create_model(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.CreateModelRequest)
    request_id, model_id = wire.create_model(body, request.state.token_id)
    return _future(request_id, model_id)


@router.post("/load_weights")
async def load_weights(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.LoadWeightsRequest)
    request_id, model_id = wire.load_model(body, request.state.token_id)
    return _future(request_id, model_id)


@router.post("/get_info")
async def get_info(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.GetInfoRequest)
    return wire.get_info(body.model_id).model_dump(mode="json")


@router.post("/forward_backward")
async def forward_backward(request: Request, wire: Wire) -> dict[str, Any]:
    """The SDK's only protobuf request: `forward` too (`forward_only`)."""
    message, data = forward_backward_request(await request.body())
    loss_fn, config = message.loss_fn, loss_config(message)
    batch = batch_of(data, loss_fn)
    request_id = wire.submit(
        message.model_id,
        message.seq_id or None,  # 0: unset
        "Forward" if message.forward_only else "ForwardBackward",
        lambda c: (c.forward if message.forward_only else c.forward_backward)(
            data, loss_fn, config
        ),
        forward_backward_bytes,
        None if message.forward_only else lambda run, out: run.forward_backward(batch, out),
    )
    return _future(request_id, message.model_id)


@router.post("/optim_step")
async def optim_step(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.OptimStepRequest)
    params = body.optim_params
    request_id = wire.submit(
        body.model_id,
        body.seq_id,
        "OptimStep",
        lambda c: c.optim_step(params),
        lambda out: out.model_dump(mode="json", exclude_none=True),
        lambda run, out: run.optim_step(getattr(params, "learning_rate", None), out),
    )
    return _future(request_id, body.model_id)


@router.post("/save_weights")
async def save_weights(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.SaveWeightsRequest)
    request_id = wire.submit(
        body.model_id,
        body.seq_id,
        "SaveWeights",
        lambda c: c.save_state(
            body.path or "", body.ttl_seconds, bool(body.overwrite), body.user_metadata
        ),
        lambda out: {"path": out.path, "type": "save_weights"},
        lambda run, out: run.checkpoint(out.path, sampler=False),
    )
    return _future(request_id, body.model_id)


@router.post("/save_weights_for_sampler")
async def save_weights_for_sampler(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.SaveWeightsForSamplerRequest)
    if body.path:  # a named sampler checkpoint
        request_id = wire.submit(
            body.model_id,
            body.seq_id,
            "SaveWeightsForSampler",
            lambda c: c.save_weights_for_sampler(body.path, body.ttl_seconds, body.user_metadata),
            lambda out: {"path": out.path, "type": "save_weights_for_sampler"},
            lambda run, out: run.checkpoint(out.path, sampler=True),
        )
    else:  # save_weights_and_get_sampling_client: a sampler of the weights as they are
        to_wire = wire.sampler_for_training(body.model_id, body.sampling_session_seq_id or 0)
        kind = body.kind or "snapshot"
        request_id = wire.submit(
            body.model_id,
            body.seq_id,
            "SaveWeightsForSampler",
            lambda c: c.save_weights_and_get_sampling_client(kind=kind),
            to_wire,
        )
    return _future(request_id, body.model_id)


@router.post("/save_weights_external")
async def save_weights_external(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.SaveWeightsExternalRequest)
    request_id = wire.submit(
        body.model_id,
        body.seq_id,
        "SaveWeightsExternal",
        lambda c: c.save_weights_external(body.path, body.ttl_seconds),
        lambda out: {"path": out.path},
    )
    return _future(request_id, body.model_id)


# ---- sampling ------------------------------------------------------------------------------
@router.post("/create_sampling_session")
async def create_sampling_session(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.CreateSamplingSessionRequest)
    sampler_id = await asyncio.to_thread(wire.create_sampling_session, body)
    return {"sampling_session_id": sampler_id, "type": "create_sampling_session"}


@router.get("/samplers/{sampler_id}")
async def read_sampler(sampler_id: str, wire: Wire) -> dict[str, Any]:
    sampler = wire.sampler(sampler_id)
    body = {"sampler_id": sampler.sampler_id, "base_model": sampler.base_model}
    return body if sampler.model_path is None else {**body, "model_path": sampler.model_path}


@router.post("/asample")
async def asample(request: Request, wire: Wire) -> dict[str, Any]:
    request_id, sequence_ids = wire.sample(await _json(request, types.SampleRequest))
    return _future(request_id, sample_sequence_ids=sequence_ids)


# ---- futures -------------------------------------------------------------------------------
@router.post("/retrieve_future")
async def retrieve_future(request: Request, wire: Wire) -> Response:
    """The result, once done (waiting up to POLL_WAIT_S for it), else "try again"."""
    body = await _json(request, types.FutureRetrieveRequest)
    try:
        result: Result | None = await wire.result(body.request_id)
    except ExpiredError as e:
        raise HTTPException(410, str(e)) from e
    if result is None:
        return JSONResponse(
            {"type": "try_again", "request_id": body.request_id, "queue_state": "active"}
        )
    if isinstance(result, bytes):
        return Response(result, media_type="application/x-protobuf")
    return JSONResponse(result)


# ---- runs and checkpoints (the SDK's RestClient) ----------------------------------------
def _rest(wire: TinkerWire, call: Callable[[LocalRestClient], EngineFuture[Any]]) -> Any:
    try:
        return call(wire.engine.create_rest_client()).result()
    except CheckpointError as e:
        raise HTTPException(404, str(e)) from e


def _dumped(value: Any) -> dict[str, Any]:
    return value.model_dump(mode="json", exclude_none=True)  # type: ignore[no-any-return]


@router.get("/training_runs")
async def read_training_runs(
    wire: Wire, limit: int = 20, offset: int = 0, access_scope: str = "owned"
) -> dict[str, Any]:
    return _dumped(_rest(wire, lambda r: r.list_training_runs(limit, offset, access_scope)))


@router.get("/training_runs/{run_id}")
async def read_training_run(run_id: str, wire: Wire) -> dict[str, Any]:
    return _dumped(_rest(wire, lambda r: r.get_training_run(run_id)))


@router.get("/training_runs/{run_id}/checkpoints")
async def read_run_checkpoints(run_id: str, wire: Wire) -> dict[str, Any]:
    return _dumped(_rest(wire, lambda r: r.list_checkpoints(run_id)))


@router.get("/checkpoints")
async def read_checkpoints(wire: Wire, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    return _dumped(_rest(wire, lambda r: r.list_user_checkpoints(limit, offset)))


@router.post("/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/publish")
async def publish_checkpoint(run_id: str, checkpoint_id: str, wire: Wire) -> dict[str, Any]:
    path = f"tinker://{run_id}/{checkpoint_id}"
    _rest(wire, lambda r: r.publish_checkpoint_from_tinker_path(path))
    return {}


@router.delete("/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/publish")
async def unpublish_checkpoint(run_id: str, checkpoint_id: str, wire: Wire) -> dict[str, Any]:
    path = f"tinker://{run_id}/{checkpoint_id}"
    _rest(wire, lambda r: r.unpublish_checkpoint_from_tinker_path(path))
    return {}


@router.get("/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/external_weights_urls")
async def external_weights_urls(
    run_id: str, checkpoint_id: str, request: Request, wire: Wire, platform: PlatformDep
) -> dict[str, Any]:
    """A signed link to each file of an external-weights checkpoint (`save_weights_external`),
    read without an API key until it expires (signed_links.py)."""
    kind, _, name = checkpoint_id.partition("/")
    if kind != "external_weights" or not name:
        raise ConfigError(
            f"{checkpoint_id!r}: links are given for external weights checkpoints "
            "(external_weights/<name>)"
        )
    try:
        directory = checkpoints.resolve(
            f"tinker://{run_id}/{checkpoint_id}", wire.engine.storage_dir
        )
        checkpoints.verify(directory)
    except CheckpointError as e:
        raise HTTPException(404, str(e)) from e
    files = sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    expires = int(time.time()) + signed_links.LINK_TTL_S
    key = signed_links.signing_key(platform.settings)
    root = str(request.base_url).rstrip("/")
    urls = {}
    for file in files:
        target = f"{run_id}/{checkpoint_id}/{file}"
        query = urlencode(
            {"expires": expires, "signature": signed_links.signature(key, target, expires)}
        )
        urls[file] = f"{root}/api/v1/checkpoint_files/{quote(target)}?{query}"
    return {"urls": urls, "expires": datetime.fromtimestamp(expires, UTC).isoformat()}


# Read with a signed link alone: no API key (the link is the credential).
links = APIRouter(prefix="/api/v1", include_in_schema=False)


@links.get("/checkpoint_files/{run_id}/{kind}/{name}/{file:path}")
async def checkpoint_file(
    run_id: str,
    kind: str,
    name: str,
    file: str,
    expires: int,
    signature: str,
    platform: PlatformDep,
) -> FileResponse:
    key = signed_links.signing_key(platform.settings)
    signed_links.check(key, f"{run_id}/{kind}/{name}/{file}", expires, signature, time.time())
    try:
        directory = checkpoints.resolve(
            f"tinker://{run_id}/{kind}/{name}", platform.wire.engine.storage_dir
        )
    except CheckpointError as e:
        raise HTTPException(404, str(e)) from e
    path = (directory / file).resolve()
    if not path.is_relative_to(directory.resolve()) or not path.is_file():
        raise HTTPException(404, f"{file!r} is not a file of {kind}/{name}")
    return FileResponse(path)


@router.put("/training_runs/{run_id}/checkpoints/{checkpoint_id:path}/ttl")
async def set_checkpoint_ttl(
    run_id: str, checkpoint_id: str, request: Request, wire: Wire
) -> dict[str, Any]:
    ttl = (await request.json()).get("ttl_seconds")
    path = f"tinker://{run_id}/{checkpoint_id}"
    _rest(wire, lambda r: r.set_checkpoint_ttl_from_tinker_path(path, ttl))
    return {}


# After the routes with a suffix (/publish, /ttl): a checkpoint id holds slashes.
@router.delete("/training_runs/{run_id}/checkpoints/{checkpoint_id:path}")
async def delete_checkpoint(run_id: str, checkpoint_id: str, wire: Wire) -> dict[str, Any]:
    _rest(wire, lambda r: r.delete_checkpoint(run_id, checkpoint_id))
    return {}


@router.post("/weights_info")
async def weights_info(request: Request, wire: Wire) -> dict[str, Any]:
    path = str((await request.json()).get("tinker_path", ""))
    return _dumped(_rest(wire, lambda r: r.get_weights_info_by_tinker_path(path)))


@router.post("/copy_weights")
async def copy_weights(request: Request, wire: Wire) -> dict[str, Any]:
    body = await _json(request, types.CopyWeightsRequest)
    path = wire.engine.copy_weights(body.source_path, ttl_seconds=body.ttl_seconds).result()
    return {"tinker_path": path}
