"""OpenAI-compatible endpoints, so existing OpenAI clients can talk to trained models.

`/v1/models` and `/v1/chat/completions` (with `stream: true`) in OpenAI's request, response,
chunk and error formats. Errors, request validation included, come back as
`{"error": {"message", "type", "param", "code"}}`, which OpenAI client libraries parse.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import select
from starlette.exceptions import HTTPException as StarletteHTTPException
from tinker import types

from thinker.engine.local.models import BUILTIN_CONFIGS
from thinker.engine.local.sampling import DEFAULT_MAX_TOKENS
from thinker.errors import (
    AuthError,
    BackendError,
    ConfigError,
    ConflictError,
    NotFoundError,
    OverloadedError,
    StorageError,
    ThinkerError,
)
from thinker.names import Name
from thinker.renderers import Message
from thinker.server.deps import PlatformDep, SessionDep
from thinker.server.pool import ContextLengthError, Prompt, StreamEvent
from thinker.server.routes.sampling import (
    CLIENT_CLOSED,
    ERRORS,
    MAX_MESSAGES,
    MAX_SAMPLES,
    MAX_STOPS,
    MAX_TEMPERATURE,
    MAX_TEXT_CHARS,
    MAX_TOKENS_LIMIT,
    SSE_HEADERS,
    check_completion_tokens,
    check_stop_lengths,
    sse,
    unless_disconnected,
)
from thinker.store import Model

# (status, OpenAI error type, code) per error class; the first match wins.
_ERRORS: list[tuple[type[ThinkerError], int, str, str | None]] = [
    (AuthError, 401, "invalid_request_error", "invalid_api_key"),
    (NotFoundError, 404, "invalid_request_error", "model_not_found"),
    (ConflictError, 409, "invalid_request_error", None),
    (ConfigError, 400, "invalid_request_error", "invalid_value"),
    (OverloadedError, 429, "rate_limit_error", "server_busy"),
    (StorageError, 507, "server_error", "insufficient_storage"),
    (BackendError, 503, "server_error", "model_unavailable"),
]


class OpenAIRoute(APIRoute):
    """A route whose errors, request validation included, take OpenAI's error shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def openai_errors(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return _invalid_request(exc)
            except ThinkerError as exc:
                return _thinker_error(exc)
            except StarletteHTTPException as exc:  # e.g. a body that is not JSON at all
                body = _error_body(str(exc.detail), "invalid_request_error", None)
                return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

        return openai_errors


router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIRoute)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str = Field(max_length=MAX_TEXT_CHARS)


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"]
    content: (
        Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
        | Annotated[list[TextPart], Field(max_length=MAX_MESSAGES)]
    )
    name: str | None = Field(None, max_length=256)  # accepted, not used

    def to_message(self) -> Message:
        text = (
            self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)
        )
        return Message(role="system" if self.role == "developer" else self.role, content=text)


class StreamOptions(BaseModel):
    include_usage: bool = False  # one more chunk, with usage and no choices, before [DONE]


class ChatCompletionCreate(BaseModel):
    """OpenAI's chat completion request, the parameters Thinker's samplers support."""

    model_config = ConfigDict(extra="forbid")

    model: Name = Field(min_length=1, max_length=300)
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: float | None = Field(None, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    top_p: float | None = Field(None, gt=0.0, le=1.0, allow_inf_nan=False)
    n: int | None = Field(None, ge=1, le=MAX_SAMPLES)
    stop: str | Annotated[list[str], Field(max_length=MAX_STOPS)] | None = None
    seed: int | None = Field(None, ge=0, lt=2**63)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, max_length=256)  # accepted, not used

    @field_validator("stop")
    @classmethod
    def _short_stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        check_stop_lengths([stop] if isinstance(stop, str) else stop or [])
        return stop

    @model_validator(mode="after")
    def _completion_tokens(self) -> ChatCompletionCreate:
        check_completion_tokens(self.n or 1, self.completion_tokens)
        return self

    @property
    def completion_tokens(self) -> int:
        """max_tokens as asked for, under either name, else the default."""
        return self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_TOKENS

    def stop_list(self) -> list[str]:
        strings = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in strings if s]

    def params(self, prompt: Prompt) -> types.SamplingParams:
        return types.SamplingParams(
            max_tokens=self.completion_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            seed=self.seed,
            stop=prompt.stop,
        )


@router.get("/models")
async def list_openai_models(session: SessionDep) -> dict[str, Any]:
    """Models to sample, in OpenAI's list format: the built-in base models and trained models."""
    rows = await session.scalars(
        select(Model).where(Model.lifecycle != "archived").order_by(Model.created_at)
    )
    builtins = [_model_object(name, 0, None) for name in sorted(BUILTIN_CONFIGS)]
    trained = [_model_object(m.id, int(m.created_at), m.base_model) for m in rows]
    return {"object": "list", "data": builtins + trained}


@router.post(
    "/chat/completions",
    response_model=None,
    responses={200: {"content": {"text/event-stream": {}}}, **ERRORS},  # with stream: true
)
async def create_chat_completion(
    body: ChatCompletionCreate, platform: PlatformDep, request: Request
) -> dict[str, Any] | Response:
    """A chat completion in OpenAI's format; with `stream: true`, OpenAI's SSE chunks."""
    n = body.n or 1
    if body.stream and n != 1:
        raise ConfigError("streaming gives one choice: n must be 1 with stream: true")
    # A deployment's name serves its current model, and logs the traffic it opted in to.
    deployment = await platform.deployments.serving(body.model)
    model = await platform.pool.get(body.model if deployment is None else deployment.model_id)
    messages = [m.to_message() for m in body.messages]
    prompt = await model.prompt(None, messages, body.stop_list(), body.completion_tokens)
    completion_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    log = None
    if deployment is not None and deployment.log_traffic:
        log = functools.partial(
            platform.deployments.log_completion,
            deployment,
            messages=[{"role": m["role"], "content": m["content"]} for m in messages],
            model=deployment.model_id,
        )
    if body.stream:
        events = model.stream(prompt, body.params(prompt))
        chunks = _chunks(events, body, completion_id, created, len(prompt.tokens), log)
        return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
    result = await unless_disconnected(request, model.sample(prompt, n, body.params(prompt), False))
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    if log is not None:
        for i, s in enumerate(result.samples):
            await asyncio.to_thread(log, _choice_id(completion_id, i, n), answer=s.text)
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": s.text},
            "logprobs": None,
            "finish_reason": s.stop_reason,
        }
        for i, s in enumerate(result.samples)
    ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": body.model,
        "choices": choices,
        "usage": _usage(result.prompt_tokens, result.completion_tokens),
    }


def _choice_id(completion_id: str, index: int, n: int) -> str:
    """The id a logged choice takes feedback by: the completion's, or `<id>-<index>` of n > 1."""
    return completion_id if n == 1 else f"{completion_id}-{index}"


async def _chunks(  # noqa: PLR0913
    events: AsyncIterator[StreamEvent],
    body: ChatCompletionCreate,
    completion_id: str,
    created: int,
    prompt_tokens: int,
    log: Callable[..., None] | None = None,
) -> AsyncIterator[str]:
    """OpenAI's stream: the role, content deltas, the finish reason, [usage], [DONE]; the whole
    answer logged at its end when the deployment logs traffic."""

    def chunk(delta: dict[str, str], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse(_chunk_object(completion_id, created, body.model, [choice]))

    yield chunk({"role": "assistant", "content": ""})
    answer: list[str] = []
    try:
        async for event in events:
            if event.text:
                answer.append(event.text)
                yield chunk({"content": event.text})
            if event.token is None:
                if log is not None:
                    await asyncio.to_thread(log, completion_id, answer="".join(answer))
                yield chunk({}, event.stop_reason)
                if body.stream_options and body.stream_options.include_usage:
                    usage = _usage(prompt_tokens, event.completion_tokens)
                    yield sse(_chunk_object(completion_id, created, body.model, [], usage))
    except Exception as error:  # the status line is gone: report the failure in the stream
        yield sse(_error_body(str(error).split("\n")[0], "server_error", None))
    yield sse("[DONE]")


def _chunk_object(
    completion_id: str,
    created: int,
    model: str,
    choices: list[dict[str, Any]],
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def _model_object(model_id: str, created: int, parent: str | None) -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "created": created,
        "owned_by": "thinker",
        "parent": parent,  # the base model a trained model was trained from
    }


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _error_body(
    message: str, kind: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _thinker_error(exc: ThinkerError) -> JSONResponse:
    status, kind, code = next(
        ((s, t, c) for cls, s, t, c in _ERRORS if isinstance(exc, cls)),
        (400, "invalid_request_error", None),
    )
    message = str(exc).split("\n")[0]
    if isinstance(exc, ContextLengthError):  # as OpenAI reports a prompt over the context
        body = _error_body(message, kind, "context_length_exceeded", exc.param)
        return JSONResponse(body, status_code=status)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, OverloadedError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
    return JSONResponse(_error_body(message, kind, code), status_code=status, headers=headers)


def _invalid_request(exc: RequestValidationError) -> JSONResponse:
    """The first problem as OpenAI reports it (400, with the parameter), all in the message."""
    errors = exc.errors()
    param = _param(errors[0]) if errors else None
    message = "; ".join(f"{_param(e) or 'body'}: {_problem(e)}" for e in errors)
    body = _error_body(message, "invalid_request_error", "invalid_value", param)
    return JSONResponse(body, status_code=400)


def _param(error: dict[str, Any]) -> str | None:
    return ".".join(str(p) for p in error["loc"][1:]) or None  # loc[0] is "body"


def _problem(error: dict[str, Any]) -> str:
    return "unsupported parameter" if error["type"] == "extra_forbidden" else str(error["msg"])
