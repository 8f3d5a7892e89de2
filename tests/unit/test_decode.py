"""The static-cache decode (engine/local/decode.py; on CUDA its step is a replayed graph) gives
the logits of the plain dynamic-cache decode, step by step, for a batch of sequences that go
different ways, when a capture of the same shape is reused, and with the adapter switched off."""

from __future__ import annotations

import torch
from tiny_lora import tiny_lora_model

from thinker.engine.local.decode import EagerDecoder, GraphDecoder

torch.set_num_threads(1)


def _decode(decoder: EagerDecoder | GraphDecoder, prompt: list[int], n: int, steps: int):
    """Logits of each step, feeding row i the (i+1)-th most likely token so the rows differ."""
    logits = [decoder.prefill(torch.tensor([prompt]), n, steps)]
    for _ in range(steps):
        token_N = logits[-1].topk(n, dim=-1).indices.diagonal()
        logits.append(decoder.step(token_N))
    return torch.stack(logits)


@torch.inference_mode()
def test_static_cache_decode_equals_dynamic_cache_decode() -> None:
    model = tiny_lora_model().eval()
    prompt = list(range(5, 45))
    expected = _decode(EagerDecoder(model, "cache"), prompt, n=3, steps=12)
    static = GraphDecoder(model, "cache", model.config, graphs=False)
    assert torch.allclose(_decode(static, prompt, n=3, steps=12), expected, atol=1e-5)
    # The same shape again reuses (and resets) the cache: stale entries must not leak in.
    assert torch.allclose(_decode(static, prompt, n=3, steps=12), expected, atol=1e-5)
    shorter = prompt[:17]
    assert torch.allclose(
        _decode(static, shorter, n=3, steps=12),
        _decode(EagerDecoder(model, "cache"), shorter, n=3, steps=12),
        atol=1e-5,
    )


@torch.inference_mode()
def test_static_cache_decode_with_the_adapter_off() -> None:
    model = tiny_lora_model().eval()
    prompt = list(range(60, 80))
    static = GraphDecoder(model, "cache", model.config, graphs=False)
    with_adapter = _decode(static, prompt, n=2, steps=6)
    with model.disable_adapter():
        base = _decode(static, prompt, n=2, steps=6)
        expected = _decode(EagerDecoder(model, "cache"), prompt, n=2, steps=6)
    assert torch.allclose(base, expected, atol=1e-5)
    assert not torch.allclose(base, with_adapter, atol=1e-3)
