"""Sampling: completions of a prompt or a conversation from a base model or a trained model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Literal, Self

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tinker import types

from thinker.renderers import Message
from thinker.server.deps import PlatformDep
from thinker.server.pool import LoadedModel, Prompt, Samples, StreamEvent

router = APIRouter(prefix="/sample", tags=["sampling"])

MAX_TOKENS_LIMIT = 8192
MAX_SAMPLES = 16
MAX_STOPS = 16
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class SampleCreate(BaseModel):
    """A sampling request: exactly one of `prompt` (tokenized as is) or `messages` (rendered
    in the model's chat format, ending with the header of the assistant's reply)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=300)  # a model id (mdl_...) or a base model
    prompt: str | None = Field(None, min_length=1)
    messages: list[ChatMessage] | None = Field(None, min_length=1)
    max_tokens: int = Field(256, ge=1, le=MAX_TOKENS_LIMIT)
    temperature: float = Field(1.0, ge=0.0)  # 0 = greedy
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, ge=-1)  # -1 or 0 = no top-k cut
    seed: int | None = Field(None, ge=0, lt=2**63)  # same seed, same samples
    stop: str | list[str] | None = None  # strings that end a sample, besides EOS
    n: int = Field(1, ge=1, le=MAX_SAMPLES)
    logprobs: bool = False  # each sampled token's logprob
    prompt_logprobs: bool = False  # each prompt token's logprob (None for the first)

    @model_validator(mode="after")
    def _one_prompt(self) -> Self:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of `prompt` and `messages`")
        return self

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, stop: str | list[str] | None) -> str | list[str] | None:
        strings = [stop] if isinstance(stop, str) else stop or []
        if "" in strings or len(strings) > MAX_STOPS:
            raise ValueError(f"give at most {MAX_STOPS} stop strings, none of them empty")
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


@router.post("", response_model=SamplesPublic)
async def create_sample(body: SampleCreate, platform: PlatformDep) -> SamplesPublic:
    """Sample `n` completions of a prompt or a conversation."""
    model, prompt = await prepare(platform, body)
    samples = await model.sample(prompt, body.n, params_of(body, prompt), body.prompt_logprobs)
    return _public(body, samples)


@router.post(
    "/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
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
    return model, model.prompt(body.prompt, body.message_list(), body.stop_list())


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
    return SamplesPublic(
        model=body.model,
        samples=samples,
        prompt_tokens=result.prompt_tokens,
        prompt_logprobs=result.prompt_logprobs,
        usage=Usage(**_usage(result.prompt_tokens, result.completion_tokens)),
    )
