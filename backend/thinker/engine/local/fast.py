"""Switches of the local engine's fast path: on by default on CUDA, never on the CPU.

`THINKER_FAST=0` turns every one off (the plain transformers + PEFT path, which the CUDA tests
compare against); `THINKER_<NAME>=0` turns off one:

- COMPILE: each decoder layer compiled by `torch.compile` (dynamic shapes): Inductor fuses
  the layer's norms, rotary embedding, activation and adapter arithmetic, and one compiled
  autograd function per layer replaces hundreds of small eager launches, launched from C++
  (models.py). Training and scoring forwards use it; sampling runs the layers eagerly
  (`eager()`), its decode step being a replayed CUDA graph already. Not with 4-bit bases.
- FUSED_KERNELS: liger-kernel's Triton RMSNorm, RoPE and SwiGLU (models.py) in the code
  that runs eagerly (sampling, and layers not compiled; compiled layers trace the model's own
  code), and its fused linear cross-entropy for the output layer in training (forward.py).
- PACKING: sequences of unequal length packed instead of padded: all in one flat row with
  FlashAttention's varlen kernel where the model allows (attention.py), else several to a
  padded row (forward.py).
- BF16_LORA: adapter matmuls in bf16 under autocast; the fp32 adapter weights stay the
  optimizer's master copy (models.py, forward.py, decode.py).
- CUDA_GRAPHS: the decode step replayed as a CUDA graph over a static KV cache (decode.py).
- DECODE_KERNEL: the shared-prompt decode's attention as one Triton kernel a layer, sized
  for one query a row (decode_attention.py, prefix.py).
- FUSED_DECODE: the decode step of Llama-family models (Llama, Mistral, Qwen2, Qwen3) as nine
  kernels a layer: q|k|v and gate|up each one matmul, Liger's add + RMSNorm, one kernel for
  the heads' norms and RoPE, one for SiLU * up (fused_decode.py), instead of their layers.
- FLASH_DECODE: without DECODE_KERNEL, that attention through FlashAttention's varlen
  kernel, two calls a layer merged by their log-sum-exps, instead of eager products.
- FUSED_DRAW: a decode step's tokens and their logprobs drawn in one pass over the logits
  (Gumbel-max, draw_kernel.py) instead of a log-softmax, exp and multinomial a call
  (temperature sampling without top-k or top-p).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

Feature = Literal[
    "COMPILE",
    "FUSED_KERNELS",
    "PACKING",
    "BF16_LORA",
    "CUDA_GRAPHS",
    "DECODE_KERNEL",
    "FUSED_DECODE",
    "FLASH_DECODE",
    "FUSED_DRAW",
]
AUTOCAST_ATTR = "thinker_autocast_dtype"  # set on a model whose adapter computes in bf16


def enabled(feature: Feature, device: torch.device) -> bool:
    if device.type != "cuda" or os.environ.get("THINKER_FAST", "1") == "0":
        return False
    return os.environ.get(f"THINKER_{feature}", "1") != "0"


@contextlib.contextmanager
def adapter_autocast(model: nn.Module) -> Iterator[None]:
    """Autocast for a model whose adapter layers no longer cast their input to fp32."""
    dtype = getattr(model, AUTOCAST_ATTR, None)
    if dtype is None:
        yield
        return
    with torch.autocast("cuda", dtype=dtype):
        yield


_thread = threading.local()


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Compiled layers run their plain eager code inside this block, on this thread only (the
    sampling path: its cache objects would make dynamo recompile per step, and its decode step
    is a replayed CUDA graph already). Another thread's training keeps its compiled layers."""
    before = getattr(_thread, "eager", False)
    _thread.eager = True
    try:
        yield
    finally:
        _thread.eager = before


def running_eager() -> bool:
    return bool(getattr(_thread, "eager", False))
