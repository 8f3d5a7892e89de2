"""The local sampling client: batched autoregressive sampling with a KV cache.

All `num_samples` sequences of one call decode together, and so do the calls made before the
first of them runs (an RL step's groups): each prompt is prefilled once and its KV cache shared
by its samples, then one forward per new token for every row (on CUDA a replayed CUDA graph:
prefix.py). A model whose attention cannot take that cache (sliding-window layers) decodes
call by call, its prompt repeated per sample (decode.py). `sample_stream` is a call of one
sample that hands each token to a callback as soon as it is chosen. The server's loaded
models batch continuously instead, calls joining and leaving a running decode (scheduler.py,
with the same per-call `DecodeRows`).

The logprob returned for each sampled token is the model's own (temperature 1, before
top-k/top-p), i.e. what a training client computes for the same token, so on-policy
importance ratios start at 1; so are the SDK's top-k logprobs of each step (computed on the
device only when asked) and of the prompt (prompt_scores.py).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from peft import PeftModel, get_peft_model_state_dict, set_peft_model_state_dict
from tinker import types
from tinker.types.topk_logprobs import TopkLogprobs
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from thinker.engine.futures import EngineFuture, OrderedExecutor, Serial
from thinker.engine.local import data_parallel, draw_kernel, fast, prefix
from thinker.engine.local.decode import EagerDecoder, GraphDecoder
from thinker.engine.local.forward import target_logprobs, to_host, token_ranges
from thinker.engine.local.models import on_thread_start
from thinker.engine.local.prompt_scores import (
    PromptOptions,
    check_prompt_options,
    score_prompt,
    topk_problem,
)
from thinker.errors import BackendError, ConfigError

log = logging.getLogger(__name__)
DEFAULT_MAX_TOKENS = 512
GREEDY_BELOW = 1e-5  # a temperature under this samples the argmax (dividing by it overflows)
GATHER_IDLE_S, GATHER_MAX_S = 0.002, 0.05  # how long sample calls wait for others to join
LOGPROB_BATCH_TOKENS = 16_384  # no gradient, so activations are not kept: a modest batch
T = TypeVar("T")
# Called after each decode step with the token just chosen for each sequence of the batch.
StepCallback = Callable[[list[int]], None]


@dataclass
class Stops:
    token_ids: set[int]
    strings: list[str]


@dataclass
class SharedWeights:
    """Sampling on a training client's own model, so no second copy of the weights is held.

    `adapter` is a frozen copy of LoRA weights swapped in for each call (and the live ones
    restored after), or None to sample the base model with the adapter switched off. The
    calls run on the training client's executor, so they never interleave with training.
    """

    model: PeftModel
    executor: Serial  # the training client's: it activates that client's adapter first
    adapter: dict[str, Tensor] | None
    # The training client's weight version when the snapshot was taken, and how to read the
    # current one: while they are equal the live weights ARE the snapshot and no swap is
    # needed (an RL step samples its whole batch before the next optimizer step).
    version: int | None = None
    current_version: Callable[[], int] | None = None
    live: bool = False  # the live weights, whatever they become (an "inflight" sampler)
    adapter_name: str = "default"  # the training client's adapter on the shared model
    # The training client itself, held so that it lives while this sampler does: when it goes,
    # its adapter is deleted and its executor (a lane of the shared base) closes.
    owner: object | None = None


class LocalSamplingClient:
    def __init__(
        self,
        model: PreTrainedModel | PeftModel,
        tokenizer: PreTrainedTokenizerBase,
        base_model: str,
        model_path: str | None,
        device: torch.device,
        shared: SharedWeights | None = None,
        sharing: data_parallel.SampleSharing | None = None,
    ) -> None:
        """`sharing`: a data-parallel run's, whose ranks share out `sample` calls."""
        self._model = model
        self._sharing = sharing
        self._tokenizer = tokenizer
        self._base_model = base_model
        self.model_path = model_path
        self._device = device
        self._shared = shared
        self._executor: Serial = (
            shared.executor if shared else OrderedExecutor("sample", on_thread_start(device))
        )
        # compute_logprobs requests not yet started: (prompt, prompt_logprobs_last_n, future)
        self._pending: list[tuple[list[int], int | None, Future[list[float | None]]]] = []
        self._waiting: list[_SampleCall] = []  # sample calls not yet started
        self._pending_lock = threading.Lock()
        self._bursts = 0  # open `burst` blocks: requests wait in `_held` until the last closes
        self._held: tuple[list[_SampleCall], list[Any]] = ([], [])
        # transformers 5.2x renamed `past_key_values` to `cache`; accept either version.
        plain = model.get_base_model() if isinstance(model, PeftModel) else model
        forward_args = inspect.signature(plain.forward).parameters
        self._cache_arg = "cache" if "cache" in forward_args else "past_key_values"

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> EngineFuture[types.SampleResponse]:
        """`num_samples` completions of `prompt`, each with its sampled tokens' logprobs.

        Calls made before the first of them runs decode together, each prompt prefilled once
        and its KV cache shared by its samples (prefix.py), where the model allows; each call
        keeps its own parameters and seeded generator. The other options are the SDK's, with
        its response fields (prompt_scores.py for the prompt's); a bad value is a ConfigError
        naming it, raised here.
        """
        if num_samples < 1:
            raise ConfigError(f"num_samples must be at least 1, got {num_samples}")
        tokens = prompt.to_ints()
        vocab = int(self._model.config.vocab_size)
        problem = topk_problem("topk_sample_logprobs", topk_sample_logprobs, vocab)
        if problem is not None:
            raise ConfigError(problem)
        options = check_prompt_options(
            len(tokens),
            vocab,
            include_prompt_logprobs,
            topk_prompt_logprobs,
            target_prompt_logprobs,
            prompt_alt_tokens_k,
            prompt_logprobs_last_n,
        )
        call = _SampleCall(
            tokens, num_samples, sampling_params, options, Future(), topk=topk_sample_logprobs
        )
        if self._sharing is not None:  # one rank of several samples it, all get it
            return self._sharing.submit(lambda: self._enqueue(call))
        return self._enqueue(call)

    @property
    def _lockstep(self) -> bool:
        """Whether calls run in lockstep with the other ranks (a sharded model): each rank's
        calls start together when the ranks exchange them, never held by a burst."""
        return self._sharing is not None and self._sharing.deferred

    def _enqueue(self, call: _SampleCall) -> EngineFuture[types.SampleResponse]:
        with self._pending_lock:
            if self._bursts and not self._lockstep:
                self._held[0].append(call)
                return EngineFuture(call.future)
            self._waiting.append(call)
            first = len(self._waiting) == 1
        if first:
            self._submit(self._answer_waiting)
        return EngineFuture(call.future)

    @contextlib.contextmanager
    def burst(self) -> Iterator[None]:
        """The `sample` and `compute_logprobs` requests made inside are handed to the worker
        together when the block ends, so they decode (or are scored) in one batch whatever
        the timing. Requests otherwise join a batch while it gathers (GATHER_IDLE_S apart),
        and which ones do changes their logprobs in the last bits: the RL loop makes each
        turn's requests in a burst, so that a run and its resumption sample alike."""
        with self._pending_lock:
            self._bursts += 1
        try:
            yield
        finally:
            with self._pending_lock:
                self._bursts -= 1
                calls, scores = self._held if self._bursts == 0 else ([], [])
                if self._bursts == 0:
                    self._held = ([], [])
                sample = bool(calls) and not self._waiting
                score = bool(scores) and not self._pending
                self._waiting += calls
                self._pending += scores
            if sample:
                self._submit(self._answer_waiting)
            if score:
                self._submit(self._with_weights, self._answer_pending)

    def sample_stream(
        self,
        prompt: types.ModelInput,
        sampling_params: types.SamplingParams,
        on_token: Callable[[int], None],
    ) -> EngineFuture[types.SampleResponse]:
        """One completion of `prompt`, calling `on_token(id)` for each token as it is chosen.

        The tokens, logprobs and stop reason are those `sample(prompt, 1, sampling_params)`
        gives for the same seed; the callback sees every token of the returned sequence, in
        order, on the sampling thread. An exception raised by `on_token` stops the decode and
        becomes the future's exception (how a caller whose reader went away cancels).
        """
        if self._lockstep:
            raise ConfigError(
                "a sharded model samples in lockstep with the other ranks: sample, not "
                "sample_stream"
            )
        return self._enqueue(
            _SampleCall(
                prompt.to_ints(),
                1,
                sampling_params,
                PromptOptions(),
                Future(),
                lambda tokens: on_token(tokens[0]),
            )
        )

    async def sample_async(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> types.SampleResponse:
        """`sample`, awaited: the response itself (as the SDK's `sample_async`)."""
        return await self.sample(
            prompt,
            num_samples,
            sampling_params,
            include_prompt_logprobs,
            topk_prompt_logprobs,
            topk_sample_logprobs,
            target_prompt_logprobs,
            prompt_alt_tokens_k,
            prompt_logprobs_last_n,
        )

    async def compute_logprobs_async(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> list[float | None]:
        return await self.compute_logprobs(prompt, prompt_logprobs_last_n)

    async def get_base_model_async(self) -> str:
        return self._base_model

    def get_telemetry(self) -> None:
        """The SDK's telemetry handle; the local engine sends none."""
        return None

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> EngineFuture[list[float | None]]:
        """log p(token i | tokens before i) for every token of `prompt`; None at position 0,
        and before the last `prompt_logprobs_last_n` tokens when that is set.

        Requests made before the first of them runs are computed together, in batches of up
        to LOGPROB_BATCH_TOKENS (DPO asks for every pair's reference at once). Which requests
        share a batch moves an answer in its last bits only; callers that must get the same
        bits on every run (DPO's references, the judges) make theirs in a `burst`. The batch scores
        whole prompts: `prompt_logprobs_last_n` only blanks the rest (no prefix cache here).
        """
        tokens = prompt.to_ints()
        last_n = prompt_logprobs_last_n
        if last_n is not None and not 1 <= last_n <= len(tokens) - 1:
            raise ConfigError(
                "prompt_logprobs_last_n must be from 1 to len(prompt) - 1 = "
                f"{len(tokens) - 1}, got {last_n}"
            )
        if self._sharing is not None and self._lockstep:  # one rank scores it, all get it
            return self._sharing.submit(lambda: self._score(tokens, last_n))
        return self._score(tokens, last_n)

    def _score(self, tokens: list[int], last_n: int | None) -> EngineFuture[list[float | None]]:
        future: Future[list[float | None]] = Future()
        with self._pending_lock:
            if self._bursts and not self._lockstep:
                self._held[1].append((tokens, last_n, future))
                return EngineFuture(future)
            self._pending.append((tokens, last_n, future))
            first = len(self._pending) == 1
        if first:
            self._submit(self._with_weights, self._answer_pending)
        return EngineFuture(future)

    def get_tokenizer(self) -> PreTrainedTokenizerBase:
        return self._tokenizer

    def get_base_model(self) -> str:
        return self._base_model

    # ---- what a DecodeScheduler drives (scheduler.py) ------------------------------------
    @property
    def model(self) -> PreTrainedModel | PeftModel:
        return self._model

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def cache_arg(self) -> str:
        """The forward's keyword for the KV cache in this transformers version."""
        return self._cache_arg

    @property
    def executor(self) -> Serial:
        return self._executor

    @property
    def shares_weights(self) -> bool:
        """Whether this client samples a training client's model (on the trainer's thread)."""
        return self._shared is not None

    # ---- work, on the worker thread ----------------------------------------------------
    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Hand the worker `fn`, which answers the waiting requests. Should it fail before it
        takes them (the worker thread could not start), they get its error, not a wait."""
        self._executor.submit(fn, *args).future().add_done_callback(self._worker_failed)

    def _worker_failed(self, done: Future[Any]) -> None:
        error = None if done.cancelled() else done.exception()
        if error is None:
            return
        with self._pending_lock:
            calls, self._waiting = self._waiting, []
            pending, self._pending = self._pending, []
        for future in [c.future for c in calls] + [f for _, _, f in pending]:
            with contextlib.suppress(InvalidStateError):
                future.set_exception(error)

    def _with_weights(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` with this client's weights in place on a shared model, then put them back."""
        if self._shared is None:
            return fn(*args)
        model, shared = self._shared.model, self._shared
        if shared.live:
            return fn(*args)
        if shared.adapter is None:
            with model.disable_adapter():
                return fn(*args)
        if shared.current_version is not None and shared.version == shared.current_version():
            return fn(*args)
        name = shared.adapter_name
        live = {
            k: v.detach().clone()
            for k, v in get_peft_model_state_dict(
                model, adapter_name=name, save_embedding_layers=False
            ).items()
        }
        set_peft_model_state_dict(model, shared.adapter, adapter_name=name)
        try:
            return fn(*args)
        finally:
            set_peft_model_state_dict(model, live, adapter_name=name)

    def _answer_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        for start, end in token_ranges([len(t) for t, _, _ in pending], LOGPROB_BATCH_TOKENS):
            batch = pending[start:end]
            try:
                answers = self._batch_logprobs([tokens for tokens, _, _ in batch])
            except Exception as e:  # every request of the batch gets the error
                for _, _, future in batch:
                    future.set_exception(e)
                continue
            for (_, last_n, future), answer in zip(batch, answers, strict=True):
                if last_n is not None:  # as the SDK: None before the last n
                    answer[: len(answer) - last_n] = [None] * (len(answer) - last_n)
                future.set_result(answer)

    def _no_grad(self) -> contextlib.AbstractContextManager[Any]:
        """`torch.inference_mode()`, or `no_grad` on a sharded model: FSDP keeps the buffers
        it gathers layers into from pass to pass, and training cannot write to one first made
        in inference mode."""
        return torch.no_grad() if self._lockstep else torch.inference_mode()

    def _batch_logprobs(self, prompts: list[list[int]]) -> list[list[float | None]]:
        scored = [i for i, tokens in enumerate(prompts) if len(tokens) >= 2]
        answers: list[list[float | None]] = [[None] * len(tokens) for tokens in prompts]
        if not scored:
            return answers
        pack = fast.enabled("PACKING", self._device)
        with self._no_grad():
            logprobs = target_logprobs(
                self._model,
                [prompts[i][:-1] for i in scored],
                [torch.tensor(prompts[i][1:]) for i in scored],
                self._device,
                pack=pack,
            )
        for i, lp in zip(scored, to_host(logprobs), strict=True):
            answers[i] = [None, *lp.tolist()]
        return answers

    def _answer_waiting(self) -> None:
        self._gather()
        with self._pending_lock:
            calls, self._waiting = self._waiting, []
        calls = [c for c in calls if c.future.set_running_or_notify_cancel()]
        try:
            self._with_weights(self._sample_calls, calls)
        except Exception as e:  # e.g. the adapter swap failed: every call still unanswered
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(e)

    def _gather(self) -> None:
        """Give calls made in a burst (an RL step asks for its groups one after another) time
        to join: wait while new calls keep arriving, GATHER_IDLE_S apart, up to GATHER_MAX_S.
        A decode of many rows costs about what one of few rows costs, and lasts far longer."""
        deadline = time.monotonic() + GATHER_MAX_S
        with self._pending_lock:
            seen = len(self._waiting)
        while time.monotonic() < deadline:
            time.sleep(GATHER_IDLE_S)
            with self._pending_lock:
                if len(self._waiting) == seen:
                    return
                seen = len(self._waiting)

    def _sample_calls(self, calls: list[_SampleCall]) -> None:
        with self._no_grad(), fast.adapter_autocast(self._model), fast.eager():
            if prefix.can_decode(self._model):
                self._decode_groups(calls)
                return
            for call in calls:  # one call at a time, its prompt repeated for each sample
                try:
                    call.future.set_result(self._decode(call))
                except Exception as e:
                    call.future.set_exception(e)

    def _decode_groups(self, calls: list[_SampleCall]) -> None:
        """Decode `calls` together; out of memory, in two halves, then each alone."""
        calls = [c for c in calls if not c.future.done()]
        if not calls:
            return
        try:
            self._decode_together(calls)
        except torch.OutOfMemoryError as e:
            prefix.release(self._model)
            torch.cuda.empty_cache()
            if len(calls) == 1:
                call = calls[0]
                call.future.set_exception(
                    BackendError(
                        f"out of GPU memory sampling {call.n} sequences after a "
                        f"{len(call.prompt)}-token prompt: lower num_samples or max_tokens ({e})"
                    )
                )
                return
            log.warning("out of memory decoding %d calls together; splitting them", len(calls))
            half = len(calls) // 2
            self._decode_groups(calls[:half])
            self._decode_groups(calls[half:])
        except Exception as e:
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(e)

    def _decode_together(self, calls: list[_SampleCall]) -> None:
        """One decode for every call's rows; a call is answered as soon as its rows stop."""
        live: list[tuple[_SampleCall, DecodeRows]] = []
        for call in calls:
            try:
                stops = self.stops(call.params.stop)
                rows = DecodeRows(
                    call.prompt, call.n, call.params, stops, self._tokenizer, call.topk
                )
                live.append((call, rows))
            except Exception as e:  # this call's parameters are bad; the others decode
                call.future.set_exception(e)
        if not live:
            return
        self._model.eval()
        # A sharded model's layers gather their weights in each pass: no CUDA graph captures
        # that, and the fused and merged decodes would read the shards as weights.
        whole = not self._lockstep
        decoder = prefix.PrefixDecoder(
            self._model,
            self._model.config,
            graphs=whole and fast.enabled("CUDA_GRAPHS", self._device),
            fused=None if whole else False,
            merge=whole,
        )
        longest = max(r.max_tokens for _, r in live)
        logits_BV = decoder.prefill([c.prompt for c, _ in live], [c.n for c, _ in live], longest)
        spans = np.cumsum([0] + [c.n for c, _ in live])
        token_B = torch.zeros(int(spans[-1]), dtype=torch.long, device=logits_BV.device)
        fused = [r.draws_fused(logits_BV) for _, r in live]
        reader = _TokenReader(self._device, int(spans[-1]))
        for step in range(longest):
            chose = [i for i, (_, r) in enumerate(live) if not r.done]
            # A finished call's rows keep their last token, unread. The plain draw takes one
            # log-softmax over every row's logits, not one a call (each call then only draws).
            logprobs_BV = None
            if not all(fused[i] for i in chose):
                logprobs_BV = torch.log_softmax(logits_BV, dim=-1, dtype=torch.float32)
            for i in chose:
                span, r = slice(spans[i], spans[i + 1]), live[i][1]
                if fused[i]:
                    r.draw(logits_BV[span], token_B[span])
                else:
                    assert logprobs_BV is not None
                    token_B[span] = r.choose(logprobs_BV[span])
            reader.start(token_B)
            if step + 1 < longest:  # queued before the host reads this step's tokens
                next_logits_BV = decoder.step(token_B)
            host = reader.finish()
            for i in chose:
                call, r = live[i]
                tokens = host[spans[i] : spans[i + 1]]
                r.observe(tokens)
                try:
                    if call.on_step is not None:
                        call.on_step(tokens)
                except Exception as e:  # the caller stops its call (a reader went away)
                    r.done = True
                    call.future.set_exception(e)
                    continue
                if r.done:
                    self._settle(call, r)
            if all(r.done for _, r in live):
                return
            logits_BV = next_logits_BV

    def _decode(self, call: _SampleCall) -> types.SampleResponse:
        params = call.params
        rows = DecodeRows(
            call.prompt, call.n, params, self.stops(params.stop), self._tokenizer, call.topk
        )
        ids_1P = torch.tensor([call.prompt], dtype=torch.long, device=self._device)
        decoder = self._decoder()
        logits_NV = decoder.prefill(ids_1P, call.n, rows.max_tokens)
        while True:
            token_N = rows.advance(logits_NV)
            if call.on_step is not None:  # only streaming pays for this per-step device sync
                call.on_step(token_N.tolist())
            if rows.done:
                break
            logits_NV = decoder.step(token_N)
        return self._respond(call, rows)

    def _settle(self, call: _SampleCall, rows: DecodeRows) -> None:
        """Answer a call whose rows are done; its failure is its own (unless out of memory:
        the caller splits the calls and decodes them again)."""
        try:
            call.future.set_result(self._respond(call, rows))
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            call.future.set_exception(e)

    def _respond(self, call: _SampleCall, rows: DecodeRows) -> types.SampleResponse:
        """The call's samples, with what it asked about its prompt (on the worker)."""
        options = call.prompt_options
        if not options.needs_vocab:  # the plain path: logprobs of the prompt's own tokens
            return rows.response(self.prompt_logprobs(call.prompt) if options.logprobs else None)
        greedy = call.params.temperature < GREEDY_BELOW
        scores = score_prompt(
            self._model,
            call.prompt,
            options,
            None if greedy else call.params.temperature,
            call.params.seed if call.params.seed is not None else _random_seed(),
            self._device,
        )
        return scores.into(rows.response())

    def prompt_logprobs(self, prompt: list[int]) -> np.ndarray:
        """log p(token i | tokens before i) of `prompt`, NaN at position 0 (on the worker)."""
        values = self._batch_logprobs([prompt])[0]
        return np.array([np.nan if v is None else v for v in values], dtype=np.float32)

    def _decoder(self) -> EagerDecoder | GraphDecoder:
        self._model.eval()
        if fast.enabled("CUDA_GRAPHS", self._device) and not self._lockstep:
            return GraphDecoder(self._model, self._cache_arg, self._model.config)
        return EagerDecoder(self._model, self._cache_arg)

    def stops(self, stop: str | Sequence[str] | Sequence[int] | None) -> Stops:
        """The token ids and strings that end a sequence, from SamplingParams.stop."""
        eos = self._tokenizer.eos_token_id
        implicit = {eos} if eos is not None else set()
        if stop is None:
            return Stops(implicit, [])
        if isinstance(stop, str):
            return Stops(implicit, [stop])
        items = list(stop)
        if not items:  # [] disables every stop, EOS included (as on Tinker)
            return Stops(set(), [])
        token_ids = [s for s in items if isinstance(s, int)]
        if len(token_ids) == len(items):
            return Stops(implicit | set(token_ids), [])
        strings = [s for s in items if isinstance(s, str)]
        if len(strings) == len(items):
            return Stops(implicit, [s for s in strings if s])
        raise ConfigError("SamplingParams.stop must be a string, a list of strings or of token ids")


@dataclass
class _SampleCall:
    """A `sample` call waiting for the worker (or decoding)."""

    prompt: list[int]
    n: int
    params: types.SamplingParams
    prompt_options: PromptOptions
    future: Future[types.SampleResponse]
    on_step: StepCallback | None = None  # called with the call's new tokens after each step
    topk: int = 0  # topk_sample_logprobs: each step's top-k logprobs kept (0: none)


class _TokenReader:
    """Brings a step's chosen tokens to the host without waiting for work queued after them:
    on CUDA a pinned copy and an event, so the next decode step is already on the card while
    the host applies the stop rules."""

    def __init__(self, device: torch.device, rows: int) -> None:
        self._cuda = device.type == "cuda"
        self._host_B = torch.empty(rows, dtype=torch.long, pin_memory=self._cuda)
        self._event = torch.cuda.Event() if self._cuda else None

    def start(self, token_B: Tensor) -> None:
        self._host_B.copy_(token_B, non_blocking=self._cuda)
        if self._event is not None:
            self._event.record()

    def finish(self) -> list[int]:
        if self._event is not None:
            self._event.synchronize()
        return self._host_B.tolist()


class DecodeRows:
    """The `n` sequences of one sampling call as they decode: its own seeded generator, stop
    rules and tokens. The rows advance together and end together (a row that stops early
    keeps drawing, cut later), so a call's random draws, and its samples for a seed, do not
    depend on what else is decoded beside it.
    """

    def __init__(
        self,
        prompt: list[int],
        n: int,
        params: types.SamplingParams,
        stops: Stops,
        tokenizer: PreTrainedTokenizerBase,
        topk: int = 0,
    ) -> None:
        if not prompt:
            raise ConfigError("sample needs a non-empty prompt")
        if n < 1:
            raise ConfigError(f"num_samples must be at least 1, got {n}")
        self.n, self.params, self._stops, self._tokenizer = n, params, stops, tokenizer
        self.max_tokens = params.max_tokens if params.max_tokens is not None else DEFAULT_MAX_TOKENS
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be at least 1, got {self.max_tokens}")
        self._generator: torch.Generator | None = None
        self._seeds: np.random.Generator | None = None  # draw_kernel's step seeds
        self._tokens_NT: Tensor | None = None  # (n, max_tokens), filled a column a step
        self._logprobs_NT: Tensor | None = None
        self._topk = topk  # each step's top-k logprobs, kept on the device only when asked
        self._topk_ids_NTK: Tensor | None = None
        self._topk_logprobs_NTK: Tensor | None = None
        self._history: list[list[int]] = [[] for _ in range(n)]  # on the host, for stop strings
        self._finished = [False] * n
        self._stop_reasons: list[types.StopReason] = ["length"] * n
        self._lengths = [self.max_tokens] * n
        self.steps = 0
        self.done = False

    def advance(self, logits_NV: Tensor) -> Tensor:
        """Choose each row's next token from its logits; marks rows (and the call) done."""
        token_N = self.choose(torch.log_softmax(logits_NV, dim=-1, dtype=torch.float32))
        self.observe(token_N.tolist())
        return token_N

    def draws_fused(self, logits_NV: Tensor) -> bool:
        """Whether this call's tokens can be drawn by draw_kernel (one pass over the model's
        logits, on CUDA): a temperature, no top-k or top-p, no top-k logprobs kept."""
        params = self.params
        return (
            fast.enabled("FUSED_DRAW", logits_NV.device)
            and draw_kernel.available(logits_NV)
            and params.temperature >= GREEDY_BELOW
            and not (params.top_k is not None and params.top_k > 0)
            and not (params.top_p is not None and params.top_p < 1)
            and not self._topk
        )

    def draw(self, logits_NV: Tensor, token_N: Tensor) -> None:
        """`choose` for a call that `draws_fused`, from its rows' logits in the model's dtype:
        the tokens written to `token_N` (on the device; `observe` sees them on the host)."""
        if self._seeds is None:  # each step's noise keyed by a seed from the call's own
            seed = self.params.seed if self.params.seed is not None else _random_seed()
            self._seeds = np.random.default_rng(seed)
        self._buffers(logits_NV.device)
        assert self._tokens_NT is not None and self._logprobs_NT is not None
        draw_kernel.draw(
            logits_NV,
            self.params.temperature,
            int(self._seeds.integers(draw_kernel.SEED_BOUND)),
            token_N,
            self._tokens_NT[:, self.steps],
            self._logprobs_NT[:, self.steps],
        )
        self.steps += 1

    def _buffers(self, device: torch.device) -> None:
        if self._tokens_NT is None or self._logprobs_NT is None:
            shape = (self.n, self.max_tokens)
            self._tokens_NT = torch.empty(shape, dtype=torch.long, device=device)
            self._logprobs_NT = torch.empty(shape, dtype=torch.float32, device=device)

    def choose(self, logprobs_NV: Tensor) -> Tensor:
        """Each row's next token from its next-token logprobs (fp32 log-softmax of the
        logits), chosen on their device (no wait for the host); the call's stop rules see it
        in `observe`."""
        if self._generator is None:  # on the logits' device, seeded as a lone call would be
            self._generator = torch.Generator(logprobs_NV.device)
            seed = self.params.seed if self.params.seed is not None else _random_seed()
            self._generator.manual_seed(seed)
        top = logprobs_NV.topk(self._topk, dim=-1) if self._topk else None
        if top is not None and self.params.temperature < GREEDY_BELOW:
            # The top-k's first, which argmax need not be where bf16 logits tie.
            token_N = top.indices[:, 0]
        else:
            token_N = _choose(logprobs_NV, self.params, self._generator)
        self._buffers(token_N.device)
        assert self._tokens_NT is not None and self._logprobs_NT is not None
        self._tokens_NT[:, self.steps] = token_N
        self._logprobs_NT[:, self.steps] = logprobs_NV.gather(-1, token_N[:, None]).squeeze(-1)
        if top is not None:
            self._keep_topk(top.indices, top.values)
        self.steps += 1
        return token_N

    def _keep_topk(self, ids_NK: Tensor, logprobs_NK: Tensor) -> None:
        if self._topk_ids_NTK is None or self._topk_logprobs_NTK is None:
            shape = (self.n, self.max_tokens, self._topk)
            device = ids_NK.device
            self._topk_ids_NTK = torch.empty(shape, dtype=torch.long, device=device)
            self._topk_logprobs_NTK = torch.empty(shape, dtype=torch.float32, device=device)
        self._topk_ids_NTK[:, self.steps] = ids_NK
        self._topk_logprobs_NTK[:, self.steps] = logprobs_NK

    def observe(self, token_N: list[int]) -> None:
        """Apply the stop rules to the tokens the last `choose` returned, read on the host."""
        for i, token in enumerate(token_N):
            if self._finished[i]:
                continue
            history = self._history[i]
            if self._stops.strings:
                history.append(token)
            if token in self._stops.token_ids or (
                self._stops.strings
                and _ends_with_stop_string(history, self._stops.strings, self._tokenizer)
            ):
                self._finished[i], self._stop_reasons[i] = True, "stop"
                self._lengths[i] = self.steps
        self.done = all(self._finished) or self.steps == self.max_tokens

    def response(self, prompt_logprobs: np.ndarray | None = None) -> types.SampleResponse:
        assert self._tokens_NT is not None and self._logprobs_NT is not None, "advance first"
        tokens_np = self._tokens_NT[:, : self.steps].cpu().numpy()
        logprobs_np = self._logprobs_NT[:, : self.steps].cpu().numpy()
        topk = self._topk_on_host()
        sequences = [
            types.SampledSequence(
                stop_reason=self._stop_reasons[i],
                sequence_id=uuid.uuid4().hex,
                tokens_np=tokens_np[i, : self._lengths[i]].astype(np.int32),
                logprobs_np=logprobs_np[i, : self._lengths[i]].astype(np.float32),
                topk_logprobs_np=(
                    TopkLogprobs(topk[0][i, : self._lengths[i]], topk[1][i, : self._lengths[i]])
                    if topk is not None
                    else None
                ),
            )
            for i in range(self.n)
        ]
        return types.SampleResponse(sequences=sequences, prompt_logprobs_np=prompt_logprobs)

    def _topk_on_host(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each step's top-k (int32 ids, float32 logprobs), (n, steps, k); None if not asked."""
        if self._topk_ids_NTK is None or self._topk_logprobs_NTK is None:
            return None
        ids = self._topk_ids_NTK[:, : self.steps].cpu().numpy().astype(np.int32)
        return ids, self._topk_logprobs_NTK[:, : self.steps].cpu().numpy()


def _choose(
    logprobs_NV: Tensor, params: types.SamplingParams, generator: torch.Generator
) -> Tensor:
    """The next token of each row: the argmax at temperature 0, else a draw from
    softmax(logits / temperature), which is softmax(logprobs / temperature)."""
    if params.temperature < GREEDY_BELOW:
        return logprobs_NV.argmax(dim=-1)
    top_k = params.top_k is not None and params.top_k > 0
    top_p = params.top_p is not None and params.top_p < 1
    if params.temperature == 1 and not top_k and not top_p:
        # The probabilities themselves: one pass, where a softmax takes two.
        weights_NV = logprobs_NV.exp()
    else:
        scores_NV = logprobs_NV / params.temperature
        if top_k:
            kth_N1 = scores_NV.topk(min(params.top_k, scores_NV.shape[-1]), dim=-1).values[:, -1:]
            scores_NV = scores_NV.masked_fill(scores_NV < kth_N1, float("-inf"))
        if top_p:
            scores_NV = _top_p_filter(scores_NV, params.top_p)
        weights_NV = torch.softmax(scores_NV, dim=-1)
    return torch.multinomial(weights_NV, 1, generator=generator).squeeze(-1)


def _top_p_filter(scores_NV: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of highest-probability tokens whose mass reaches top_p."""
    sorted_NV, order_NV = scores_NV.sort(dim=-1, descending=True)
    cumulative_NV = torch.softmax(sorted_NV, dim=-1).cumsum(dim=-1)
    drop_sorted_NV = cumulative_NV - torch.softmax(sorted_NV, dim=-1) >= top_p
    drop_sorted_NV[..., 0] = False  # the likeliest stays, even for a top_p that rounds to 0
    drop_NV = drop_sorted_NV.scatter(-1, order_NV, drop_sorted_NV)
    return scores_NV.masked_fill(drop_NV, float("-inf"))


def _ends_with_stop_string(
    tokens: list[int], strings: list[str], tokenizer: PreTrainedTokenizerBase
) -> bool:
    """Whether the newest token completes a stop string (only a short tail is decoded)."""
    window = max(len(s) for s in strings) + 2
    tail = tokenizer.decode(tokens[-window:], skip_special_tokens=False)
    before = tokenizer.decode(tokens[-window:-1], skip_special_tokens=False)
    return any(s in tail and s not in before for s in strings)


def _random_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") & (2**63 - 1)
