"""The sampling side of the server: a bounded pool of loaded models, and sampling from them.

A model reference is a base model (a built-in `thinker/...` model, or the base model of a job
already on the platform) or a model id (`mdl_...`, a sampler checkpoint in the `models` table).
At most `settings.model_pool_size` models stay loaded; the least recently used one is dropped
to make room. Loading and sampling run on threads, so the event loop never waits on a model;
requests for a model that is still loading share that one load. Requests to one local model
decode together (engine/local/scheduler.py); a prompt is checked against the model's context
(characters before tokenizing, then tokens) before any decode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import torch
from sqlalchemy import select
from tinker import types

from thinker.engine import ServiceClient
from thinker.engine.local.checkpoints import STATE_FILE
from thinker.engine.local.models import BUILTIN_CONFIGS
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.engine.local.scheduler import DecodeScheduler
from thinker.engine.local.service import LocalServiceClient
from thinker.engine.local.training import ADAPTER_FILE
from thinker.errors import (
    BackendError,
    CheckpointError,
    ConfigError,
    DamagedError,
    NotFoundError,
)
from thinker.renderers import Message, Renderer, renderer_for
from thinker.secrets import read_secret
from thinker.store import Job, Model

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
    from transformers import PreTrainedTokenizerBase

    from thinker.settings import Settings

StopReason = Literal["stop", "length"]
_END = object()  # marks the end of a token stream on its queue
# A prompt longer than this many characters per token of context cannot fit it (a token is
# rarely a dozen characters), so it is refused before tokenizing; with no known context,
# UNKNOWN_CONTEXT_CHARS (32 x 128k tokens).
CHARS_PER_TOKEN = 32
UNKNOWN_CONTEXT_CHARS = CHARS_PER_TOKEN * 131_072


@dataclass(frozen=True)
class ModelRef:
    """What a model reference resolves to: enough to load it."""

    key: str  # the reference itself: a model id or a base model name
    base_model: str
    backend: str  # local | tinker
    sampler_path: str | None = None  # None: the plain base model
    job_id: str | None = None
    renderer: str | None = None  # the renderer the job trained with, if it named one


@dataclass
class Prompt:
    """Prompt tokens plus how to turn sampled tokens into text."""

    tokens: list[int]
    stop: list[str] | list[int] | None  # for the engine; None = EOS only
    stop_strings: list[str]  # cut from the text
    chat: bool  # rendered messages: the reply's leading whitespace is not content


@dataclass
class Sample:
    text: str
    tokens: list[int]
    logprobs: list[float]
    stop_reason: StopReason


@dataclass
class Samples:
    samples: list[Sample]
    prompt_tokens: int
    prompt_logprobs: list[float | None] | None = None

    @property
    def completion_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.samples)


@dataclass
class StreamEvent:
    """One sampled token and the text it adds, or (`token` None) the end of the stream."""

    text: str
    token: int | None = None
    stop_reason: StopReason | None = None
    completion_tokens: int = 0


class ContextLengthError(ConfigError):
    """A prompt (with the tokens asked for) that does not fit the model; `param` names the
    request field to shorten."""

    def __init__(self, message: str, param: str) -> None:
        self.param = param
        super().__init__(message)


@dataclass
class LoadedModel:
    """A sampling client in the pool, with its tokenizer, chat renderer and, for a local model,
    the scheduler that batches the requests decoding on it."""

    ref: ModelRef
    client: Any  # LocalSamplingClient, or tinker.SamplingClient for backend "tinker"
    batch_rows: int = 32  # settings.sample_batch_rows
    queue_size: int = 64  # settings.sample_queue_size
    tokenizer: PreTrainedTokenizerBase = field(init=False)
    scheduler: DecodeScheduler | None = field(init=False)  # None: a remote sampler
    context: int | None = field(init=False)  # tokens the model attends to; None: unknown
    _tokenizing: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.tokenizer = self.client.get_tokenizer()
        self.scheduler, self.context = None, None
        if isinstance(self.client, LocalSamplingClient):
            self.scheduler = DecodeScheduler(self.client, self.batch_rows, self.queue_size)
            self.context = _context_of(self.client.model.config, self.tokenizer)

    @cached_property
    def renderer(self) -> Renderer:
        return renderer_for(self.ref.renderer, self.ref.base_model, self.tokenizer)

    @property
    def max_prompt_chars(self) -> int:
        """The bound on a prompt's characters, checked before tokenizing: CHARS_PER_TOKEN per
        token of context (a prompt that long cannot fit), or UNKNOWN_CONTEXT_CHARS."""
        return self.context * CHARS_PER_TOKEN if self.context else UNKNOWN_CONTEXT_CHARS

    async def prompt(
        self,
        text: str | None,
        messages: list[Message] | None,
        stop: list[str] | None,
        max_tokens: int,
    ) -> Prompt:
        """Tokens of a plain prompt (as is), or of messages rendered for the model's reply,
        tokenized on a thread.

        Raises:
            ContextLengthError: the text is too long to tokenize, or prompt + max_tokens
                exceed the model's context.
        """
        field_name = "prompt" if messages is None else "messages"
        chars = len(text or "") if messages is None else sum(len(m["content"]) for m in messages)
        if chars > self.max_prompt_chars:
            raise ContextLengthError(
                f"{field_name} has {chars:,} characters; this model takes at most "
                f"{self.max_prompt_chars:,} ({self._context_words()})",
                field_name,
            )
        prompt = await asyncio.to_thread(self._tokenize, text, messages, stop)
        if self.context is not None and len(prompt.tokens) + max_tokens > self.context:
            raise ContextLengthError(
                f"this model's context is {self.context:,} tokens; the request asks "
                f"{len(prompt.tokens):,} prompt + {max_tokens:,} completion tokens: shorten "
                f"the {field_name} or lower max_tokens",
                field_name,
            )
        return prompt

    def _tokenize(
        self, text: str | None, messages: list[Message] | None, stop: list[str] | None
    ) -> Prompt:
        with self._tokenizing:  # a fast tokenizer refuses two threads at once
            if messages is None:
                tokens = self.tokenizer.encode(text or "", add_special_tokens=False)
                return Prompt(tokens, stop or None, stop or [], chat=False)
            tokens = self.renderer.build_generation_prompt(messages).to_ints()
            engine_stop = _merge_stops(
                self.renderer.get_stop_sequences(), stop or [], self.tokenizer
            )
        strings = [s for s in engine_stop if isinstance(s, str)]
        return Prompt(tokens, engine_stop, strings, chat=True)

    def _context_words(self) -> str:
        if self.context is None:
            return "its context length is not known here"
        return f"{CHARS_PER_TOKEN} per token of its {self.context:,}-token context"

    async def sample(
        self, prompt: Prompt, n: int, params: types.SamplingParams, prompt_logprobs: bool
    ) -> Samples:
        """`n` completions of `prompt`. Cancelling the caller stops a local decode at its next
        step (the scheduler drops a call whose future was cancelled)."""
        if self.scheduler is not None:
            response = await self.scheduler.submit(prompt.tokens, n, params, prompt_logprobs)
        else:  # the SDK's future, awaited: no thread waits on Tinker (a few slow samples
            # would hold every thread of the default pool, and each `to_thread` of the server
            # behind them), and cancelling the caller cancels it
            model_input = types.ModelInput.from_ints(prompt.tokens)
            response = await self.client.sample(model_input, n, params, prompt_logprobs)
        samples = [self._sample_of(seq, prompt) for seq in response.sequences]
        lp = response.prompt_logprobs if prompt_logprobs else None
        return Samples(samples, len(prompt.tokens), lp)

    async def stream(
        self, prompt: Prompt, params: types.SamplingParams
    ) -> AsyncIterator[StreamEvent]:
        """One completion, an event per token as the model produces it, then a final event."""
        text = TextAssembler(self.tokenizer, prompt.stop_strings, prompt.chat)
        items: AsyncIterator[int | _Ended]
        if self.scheduler is not None:
            items = _token_stream(self.scheduler, prompt, params)
        else:  # a remote sampler returns a whole sequence: replay it token by token
            items = _replayed(await self.sample(prompt, 1, params, False))
        async for item in items:
            if isinstance(item, int):
                yield StreamEvent(text.push(item), token=item)
            else:
                yield StreamEvent(
                    text.finish(item.stop_reason), None, item.stop_reason, item.tokens
                )

    def _sample_of(self, seq: types.SampledSequence, prompt: Prompt) -> Sample:
        assembler = TextAssembler(self.tokenizer, prompt.stop_strings, prompt.chat)
        text = assembler.whole(seq.tokens, seq.stop_reason)
        return Sample(text, list(seq.tokens), list(seq.logprobs or []), seq.stop_reason)


class TextAssembler:
    """Turns sampled tokens into text as they arrive, so that the deltas of a stream add up
    to exactly the text of the whole sequence.

    Text that may still change is held back: a partial UTF-8 character (byte-level tokens),
    and a tail that could be the start of a stop string (the stop string itself is never
    shown). A sequence cut at max_tokens drops such a tail for good ("7\n\nUs" of
    "\n\nUser:" shows as "7"). A chat reply also drops its leading whitespace (the space after
    "Assistant:"). Only the text: the tokens and logprobs stay the engine's.
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, stop_strings: list[str], chat: bool
    ) -> None:
        self._tokenizer = tokenizer
        self._stops = [s for s in stop_strings if s]
        self._chat = chat
        self._tokens: list[int] = []
        self._sent = 0  # characters of the visible text already handed out

    def push(self, token: int) -> str:
        """The text that `token` makes final."""
        self._tokens.append(token)
        return self._delta(final=None)

    def finish(self, stop_reason: StopReason) -> str:
        """The rest of the text, once the sequence has ended."""
        return self._delta(final=stop_reason)

    def whole(self, tokens: list[int], stop_reason: StopReason) -> str:
        self._tokens = list(tokens)
        return self._visible(final=stop_reason)

    def _delta(self, final: StopReason | None) -> str:
        visible = self._visible(final)
        delta = visible[self._sent :]
        self._sent = max(self._sent, len(visible))
        return delta

    def _visible(self, final: StopReason | None) -> str:
        """The text to show; `final` is how the sequence ended, None while it goes on."""
        text = self._tokenizer.decode(self._tokens, skip_special_tokens=True)
        cut = min((i for i in (text.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
        elif final is None:
            text = text[: len(text) - _held_back(text, self._stops)]
        elif final == "length":  # the stop string was on its way when max_tokens cut it
            text = text[: len(text) - _stop_prefix(text, self._stops)]
        return text.lstrip() if self._chat else text


class ModelPool:
    """Loaded sampling clients, at most `settings.model_pool_size`, least recently used out."""

    def __init__(self, settings: Settings, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.settings = settings
        self.sessions = sessions
        self.size = settings.model_pool_size
        self.loads = 0  # models loaded so far (a shared load counts once)
        self._loaded: OrderedDict[str, LoadedModel] = OrderedDict()  # oldest use first
        self._loading: dict[str, asyncio.Task[LoadedModel]] = {}

    def loaded(self) -> list[str]:
        """References of the loaded models, least recently used first."""
        return list(self._loaded)

    def peek(self, reference: str) -> LoadedModel | None:
        """The loaded model for `reference`, if it is loaded (its recency unchanged)."""
        return self._loaded.get(reference)

    async def get(self, reference: str) -> LoadedModel:
        """The loaded model for `reference`, loading it (once, however many ask) if needed.

        Raises:
            NotFoundError: no such model id, and not a base model known here.
            BackendError: the model cannot be loaded (e.g. no Tinker API key stored).
        """
        if reference in self._loaded:
            self._loaded.move_to_end(reference)
            return self._loaded[reference]
        task = self._loading.get(reference)
        if task is None:  # no await between the check and the insert: one load per model
            task = asyncio.create_task(self._load(reference))
            self._loading[reference] = task
        # Shielded: one caller going away (a closed stream) must not cancel the others' load.
        return await asyncio.shield(task)

    async def resolve(self, reference: str) -> ModelRef:
        """What `reference` names: a model id from the `models` table, or a base model."""
        if reference.startswith("mdl_"):
            return await self._model_row(reference)
        if reference in BUILTIN_CONFIGS or await self._is_jobs_base_model(reference):
            return ModelRef(reference, reference, "local")
        raise NotFoundError(
            f"unknown model {reference!r}: use a model id from /api/models, a built-in base "
            f"model ({', '.join(sorted(BUILTIN_CONFIGS))}) or the base model of a job"
        )

    def forget(self, reference: str) -> None:
        """Drop a loaded model (e.g. its row was deleted): the next request resolves it anew."""
        self._loaded.pop(reference, None)

    def forget_all(self, references: list[str]) -> None:
        """`forget` each of `references` (the models deleted with a job)."""
        for reference in references:
            self.forget(reference)

    async def close(self) -> None:
        """Wait for loads in flight (their threads cannot be stopped), stop every decode at its
        next step, then drop every model."""
        await asyncio.gather(*self._loading.values(), return_exceptions=True)
        for model in self._loaded.values():
            if model.scheduler is not None:
                model.scheduler.cancel_all()
        self._loaded.clear()

    async def _load(self, reference: str) -> LoadedModel:
        try:
            ref = await self.resolve(reference)
            settings = self.settings
            client = await asyncio.to_thread(_loaded_client, ref, settings)
            loaded = await asyncio.to_thread(  # tokenizers load too
                LoadedModel, ref, client, settings.sample_batch_rows, settings.sample_queue_size
            )
        finally:
            self._loading.pop(reference, None)
        self.loads += 1
        self._loaded[reference] = loaded
        while len(self._loaded) > self.size:
            # Requests already holding the evicted model finish with it; it is freed after.
            self._loaded.popitem(last=False)
        return loaded

    async def _model_row(self, model_id: str) -> ModelRef:
        async with self.sessions() as session:
            row = await session.get(Model, model_id)
            job = await session.get(Job, row.job_id) if row is not None else None
        if row is None:
            raise NotFoundError(f"no model {model_id!r}")
        renderer = job.config.get("renderer") if job is not None else None
        return ModelRef(
            model_id,
            row.base_model,
            row.backend,
            row.sampler_path,
            row.job_id,
            renderer if isinstance(renderer, str) else None,
        )

    async def _is_jobs_base_model(self, name: str) -> bool:
        # Only names a job was created with: a request alone never makes the server fetch a
        # hub model or read a path.
        async with self.sessions() as session:
            found = await session.scalar(select(Job.id).where(Job.base_model == name).limit(1))
        return found is not None


def _loaded_client(ref: ModelRef, settings: Settings) -> Any:
    """`_sampling_client`; a trained model whose files do not load raises DamagedError naming
    the model (503: the row stands, its checkpoint does not load, and nothing is cached)."""
    try:
        return _sampling_client(ref, settings)
    except DamagedError as error:  # the checkpoint's checksums (checkpoints.verify)
        damage = str(error)
    except (BackendError, MemoryError, torch.OutOfMemoryError):
        raise  # not the files' fault
    except Exception as error:  # files that pass their checksums and still do not load
        if ref.sampler_path is None or ref.backend != "local":
            raise
        damage = f"checkpoint {ref.sampler_path}: {_damage(error)}"
    raise DamagedError(f"model {ref.key!r} cannot be loaded: {damage}")


def _damage(error: Exception) -> str:
    """What is wrong, naming the file when the error tells which."""
    text = str(error).split("\n")[0]
    if type(error).__name__ == "SafetensorError":
        return f"{ADAPTER_FILE} does not load: {text}"
    if isinstance(error, json.JSONDecodeError):
        return f"adapter_config.json or {STATE_FILE} is not valid JSON: {text}"
    if isinstance(error, CheckpointError):
        return f"its files are missing: {text}"
    return f"{type(error).__name__}: {text}"


def _sampling_client(ref: ModelRef, settings: Settings) -> Any:
    """A new sampling client for `ref` (blocking: called on a worker thread)."""
    if ref.backend == "tinker":
        return _tinker_sampling_client(ref, settings)
    if ref.sampler_path is None:
        return LocalServiceClient().create_sampling_client(base_model=ref.base_model).result()
    # A job's local engine keeps its checkpoints in the job's run directory. The playground's
    # scheduler batches its requests on weights of its own, the adapter merged in.
    service = LocalServiceClient(
        storage_dir=settings.runs_dir / str(ref.job_id), share_samplers=False
    )
    return service.create_sampling_client(model_path=ref.sampler_path).result()


def _tinker_sampling_client(ref: ModelRef, settings: Settings) -> Any:
    key = read_secret(settings, "tinker_api_key")
    if not key and not os.environ.get("TINKER_API_KEY"):
        raise BackendError(
            f"model {ref.key!r} lives on Tinker, and this server has no Tinker API key: "
            "store one in the settings (or start the server with TINKER_API_KEY set)"
        )
    service = ServiceClient(backend="tinker", api_key=key)  # None: TINKER_API_KEY
    return service.create_sampling_client(model_path=ref.sampler_path).result()


async def _token_stream(
    scheduler: DecodeScheduler, prompt: Prompt, params: types.SamplingParams
) -> AsyncIterator[int | _Ended]:
    """The tokens of one sample as the decode produces them, then how it ended. Closing the
    iterator (the reader went away) cancels the call: its decode stops at the next step."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    future = scheduler.submit(
        prompt.tokens, 1, params, on_step=lambda tokens: _post(loop, queue, tokens[0])
    )
    future.future().add_done_callback(lambda _: _post(loop, queue, _END))
    try:
        while (item := await queue.get()) is not _END:
            yield item  # type: ignore[misc]
        seq = (await future).sequences[0]
        yield _Ended(seq.stop_reason, len(seq.tokens))
    finally:
        future.future().cancel()


def _post(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[object], item: object) -> None:
    """Hand `item` from the sampling thread to the event loop, unless the loop has closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(queue.put_nowait, item)


async def _replayed(samples: Samples) -> AsyncIterator[int | _Ended]:
    seq = samples.samples[0]
    for token in seq.tokens:
        yield token
    yield _Ended(seq.stop_reason, len(seq.tokens))


@dataclass(frozen=True)
class _Ended:
    stop_reason: StopReason
    tokens: int


def _context_of(config: Any, tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The context length from the model's config, else the tokenizer's (when it names one)."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    length = getattr(text_config, "max_position_embeddings", None)
    if isinstance(length, int) and length > 0:
        return length
    length = getattr(tokenizer, "model_max_length", None)
    return length if isinstance(length, int) and 0 < length < 10**8 else None  # 1e30 = unset


def _merge_stops(
    renderer_stops: list[str] | list[int], user_stops: list[str], tokenizer: Any
) -> list[str] | list[int]:
    """The renderer's stop sequences plus the caller's strings, in one form the engine takes.

    The engine takes either token ids or strings; with both, the ids become their text.
    """
    if not user_stops:
        return renderer_stops
    texts = [
        s if isinstance(s, str) else tokenizer.decode([s], skip_special_tokens=False)
        for s in renderer_stops
    ]
    return list(dict.fromkeys([*texts, *user_stops]))


def _held_back(text: str, stops: list[str]) -> int:
    """How many trailing characters of `text` may still change: a partial UTF-8 character
    (decoded as U+FFFD), or the longest tail that begins a stop string."""
    if text.endswith("\ufffd"):
        return len(text) - len(text.rstrip("\ufffd"))
    return _stop_prefix(text, stops)


def _stop_prefix(text: str, stops: list[str]) -> int:
    """The length of the longest tail of `text` that begins (but does not complete) a stop."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest
