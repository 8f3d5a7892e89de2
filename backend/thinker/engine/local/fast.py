"""Switches of the local engine's fast path: on by default on CUDA, never on the CPU.

`THINKER_FAST=0` turns every one off (the plain transformers + PEFT path, which the CUDA tests
compare against); `THINKER_<NAME>=0` turns off one:

- FUSED_KERNELS: Liger's Triton RMSNorm, RoPE and SwiGLU (models.py).
- PACKING: several sequences to a row of a batch instead of padding (forward.py).
- BF16_LORA: adapter matmuls in bf16 under autocast; the fp32 adapter weights stay the
  optimizer's master copy (models.py, forward.py, decode.py).
- CUDA_GRAPHS: the decode step replayed as a CUDA graph over a static KV cache (decode.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

Feature = Literal["FUSED_KERNELS", "PACKING", "BF16_LORA", "CUDA_GRAPHS"]
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
