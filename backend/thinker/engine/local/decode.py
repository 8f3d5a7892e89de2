"""The decode loop's model calls: prefill once, then one forward per new token.

Two ways to run them, with the same arithmetic:

- `EagerDecoder` (CPU, and CUDA when graphs are off): a dynamic KV cache that grows each step.
- `GraphDecoder` (CUDA): a static KV cache (fixed addresses) and the one-token forward
  captured once as a CUDA graph, then replayed each step. A decode step of a small model is a
  few hundred tiny kernels whose launch costs more than their work (plain `generate` on the
  Qwen3-0.6B shape spends ~60 ms a step at any batch size); replaying a graph launches them
  all at once. The capture is kept per model for the last (batch, cache length, adapter on/off)
  and reused by the next call of the same shape, so an RL loop captures once.

Both return fp32 logits of the last position, one row per sequence.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import CacheLayerMixin, StaticLayer

log = logging.getLogger(__name__)
CACHE_BUCKET = 256  # cache lengths round up to this, so nearby prompt lengths share a graph


class EagerDecoder:
    """Prefill the prompt once, repeat its cache across the batch, then plain forwards."""

    def __init__(self, model: nn.Module, cache_arg: str) -> None:
        self._model, self._cache_arg = model, cache_arg
        self._cache: Any = None

    def prefill(self, ids_1P: Tensor, n: int, max_new_tokens: int) -> Tensor:
        out = self._model(input_ids=ids_1P, use_cache=True, logits_to_keep=1)
        self._cache = cache_of(out)
        self._cache.batch_repeat_interleave(n)
        return last_logits(out).expand(n, -1)

    def step(self, token_N: Tensor) -> Tensor:
        cache = {self._cache_arg: self._cache}
        out = self._model(input_ids=token_N[:, None], use_cache=True, **cache)
        self._cache = cache_of(out)
        return last_logits(out)


@dataclass
class _Capture:
    """A static cache, the input buffers a captured step reads, and the graph (once captured)."""

    key: tuple[int, int, bool]
    cache: StaticCache
    token_N1: Tensor
    position_N1: Tensor
    stream: torch.cuda.Stream | None  # None: never captured (eager static-cache steps)
    logits_NV: Tensor | None = None
    graph: torch.cuda.CUDAGraph | None = None
    failed: bool = False


# One capture per model (the most recent shape): a graph pins its static cache and its pool.
_CAPTURES: weakref.WeakKeyDictionary[nn.Module, _Capture] = weakref.WeakKeyDictionary()


class GraphDecoder:
    """Static-cache decode whose one-token step is a replayed CUDA graph (captured on first use)."""

    def __init__(self, model: nn.Module, cache_arg: str, config: Any, graphs: bool = True) -> None:
        """`graphs=False` runs the same static-cache steps eagerly (as the CPU tests do)."""
        self._model, self._cache_arg, self._config = model, cache_arg, config
        self._graphs = graphs
        self._capture: _Capture | None = None

    def prefill(self, ids_1P: Tensor, n: int, max_new_tokens: int) -> Tensor:
        length = ids_1P.shape[1]
        key = (n, _bucket(length + max_new_tokens), adapters_enabled(self._model))
        capture = _CAPTURES.get(self._model)
        if capture is None or capture.key != key:
            _CAPTURES.pop(self._model, None)  # free the old cache and graph before allocating
            capture = _new_capture(key, self._config, ids_1P.device, self._graphs)
            _CAPTURES[self._model] = capture
        else:
            capture.cache.reset()
        self._capture = capture
        # The prompt repeated n times, so the static cache holds a row per sequence.
        out = self._model(
            input_ids=ids_1P.expand(n, -1),
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_arg: capture.cache},
        )
        capture.position_N1.fill_(length)
        return last_logits(out)

    def step(self, token_N: Tensor) -> Tensor:
        capture = self._capture
        assert capture is not None, "prefill first"
        capture.token_N1.copy_(token_N[:, None])
        if capture.graph is not None:
            capture.graph.replay()
            assert capture.logits_NV is not None
            return capture.logits_NV.clone()
        if capture.failed or capture.stream is None:
            return self._forward(capture)
        # First step of a new shape: run it eagerly on the capture's side stream (warming up
        # that stream's libraries), then record it there.
        capture.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(capture.stream):
            logits_NV = self._forward(capture)
        torch.cuda.current_stream().wait_stream(capture.stream)
        self._try_capture(capture)
        return logits_NV

    def dynamic_cache(self) -> DynamicCache | None:
        """The cache so far as a DynamicCache (copied: the next call of this shape reuses the
        static one), so that other sequences can join this decode (scheduler.py). None for a
        cache of sliding-window or other layers, whose columns are not positions."""
        capture = self._capture
        assert capture is not None, "prefill first"
        if not all(type(layer) is StaticLayer for layer in capture.cache.layers):
            return None
        length = int(capture.position_N1[0, 0])
        states = [layer_states(layer) for layer in capture.cache.layers]
        return DynamicCache(
            [(k[..., :length, :].clone(), v[..., :length, :].clone()) for k, v in states]
        )

    def _forward(self, capture: _Capture) -> Tensor:
        out = self._model(
            input_ids=capture.token_N1,
            position_ids=capture.position_N1,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_arg: capture.cache},
        )
        capture.position_N1.add_(1)
        return last_logits(out)

    def _try_capture(self, capture: _Capture) -> None:
        """Record the step just run eagerly; recording runs nothing, so no state moves."""
        assert capture.stream is not None
        graph = torch.cuda.CUDAGraph()
        capture.stream.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.graph(graph, stream=capture.stream):
                capture.logits_NV = self._forward(capture)
        except Exception as e:  # a model whose forward syncs with the host cannot be captured
            capture.failed, capture.logits_NV = True, None
            log.warning("CUDA graph capture failed, decoding without graphs: %s", e)
            return
        finally:
            torch.cuda.current_stream().wait_stream(capture.stream)
        capture.graph = graph


def release(model: nn.Module) -> None:
    """Drop `model`'s kept capture (its static cache and graph)."""
    _CAPTURES.pop(model, None)


def _new_capture(
    key: tuple[int, int, bool], config: Any, device: torch.device, graphs: bool
) -> _Capture:
    n, length, _ = key
    cache = StaticCache(config=config, max_cache_len=length)
    token_N1 = torch.zeros((n, 1), dtype=torch.long, device=device)
    stream = torch.cuda.Stream(device) if graphs else None
    return _Capture(key, cache, token_N1, torch.zeros_like(token_N1), stream)


def _bucket(length: int) -> int:
    return -(-length // CACHE_BUCKET) * CACHE_BUCKET


def adapters_enabled(model: nn.Module) -> bool:
    """False inside PEFT's `disable_adapter()`: the graph recorded the path taken, so it is
    part of the capture's key."""
    for module in model.modules():
        if hasattr(module, "disable_adapters") and hasattr(module, "lora_A"):
            return not bool(module.disable_adapters)
    return True


def cache_of(out: object) -> Any:
    """The cache a forward returned, under either name transformers has given it."""
    cache = getattr(out, "cache", None)
    # `out` is a model's output (a ModelOutput subclass of the model's own): the base class
    # declares no fields, and the cache's type differs between transformers versions.
    return cache if cache is not None else out.past_key_values  # type: ignore[attr-defined]


class Logits(Protocol):
    """A causal LM's forward output (each model has its own ModelOutput class)."""

    logits: Tensor


def last_logits(out: Logits) -> Tensor:
    """The fp32 logits of each row's last position."""
    return out.logits[:, -1].float()


def layer_states(layer: object) -> tuple[Tensor, Tensor]:
    """The keys and values of a key/value cache layer that has seen a forward."""
    assert isinstance(layer, CacheLayerMixin), f"{type(layer).__name__} holds no keys/values"
    assert layer.keys is not None and layer.values is not None, "a layer before any forward"
    return layer.keys, layer.values
