"""Sampling: completions of a prompt or a conversation from a base model or a trained model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Literal, Self, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tinker import types

from thinker.algorithms import uncertainty
from thinker.names import Name
from thinker.renderers import Message
from thinker.server.deps import PlatformDep
from thinker.server.pool import LoadedModel, Prompt, Samples, StreamEvent

router = APIRouter(prefix="/sample", tags=["sampling"])
T = TypeVar("T")

MAX_TOKENS_LIMIT = 8192
MAX_SAMPLES = 16
MAX_COMPLETION_TOKENS = 16_384  # n x max_tokens: 16 samples of 1,024 tokens, or 2 of 8,192
MAX_STOPS = 16
MAX_STOP_CHARS = 256  # each stop string is looked for in the text's tail at every step
MAX_MESSAGES = 1024
MAX_TEXT_CHARS = 1_048_576  # per prompt or message; the model's context bounds it further
MAX_TEMPERATURE = 2.0  # OpenAI's range; 0 = greedy
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CLIENT_CLOSED = 499  # the status logged for a request whose client left (nginx's convention)
# The statuses the sampling routes send besides those every route documents (openapi_doc.py).
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "`model` names no model id, built-in model or job's base model"},
    429: {"description": "This model's sampling queue is full (`sample_queue_size`)"},
    503: {"description": "The model cannot be loaded (a damaged checkpoint, no Tinker key)"},
}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=MAX_TEXT_CHARS)


class UncertaintyOptions(BaseModel):
    """Ask for how sure the model is: the agreement of the `n` samples and their mean token
    entropy (algorithms/uncertainty.py), with a "not sure" flag past these thresholds."""

    model_config = ConfigDict(extra="forbid")

    not_sure_below: float = Field(
        0.5, ge=0.0, le=1.0, allow_inf_nan=False, description="Agreement under this: not sure."
    )
    entropy_above: float | None = Field(
        None, ge=0.0, allow_inf_nan=False, description="Mean entropy (nats) over this: not sure."
    )


class UncertaintyPublic(BaseModel):
    samples: int
    answer: int  # the index of the sample that gives the most common answer
    agreement: float  # the share of the samples giving it (case and spaces folded)
    distinct_answers: int
    mean_entropy: float | None  # mean surprisal of the sampled tokens: estimates the entropy
    mean_logprob: float  # the chosen sample's mean token logprob
    not_sure: bool


class SampleCreate(BaseModel):
    """A sampling request: exactly one of `prompt` (tokenized as is) or `messages` (rendered
    in the model's chat format, ending with the header of the assistant's reply)."""

    model_config = ConfigDict(extra="forbid")

    model: Name = Field(min_length=1, max_length=300)  # a model id (mdl_...) or a base model
    prompt: str | None = Field(None, min_length=1, max_length=MAX_TEXT_CHARS)
    messages: list[ChatMessage] | None = Field(None, min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int = Field(256, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: float = Field(1.0, ge=0.0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(-1, ge=-1)  # -1 or 0 = no top-k cut
    seed: int | None = Field(None, ge=0, lt=2**63)  # same seed, same samples
    stop: str | list[str] | None = None  # strings that end a sample, besides EOS
    n: int = Field(1, ge=1, le=MAX_SAMPLES)
    logprobs: bool = False  # each sampled token's logprob
    prompt_logprobs: bool = False  # each prompt token's logprob (None for the first)
    uncertainty: UncertaintyOptions | None = None  # the samples' agreement; needs n >= 2

    @model_validator(mode="after")
    def _one_prompt(self) -> Self:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of `prompt` and `messages`")
        return self

    @model_validator(mode="after")
    def _several_to_compare(self) -> Self:
        if self.uncertainty is not None and self.n < 2:
            raise ValueError("uncertainty compares samples: ask for n >= 2 (5 or more is better)")
        return self

    @model_validator(mode="after")
    def _completion_tokens(self) -> Self:
        check_completion_tokens(self.n, self.max_tokens)
        return self

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, stop: str | list[str] | None) -> str | list[str] | None:
        strings = [stop] if isinstance(stop, str) else stop or []
        if "" in strings or len(strings) > MAX_STOPS:
            raise ValueError(f"give at most {MAX_STOPS} stop strings, none of them empty")
        check_stop_lengths(strings)
        return stop

    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def message_list(self) -> list[Message] | None:
        if self.messages is None:
            return None
        return [Message(role=m.role, content=m.content) for m in self.messages]


class SampleStreamCreate(SampleCreate):
    @field_validator("n")
    @classmethod
    def _one_sample(cls, n: int) -> int:
        if n != 1:
            raise ValueError("a stream carries one sample: n must be 1")
        return n


class SamplePublic(BaseModel):
    text: str  # the completion; for messages, the reply without its stop sequence
    tokens: list[int]  # every sampled token, a stop sequence's included
    logprobs: list[float] | None = None
    stop_reason: Literal["stop", "length"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class SamplesPublic(BaseModel):
    model: str
    samples: list[SamplePublic]
    prompt_tokens: int
    prompt_logprobs: list[float | None] | None = None
    usage: Usage
    uncertainty: UncertaintyPublic | None = None  # when asked for


@router.post("", response_model=SamplesPublic, responses=ERRORS)
async def create_sample(
    body: SampleCreate, platform: PlatformDep, request: Request
) -> SamplesPublic | Response:
    """Sample `n` completions of a prompt or a conversation."""
    model, prompt = await prepare(platform, body)
    sampling = model.sample(prompt, body.n, params_of(body, prompt), body.prompt_logprobs)
    samples = await unless_disconnected(request, sampling)
    if samples is None:
        return Response(status_code=CLIENT_CLOSED)
    return _public(body, samples)


@router.post(
    "/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERRORS},
)
async def create_sample_stream(
    body: SampleStreamCreate, platform: PlatformDep
) -> StreamingResponse:
    """Sample one completion as Server-Sent Events: one event per token, then the outcome."""
    model, prompt = await prepare(platform, body)  # errors here still get a status code
    events = model.stream(prompt, params_of(body, prompt))
    return StreamingResponse(
        _sse_events(events, len(prompt.tokens)), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def prepare(platform: PlatformDep, body: SampleCreate) -> tuple[LoadedModel, Prompt]:
    model = await platform.pool.get(body.model)
    prompt = await model.prompt(body.prompt, body.message_list(), body.stop_list(), body.max_tokens)
    return model, prompt


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None when the client goes away first: then `work` is cancelled,
    and a decode stops at its next step. (A stream needs no watcher: Starlette stops it.)"""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
    return task.result() if task.done() and not task.cancelled() else None


async def _disconnect(request: Request) -> None:
    """Returns when the client has closed the connection. The body has been read, so the
    server's next ASGI message is the disconnect (or comes once the response is sent)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def check_completion_tokens(n: int, max_tokens: int) -> None:
    if n * max_tokens > MAX_COMPLETION_TOKENS:
        raise ValueError(
            f"n x max_tokens is {n} x {max_tokens:,} = {n * max_tokens:,} tokens, over the "
            f"limit of {MAX_COMPLETION_TOKENS:,} per request: ask for fewer samples or tokens"
        )


def check_stop_lengths(strings: list[str]) -> None:
    if any(len(s) > MAX_STOP_CHARS for s in strings):
        raise ValueError(f"each stop string has at most {MAX_STOP_CHARS} characters")


def params_of(body: SampleCreate, prompt: Prompt) -> types.SamplingParams:
    return types.SamplingParams(
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        seed=body.seed,
        stop=prompt.stop,
    )


def sse(data: object) -> str:
    """One Server-Sent Event carrying `data` as JSON (or a bare marker such as [DONE])."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


async def _sse_events(events: AsyncIterator[StreamEvent], prompt_tokens: int) -> AsyncIterator[str]:
    try:
        async for event in events:
            if event.token is not None:
                yield sse({"text": event.text, "token": event.token})
            else:
                usage = _usage(prompt_tokens, event.completion_tokens)
                yield sse({"text": event.text, "stop_reason": event.stop_reason, "usage": usage})
    except Exception as error:  # the status line is gone: report the failure in the stream
        yield sse({"error": {"message": str(error).split("\n")[0], "type": type(error).__name__}})
    yield sse("[DONE]")


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _public(body: SampleCreate, result: Samples) -> SamplesPublic:
    samples = [
        SamplePublic(
            text=s.text,
            tokens=s.tokens,
            logprobs=s.logprobs if body.logprobs else None,
            stop_reason=s.stop_reason,
        )
        for s in result.samples
    ]
    sure = None
    if body.uncertainty is not None:
        measured = uncertainty.measure(
            [s.text for s in result.samples],
            [s.logprobs for s in result.samples],
            agreement_below=body.uncertainty.not_sure_below,
            entropy_above=body.uncertainty.entropy_above,
        )
        sure = UncertaintyPublic(**measured.to_json())
    return SamplesPublic(
        model=body.model,
        samples=samples,
        prompt_tokens=result.prompt_tokens,
        prompt_logprobs=result.prompt_logprobs,
        usage=Usage(**_usage(result.prompt_tokens, result.completion_tokens)),
        uncertainty=sure,
    )
