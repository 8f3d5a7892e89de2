"""How many tokens one forward/backward pass may hold in the memory free now.

The estimate counts, per token of a pass, what autograd keeps for the backward pass of LoRA
training. With L layers, h = hidden_size, i = intermediate_size, q = num_attention_heads *
head_dim, kv = num_key_value_heads * head_dim and s the bytes of the model's dtype (2 for bf16):

    per layer   4 (5h + q + i)   the adapted projections' inputs: PEFT casts each to the
                                 adapter's fp32 and lora_A keeps the copy (q, k, v, gate, up
                                 read h; o reads q; down reads i). Where the adapter computes
                                 in the model's dtype (fast.py's BF16_LORA, or an fp32 model),
                                 lora_A keeps the inputs themselves instead: s (2h + q + i).
                                 The frozen base projections keep nothing (no weight gradient).
              + s (2q + 2kv)     attention's q, k, v and output
              + 3 s i            SwiGLU's gate, silu(gate) and up
              + 8h               the two RMSNorms' inputs, upcast to fp32
              + 4 (q + kv)       the q/k RMSNorms' inputs, on models that have them (Qwen3)
    once        4h + s h         the final norm's fp32 input and the output layer's input

With gradient checkpointing (the QLoRA path), a layer keeps only its input, s h, and one
layer's activations exist at a time, while it is recomputed. The logits do not scale with the
tokens: the output layer runs in chunks of CHUNK_BYTES of fp32 logits, recomputed in the
backward pass (forward.py); six chunk-sized fp32 buffers are set aside for that, and 12 bytes
per trainable parameter for the adapter's gradient and Adam moments. These are the tensors of
transformers' own (unfused) ops: counting autograd's saved tensors on the CPU for both shapes
below agreed within 1.5%. Liger's fused kernels (CUDA) keep less.

Calibration: peak `max_memory_allocated` of an SL step, weights included, on an H200 (bf16,
LoRA r=16 on q, k, v, o, gate, up, down with fp32 inputs, Liger's fused kernels on;
docs/benchmarks.md). The measured figure per token is (peak - weights) / tokens, so it carries
the fixed costs too:

    Qwen3-0.6B    8 x 1024   18.4 GiB peak, 1.2 GB weights    2.16 MiB measured, 2.47 estimated
    Llama-3.1-8B  2 x 2048   46.9 GiB peak, 16.1 GB weights   7.98 MiB measured, 9.02 estimated

so the estimate is 14% and 13% high with the fused kernels. Without them, a pass of the whole
budget on the same card (random weights, a forward/backward and an AdamW step) peaked at:

    adapter inputs        Qwen3-0.6B                         Llama-3.1-8B
    fp32 (PEFT's cast)    49 x 1024: 123.6 GiB (123.6 est.)  6 x 2048: 124.7 GiB (125.4 est.)
    bf16 (BF16_LORA)      69 x 1024: 116.6 GiB (123.9 est.)  9 x 2048: 118.4 GiB (123.3 est.)

of 139.8 GiB: the margin on free memory was never needed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel
from peft.tuners.tuners_utils import BaseTunerLayer
from transformers import PreTrainedModel

from thinker.engine.local.forward import CHUNK_BYTES
from thinker.engine.local.models import Placement

GiB = 2**30
MiB = 2**20
MIN_TOKENS = 256
CPU_MAX_TOKENS = 16_384  # a CPU pass beyond this is too slow to be worth the memory
MARGIN_FRACTION = 0.10  # of the free memory, kept back: fragmentation, other processes
MARGIN_BYTES = 1 * GiB  # kept back besides: CUDA context growth, kernels' workspaces
LOGIT_BUFFERS = 6  # chunk-sized fp32 buffers alive in a logit chunk's backward
OPTIMIZER_BYTES_PER_PARAM = 12  # fp32 gradient and Adam's two moments


@dataclass(frozen=True)
class Budget:
    """How many tokens one forward/backward pass may hold, and why."""

    tokens: int  # tokens one forward+backward pass may hold (>= MIN_TOKENS)
    free_bytes: int  # memory free on the device when measured
    bytes_per_token: int  # estimated training memory per token of one pass
    explanation: str  # one or two sentences with the figures, for the job log


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder-only transformer that its training memory depends on."""

    layers: int
    hidden: int
    intermediate: int
    q_dim: int  # num_attention_heads * head_dim
    kv_dim: int  # num_key_value_heads * head_dim
    vocab: int
    qk_norm: bool  # RMSNorm on each head's queries and keys (Qwen3)

    @classmethod
    def of(cls, model: PreTrainedModel | PeftModel) -> ModelShape:
        """The shape of a transformers model (or a PEFT model wrapping one)."""
        config = model.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            intermediate=getattr(config, "intermediate_size", None) or 4 * config.hidden_size,
            q_dim=heads * head_dim,
            kv_dim=(getattr(config, "num_key_value_heads", None) or heads) * head_dim,
            vocab=config.vocab_size,
            qk_norm=any(name.endswith(".q_norm") for name, _ in model.named_modules()),
        )


def bytes_per_token(
    shape: ModelShape, dtype_bytes: int, fp32_adapter_inputs: bool, checkpointed: bool
) -> int:
    """Training memory per token of a pass: the formula of the module docstring."""
    h, i, q, kv, s = shape.hidden, shape.intermediate, shape.q_dim, shape.kv_dim, dtype_bytes
    adapter_inputs = 4 * (5 * h + q + i) if fp32_adapter_inputs else s * (2 * h + q + i)
    layer = adapter_inputs + s * (2 * q + 2 * kv) + 3 * s * i + 8 * h
    if shape.qk_norm:
        layer += 4 * (q + kv)
    layers = shape.layers * s * h + layer if checkpointed else shape.layers * layer
    return layers + 4 * h + s * h


def casts_adapter_inputs(model: torch.nn.Module, dtype: torch.dtype) -> bool:
    """Whether PEFT copies each adapted layer's input to fp32 (the adapter weights' dtype)."""
    if dtype == torch.float32:
        return False
    return any(
        getattr(m, "cast_input_dtype_enabled", True)
        for m in model.modules()
        if isinstance(m, BaseTunerLayer)
    )


def is_checkpointed(model: torch.nn.Module) -> bool:
    """Whether transformers' gradient checkpointing is on (the layers set the flag)."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def fixed_bytes(model: torch.nn.Module, shape: ModelShape) -> int:
    """Memory a pass needs whatever its tokens: logit chunks, the adapter's optimizer state."""
    chunk_tokens = max(64, CHUNK_BYTES // (4 * shape.vocab))  # as forward.py chunks
    logits = LOGIT_BUFFERS * 4 * chunk_tokens * shape.vocab
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return logits + OPTIMIZER_BYTES_PER_PARAM * trainable


def free_memory(device: torch.device) -> int:
    """Bytes free on `device`: on CUDA what the driver reports plus what PyTorch's caching
    allocator holds unused; on the CPU the RAM available to this process (see
    `available_ram`)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return available_ram()


def available_ram(meminfo: str | None = None, cgroup_dir: str = "/sys/fs/cgroup") -> int:
    """RAM a new allocation can have: the kernel's MemAvailable (free pages plus the page
    cache and slabs it can reclaim; "free" alone reads near zero on a machine that has read
    many files), capped by the cgroup's memory.max less its memory.current."""
    try:
        text = meminfo if meminfo is not None else Path("/proc/meminfo").read_text()
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path(cgroup_dir, "memory.max").read_text().strip()
        if limit != "max":
            used = int(Path(cgroup_dir, "memory.current").read_text())
            available = min(available, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return available


@dataclass(frozen=True)
class Estimate:
    """What a model's passes cost apart from their tokens' count: fixed for a loaded model."""

    shape: ModelShape
    per_token: int  # bytes_per_token for this model as loaded
    fixed: int  # fixed_bytes


def estimate(model: PreTrainedModel | PeftModel, placement: Placement) -> Estimate:
    """Walk the model once for everything the budget needs besides the free memory."""
    shape = ModelShape.of(model)
    per_token = bytes_per_token(
        shape,
        torch.finfo(placement.dtype).bits // 8,
        casts_adapter_inputs(model, placement.dtype),
        is_checkpointed(model),
    )
    return Estimate(shape, per_token, fixed_bytes(model, shape))


def pass_token_budget(
    model: PreTrainedModel | PeftModel, placement: Placement, *, free_bytes: int | None = None
) -> Budget:
    """How many tokens one forward/backward pass of `model` may hold in free memory.

    Args:
        model: The PEFT model being trained (its weights already on the device).
        placement: Where it lives; its dtype sizes the activations.
        free_bytes: Free memory to assume instead of measuring it (for tests and planning).

    Returns:
        The budget: free memory less a margin (10% and 1 GiB) and the fixed costs, divided
        by the estimated bytes per token; at least MIN_TOKENS, and on the CPU at most
        CPU_MAX_TOKENS.
    """
    return budget_of(estimate(model, placement), placement, free_bytes=free_bytes)


def budget_of(known: Estimate, placement: Placement, *, free_bytes: int | None = None) -> Budget:
    """`pass_token_budget` from an estimate made earlier: only the free memory is read."""
    device = placement.device
    free = free_memory(device) if free_bytes is None else free_bytes
    per_token, fixed, shape = known.per_token, known.fixed, known.shape
    usable = int(free * (1 - MARGIN_FRACTION)) - MARGIN_BYTES - fixed
    tokens = max(MIN_TOKENS, usable // per_token)
    note = " (the minimum)" if tokens == MIN_TOKENS else ""
    if device.type != "cuda" and tokens > CPU_MAX_TOKENS:
        tokens, note = CPU_MAX_TOKENS, " (the CPU cap)"
    dtype = str(placement.dtype).removeprefix("torch.")
    explanation = (
        f"{'free' if device.type == 'cuda' else 'available'} memory {free / GiB:.1f} GiB on "
        f"{device}, {max(usable, 0) / GiB:.1f} GiB usable "
        f"after a margin (10% + 1 GiB) and {fixed / GiB:.1f} GiB for logit chunks and optimizer "
        f"state; ~{per_token / MiB:.2f} MiB per token (estimated for {shape.layers} layers, "
        f"hidden {shape.hidden}, {dtype}) -> one pass holds {tokens:,} tokens{note}"
    )
    return Budget(tokens, free, per_token, explanation)
