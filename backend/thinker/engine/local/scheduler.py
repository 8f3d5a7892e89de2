"""Continuous batching: the sampling calls made to one loaded model decode together.

Calls wait in a bounded queue. At each step boundary the scheduler prefills the calls that
wait (each alone, so its cache is what a lone call would get) and adds their rows to the
running batch; every step is then one forward for all rows, each call choosing its tokens
with its own parameters and seeded generator (`DecodeRows`). Prompts of different lengths
share the batch through left padding: the shorter caches get masked zero columns at the
front, and each row gets explicit position ids. A call leaves when all its rows have
stopped, its client has gone away (its future was cancelled) or its callback failed.

A call decoded alone runs the per-call decode of `LocalSamplingClient` (on CUDA its
CUDA-graph decode); alone or beside others its logits agree with `sample`'s (which shares the
prompt's cache between samples, prefix.py) to float rounding, so a seed gives the same tokens.
A model whose cache cannot be padded this way (sliding-window or linear-attention layers)
decodes one call at a time, in order. Prompts are prefilled one by one, so a long
prompt delays the batch's next step by its prefill."""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tinker import types
from torch import Tensor
from transformers import DynamicCache, PreTrainedTokenizerBase
from transformers.cache_utils import CacheLayerMixin, DynamicLayer

from thinker.engine.futures import EngineFuture
from thinker.engine.local import fast
from thinker.engine.local.decode import GraphDecoder, cache_of, last_logits, layer_states
from thinker.engine.local.sampling import DecodeRows, LocalSamplingClient, StepCallback
from thinker.errors import OverloadedError

log = logging.getLogger(__name__)


@dataclass
class _Call:
    """One sampling call in the queue or the batch."""

    prompt: list[int]
    rows: DecodeRows
    want_prompt_logprobs: bool
    on_step: StepCallback | None
    future: Future[types.SampleResponse]
    prompt_logprobs: np.ndarray | None = None


@dataclass
class _Batch:
    """The calls decoding together; call i owns `calls[i].rows.n` consecutive rows (B in all)."""

    calls: list[_Call]
    cache: DynamicCache | None  # None while `solo` decodes
    logits_BV: Tensor  # next-token logits of each row
    positions_B: Tensor  # the position id of each row's next token
    mask_BL: Tensor | None  # 1 = a real cache entry, 0 = left padding; None = no padding
    solo: GraphDecoder | None = None  # one call alone on a static cache (CUDA graphs)

    @property
    def size(self) -> int:
        return self.positions_B.shape[0]


class DecodeScheduler:
    """Continuous batching over one `LocalSamplingClient` that owns its weights (the server's
    loaded models), on that client's worker thread.

    `max_rows` bounds the sequences decoded together (1 = one call at a time, in order);
    `queue_size` bounds the calls waiting to join, beyond which `submit` raises
    OverloadedError. With `solo_graphs` (default: on CUDA unless THINKER_CUDA_GRAPHS=0), a
    call that finds nobody else decodes as `LocalSamplingClient.sample` does there, its step
    a replayed CUDA graph over a static cache (decode.py; an eager step of a small model costs
    several times more); when another call comes, its cache moves into the dynamic batch.
    """

    def __init__(
        self,
        client: LocalSamplingClient,
        max_rows: int,
        queue_size: int,
        solo_graphs: bool | None = None,
    ) -> None:
        if client.shares_weights:
            raise ValueError("a scheduler needs a client with its own weights, not a trainer's")
        self._client = client
        self.max_rows, self.queue_size = max_rows, queue_size
        if solo_graphs is None:
            solo_graphs = fast.enabled("CUDA_GRAPHS", client.device)
        self._solo_graphs = solo_graphs
        # On the CPU (tests) a solo decode runs the same static-cache steps, eagerly.
        self._graphs = client.device.type == "cuda"
        if self._graphs:
            # cuDNN's attention builds a plan for each new shape (~30 ms on an H100), and a
            # dynamic cache has a new length at every step; FlashAttention and the
            # memory-efficient kernel have no such cost. (Process-wide: this server process
            # only samples; training runs in worker processes.)
            torch.backends.cuda.enable_cudnn_sdp(False)
        self._waiting: collections.deque[_Call] = collections.deque()
        self._lock = threading.Lock()
        self._running = False  # the decode loop is on (or queued for) the worker thread
        self._unsettled: set[Future[types.SampleResponse]] = set()  # waiting or decoding
        self._paddable: bool | None = None  # known after the first prefill
        self.outcomes: collections.Counter[str] = collections.Counter()  # done|cancelled|failed
        self.batch_sizes: collections.Counter[int] = collections.Counter()  # steps per size

    def submit(
        self,
        prompt: list[int],
        n: int,
        params: types.SamplingParams,
        prompt_logprobs: bool = False,
        on_step: StepCallback | None = None,
    ) -> EngineFuture[types.SampleResponse]:
        """Queue a call like `LocalSamplingClient.sample`; cancel the future to stop it.

        `on_step(tokens)` is called on the worker with each step's tokens (one per row); an
        exception it raises ends this call alone, as the future's exception.

        Raises:
            ConfigError: an empty prompt, or n or max_tokens below 1.
            OverloadedError: `queue_size` calls are already waiting.
        """
        rows = DecodeRows(prompt, n, params, self._client.stops(params.stop), self.tokenizer)
        call = _Call(list(prompt), rows, prompt_logprobs, on_step, Future())
        with self._lock:
            if len(self._waiting) >= self.queue_size:
                raise OverloadedError(
                    f"the sampling queue of this model is full ({self.queue_size} requests "
                    "waiting; THINKER_SAMPLE_QUEUE_SIZE): retry shortly"
                )
            self._waiting.append(call)
            self._unsettled.add(call.future)
            start, self._running = not self._running, True
        if start:  # not under the lock: a loop that fails at once fails the calls under it
            self._start()
        call.future.add_done_callback(self._unsettled.discard)
        return EngineFuture(call.future)

    @property
    def queued(self) -> int:
        """Calls waiting to join the batch."""
        return len(self._waiting)

    @property
    def unanswered(self) -> int:
        """Calls waiting or decoding whose caller still waits (not cancelled, not done)."""
        return len(self._unsettled)

    def cancel_all(self) -> None:
        """Cancel every call, waiting or decoding (the server is stopping)."""
        for future in list(self._unsettled):
            future.cancel()

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._client.get_tokenizer()

    def _start(self) -> None:
        """Run the decode loop on the worker; should it fail before the loop starts (the
        worker thread could not start), the waiting calls get its error, not a wait."""
        self._client.executor.submit(self._run).future().add_done_callback(self._not_started)

    def _not_started(self, done: Future[None]) -> None:
        error = None if done.cancelled() else done.exception()
        if error is None:
            return
        with self._lock:
            calls, self._waiting = list(self._waiting), collections.deque()
            self._running = False
        for call in calls:
            self._fail(call, error)

    # ---- the decode loop, on the client's worker thread -----------------------------------
    def _run(self) -> None:
        model = self._client.model
        batch: _Batch | None = None
        try:
            with torch.inference_mode(), fast.adapter_autocast(model), fast.eager():
                model.eval()
                while True:
                    batch = self._admit(batch)
                    if batch is None:
                        with self._lock:
                            if not self._waiting:
                                self._running = False
                                return
                        continue
                    batch = self._step(batch)
        except Exception as error:  # a failed forward: every call of the batch gets the error
            log.exception("sampling decode failed")
            for call in batch.calls if batch is not None else []:
                self._fail(call, error)
            with self._lock:  # the calls still waiting start a fresh batch
                self._running = bool(self._waiting)
                restart = self._running
            if restart:
                self._start()

    def _admit(self, batch: _Batch | None) -> _Batch | None:
        """Prefill waiting calls (in order) while they fit, adding them to `batch`."""
        while True:
            with self._lock:
                if not self._waiting or not self._fits(batch, self._waiting[0]):
                    return batch
                call = self._waiting.popleft()
                alone = batch is None and not self._waiting
            if call.future.cancelled():
                self.outcomes["cancelled"] += 1
                continue
            try:
                joining = self._prefill(call, solo=alone and self._solo_graphs)
                if batch is not None and batch.solo is not None:
                    batch = _unsolo(batch)
                batch = joining if batch is None else _merged(batch, joining)
            except Exception as error:  # this call alone (e.g. a prompt too long for the model)
                self._fail(call, error)

    def _fits(self, batch: _Batch | None, call: _Call) -> bool:
        if batch is None:
            return True
        return bool(self._paddable) and batch.size + call.rows.n <= self.max_rows

    def _prefill(self, call: _Call, solo: bool) -> _Batch:
        model, device, n = self._client.model, self._client.device, call.rows.n
        if call.want_prompt_logprobs:
            call.prompt_logprobs = self._client.prompt_logprobs(call.prompt)
        ids_1P = torch.tensor([call.prompt], dtype=torch.long, device=device)
        positions_B = torch.full((n,), len(call.prompt), dtype=torch.long, device=device)
        if solo:
            decoder = GraphDecoder(model, self._client.cache_arg, model.config, self._graphs)
            logits_BV = decoder.prefill(ids_1P, n, call.rows.max_tokens)
            if self._paddable is None:
                self._paddable = decoder.dynamic_cache() is not None
            return _Batch([call], None, logits_BV, positions_B, None, solo=decoder)
        out = model(input_ids=ids_1P, use_cache=True, logits_to_keep=1)
        cache = cache_of(out)
        if self._paddable is None:
            self._paddable = isinstance(cache, DynamicCache) and all(
                type(layer) is DynamicLayer for layer in cache.layers
            )
        cache.batch_repeat_interleave(n)
        logits_BV = last_logits(out).expand(n, -1)
        return _Batch([call], cache, logits_BV, positions_B, None)

    def _step(self, batch: _Batch) -> _Batch | None:
        """Choose every row's next token, retire the calls that ended, run one forward."""
        kept: list[_Call] = []
        rows: list[int] = []
        tokens: list[Tensor] = []
        start = 0
        for call in batch.calls:
            end = start + call.rows.n
            token_N = self._advance(call, batch.logits_BV[start:end])
            if token_N is not None:
                kept.append(call)
                rows.extend(range(start, end))
                tokens.append(token_N)
            start = end
        if not kept:
            return None
        if len(kept) < len(batch.calls):
            batch = _selected(batch, kept, torch.tensor(rows, device=batch.positions_B.device))
        self.batch_sizes[batch.size] += 1
        token_B = torch.cat(tokens)
        if batch.solo is not None:
            batch.logits_BV = batch.solo.step(token_B)
        else:
            batch.logits_BV = self._forward(batch, token_B)
        return batch

    def _advance(self, call: _Call, logits_NV: Tensor) -> Tensor | None:
        """The call's next tokens, or None once it has left (done, cancelled or failed)."""
        if call.future.cancelled():
            self.outcomes["cancelled"] += 1
            return None
        try:
            token_N = call.rows.advance(logits_NV)
            if call.on_step is not None:
                call.on_step(token_N.tolist())
            if call.rows.done:
                self._settle(call, call.rows.response(call.prompt_logprobs))
                return None
        except Exception as error:
            self._fail(call, error)
            return None
        return token_N

    def _forward(self, batch: _Batch, token_B: Tensor) -> Tensor:
        assert batch.cache is not None
        args: dict[str, object] = {self._client.cache_arg: batch.cache}
        if batch.mask_BL is not None:  # padded rows: say where each row's tokens are
            ones_B1 = batch.mask_BL.new_ones((batch.size, 1))
            batch.mask_BL = torch.cat([batch.mask_BL, ones_B1], dim=1)
            args |= {"attention_mask": batch.mask_BL, "position_ids": batch.positions_B[:, None]}
        out = self._client.model(input_ids=token_B[:, None], use_cache=True, **args)
        batch.cache = cache_of(out)
        batch.positions_B = batch.positions_B + 1
        return last_logits(out)

    def _settle(self, call: _Call, response: types.SampleResponse) -> None:
        # Counted first: whoever waits on the future may read the counts as soon as it is set.
        self.outcomes["cancelled" if call.future.cancelled() else "done"] += 1
        with contextlib.suppress(InvalidStateError):  # cancelled meanwhile: nobody waits
            call.future.set_result(response)

    def _fail(self, call: _Call, error: BaseException) -> None:
        if call.future.done():
            return
        self.outcomes["failed"] += 1
        with contextlib.suppress(InvalidStateError):
            call.future.set_exception(error)


def _unsolo(batch: _Batch) -> _Batch:
    """A solo decode's batch moved onto a dynamic cache, so that other calls can join it."""
    assert batch.solo is not None
    cache = batch.solo.dynamic_cache()
    assert cache is not None, "only a paddable cache is moved (see _fits)"
    positions_B = torch.full_like(batch.positions_B, cache.get_seq_length())
    return _Batch(batch.calls, cache, batch.logits_BV, positions_B, None)


def _merged(batch: _Batch, joining: _Batch) -> _Batch:
    """Both batches' rows in one, the shorter caches left-padded to the longer."""
    length = max(_length(batch), _length(joining))
    layers = [
        tuple(torch.cat([_pad(a, length), _pad(b, length)]) for a, b in zip(old, new, strict=True))
        for old, new in zip(_layers(batch.cache), _layers(joining.cache), strict=True)
    ]
    mask_BL = torch.cat([_mask(batch, length), _mask(joining, length)])
    return _Batch(
        batch.calls + joining.calls,
        DynamicCache(layers),
        torch.cat([batch.logits_BV, joining.logits_BV]),
        torch.cat([batch.positions_B, joining.positions_B]),
        None if bool(mask_BL.all()) else mask_BL,
    )


def _selected(batch: _Batch, calls: list[_Call], rows_R: Tensor) -> _Batch:
    """The batch reduced to `rows_R`, without the padding columns no remaining row needs."""
    assert batch.cache is not None, "a solo batch has one call: it never shrinks"
    batch.cache.batch_select_indices(rows_R)
    mask_RL = batch.mask_BL[rows_R] if batch.mask_BL is not None else None
    if mask_RL is not None:
        first = int(mask_RL.any(dim=0).int().argmax())  # the first column a row still uses
        if first > 0:
            for layer in batch.cache.layers:
                keys, values = layer_states(layer)
                assert isinstance(layer, CacheLayerMixin)  # checked there; narrows the type here
                layer.keys, layer.values = keys[..., first:, :], values[..., first:, :]
            mask_RL = mask_RL[:, first:]
        if bool(mask_RL.all()):
            mask_RL = None
    return _Batch(calls, batch.cache, batch.logits_BV, batch.positions_B[rows_R], mask_RL)


def _layers(cache: DynamicCache | None) -> list[tuple[Tensor, Tensor]]:
    assert cache is not None
    return [layer_states(layer) for layer in cache.layers]


def _length(batch: _Batch) -> int:
    assert batch.cache is not None
    return int(batch.cache.get_seq_length())


def _pad(states: Tensor, length: int) -> Tensor:
    """(B, heads, L, head_dim) with zero columns in front, up to `length`."""
    return F.pad(states, (0, 0, length - states.shape[-2], 0))


def _mask(batch: _Batch, length: int) -> Tensor:
    mask_BL = batch.mask_BL
    if mask_BL is None:
        mask_BL = torch.ones(
            (batch.size, _length(batch)), dtype=torch.long, device=batch.positions_B.device
        )
    return F.pad(mask_BL, (length - mask_BL.shape[1], 0))
