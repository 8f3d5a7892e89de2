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

With gradient checkpointing, a checkpointed layer keeps only its input, s h, and one layer is
recomputed at a time, which with its backward pass holds twice a layer's activations and the
MLP's intermediate gradients, 2 (layer + s i); offloaded, even the inputs wait in pinned host
memory. Past that, the MLP of a recomputed layer runs in chunks of MLP_CHUNK_TOKENS
positions, each chunk recomputed again in its own backward pass (`tile_mlps`), so of the MLP's
intermediates (3 s i, its down projection's adapter input and the gradients, 2 s i) only a
chunk's exist at once: a fixed 2 x MLP_CHUNK_TOKENS x (mlp + s i) instead of a per-token cost.
With the inputs offloaded, the passes measured held about half of what the recomputed layer's
"twice its activations" says (Llama-3.1-8B shape, H200: bf16 at 196,608 tokens peaked at
54.8 GiB where the estimate allowed 0.45 MiB a token, measured 0.21; QLoRA, tiled, at 262,144
tokens 45.0 GiB, estimated 0.34 MiB a token, measured 0.16), so offloaded the recomputed layer
counts its activations once, which still estimates 0.27 and 0.19. The QLoRA path checkpoints
every layer always; otherwise the batch plan turns checkpointing on only for a sequence that
does not fit without it, and then on as few layers as make it fit (transformers'
`every_n_layers`): recomputing a layer costs its forward pass again, so each layer kept saves
time. The logits do not scale with the tokens: the output layer runs in chunks of CHUNK_BYTES
of fp32 logits, recomputed in the backward pass (forward.py); six chunk-sized fp32 buffers are
set aside for that, and 12 bytes per trainable parameter for the adapter's gradient and Adam
moments. These are the tensors of
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

import functools
import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel
from peft.tuners.tuners_utils import BaseTunerLayer
from torch import Tensor
from torch.utils.checkpoint import checkpoint
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


MLP_CHUNK_TOKENS = 4096  # positions an MLP chunk holds when the MLPs are tiled
TILED_ATTR = "thinker_untiled_forward"  # on a tiled MLP: its forward before tiling


@dataclass(frozen=True)
class Checkpointing:
    """Which decoder layers recompute their activations in the backward pass."""

    every: int = 0  # every n-th layer, from the first (transformers' every_n_layers); 0: none
    offload: bool = False  # the checkpointed layers' inputs wait in pinned host memory
    mlp_chunk: int = 0  # positions per MLP chunk, each recomputed on its own; 0: whole MLPs

    def layers(self, total: int) -> int:
        """How many of `total` layers are checkpointed."""
        return 0 if self.every == 0 else math.ceil(total / self.every)

    def describe(self, total: int) -> str:
        if self.every == 0:
            return "no gradient checkpointing"
        where = " with their inputs offloaded to host memory" if self.offload else ""
        tiled = f", each MLP in chunks of {self.mlp_chunk:,} positions" if self.mlp_chunk else ""
        return f"gradient checkpointing on {self.layers(total)} of {total} layers{where}{tiled}"


NO_CHECKPOINTING = Checkpointing()


@dataclass(frozen=True)
class Budget:
    """How many tokens one forward/backward pass may hold, and why."""

    tokens: int  # tokens one forward+backward pass may hold (>= MIN_TOKENS)
    free_bytes: int  # memory free on the device when measured
    bytes_per_token: int  # estimated training memory per token of one pass
    explanation: str  # one or two sentences with the figures, for the job log
    checkpointing: Checkpointing = NO_CHECKPOINTING  # what the pass must run with
    longest_fits: int | None = None  # the longest sequence memory allows at all; None: any


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
    shape: ModelShape,
    dtype_bytes: int,
    fp32_adapter_inputs: bool,
    checkpointed: bool | Checkpointing,
) -> int:
    """Training memory per token of a pass: the formula of the module docstring
    (`checkpointed=True` is every layer checkpointed, nothing offloaded)."""
    h, i, q, kv, s = shape.hidden, shape.intermediate, shape.q_dim, shape.kv_dim, dtype_bytes
    adapter_inputs = 4 * (5 * h + q + i) if fp32_adapter_inputs else s * (2 * h + q + i)
    layer = adapter_inputs + s * (2 * q + 2 * kv) + 3 * s * i + 8 * h
    if shape.qk_norm:
        layer += 4 * (q + kv)
    if isinstance(checkpointed, bool):
        checkpointed = Checkpointing(every=1) if checkpointed else NO_CHECKPOINTING
    # A recomputed layer's backward pass: its activations and their gradients, at most as
    # large again, and the MLP's two intermediate gradients (calibrated on an H100 at 131,072
    # and 262,144 tokens; docs/benchmarks.md). Tiled, the MLP's part is a chunk's, fixed
    # (`tiled_mlp_bytes`); the MLP's output and its gradient stay whole.
    # Offloaded, the measured peak was about half that (runs Q and S on an H200: 0.21 MiB a
    # token where this said 0.45, 0.16 where it said 0.34), so there the recomputed layer's
    # activations count once; the estimate stays 23-30% above what was measured.
    twice = 1 if checkpointed.offload else 2
    recompute = twice * layer + 2 * s * i
    if checkpointed.mlp_chunk:
        mlp = _mlp_bytes(shape, dtype_bytes, fp32_adapter_inputs)
        recompute = twice * (layer - mlp) + 2 * s * h
    return _layers_peak(shape.layers, checkpointed, layer, recompute, s * h) + 4 * h + s * h


def _mlp_bytes(shape: ModelShape, dtype_bytes: int, fp32_adapter_inputs: bool) -> int:
    """Per token, what a layer's MLP keeps: SwiGLU's three intermediates and the down
    projection's adapter input."""
    i, s = shape.intermediate, dtype_bytes
    return 3 * s * i + (4 if fp32_adapter_inputs else s) * i


def tiled_mlp_bytes(
    shape: ModelShape, dtype_bytes: int, fp32_adapter_inputs: bool, chunk: int
) -> int:
    """A tiled MLP's chunk in its backward pass: its activations, their gradients and the
    intermediate gradients, for `chunk` positions."""
    return (
        2
        * chunk
        * (_mlp_bytes(shape, dtype_bytes, fp32_adapter_inputs) + dtype_bytes * shape.intermediate)
    )


def _layers_peak(
    layers: int, checkpointing: Checkpointing, layer: int, recompute: int, layer_input: int
) -> int:
    """The most the decoder layers hold at once, per token. After the forward pass: every kept
    layer's activations and every checkpointed layer's input (on the host if offloaded).
    While the backward pass recomputes checkpointed layer j, the layers above j are already
    freed: what the layers below j hold, j's input and the recomputed layer's `recompute`."""
    if checkpointing.every == 0:
        return layers * layer
    stored = 0 if checkpointing.offload else layer_input
    held = [stored if i % checkpointing.every == 0 else layer for i in range(layers)]
    recomputing = [
        sum(held[:j]) + layer_input + recompute for j in range(0, layers, checkpointing.every)
    ]
    return max(sum(held), *recomputing)


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
    """Memory a pass needs whatever its tokens: logit chunks, the adapter's optimizer state,
    and for an adapted output layer its merged weight and that weight's fp32 gradient
    (forward.py's `linear_weight`)."""
    chunk_tokens = max(64, CHUNK_BYTES // (4 * shape.vocab))  # as forward.py chunks
    logits = LOGIT_BUFFERS * 4 * chunk_tokens * shape.vocab
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    get_head = getattr(model, "get_output_embeddings", None)
    adapted_head = isinstance(get_head() if get_head else None, BaseTunerLayer)
    merged_head = (2 + 4) * shape.vocab * shape.hidden if adapted_head else 0
    return logits + OPTIMIZER_BYTES_PER_PARAM * trainable + merged_head


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
    fixed: int  # fixed_bytes
    dtype_bytes: int
    fp32_adapter_inputs: bool
    always_checkpointed: bool  # every layer, whatever the pass (the QLoRA path)
    selective: bool  # transformers can checkpoint some layers and offload (>= 5.x)

    @property
    def per_token(self) -> int:
        """bytes_per_token for this model as loaded (no checkpointing unless always)."""
        return self.per_token_with(Checkpointing(every=1 if self.always_checkpointed else 0))

    def per_token_with(self, checkpointing: Checkpointing) -> int:
        return bytes_per_token(
            self.shape, self.dtype_bytes, self.fp32_adapter_inputs, checkpointing
        )

    def choices(self, device: torch.device) -> list[Checkpointing]:
        """What a pass may run with, the fastest first: no checkpointing, then more and more
        layers checkpointed, then (on CUDA) every layer with its input offloaded."""
        layers = self.shape.layers
        by_count = {Checkpointing(every=n).layers(layers): n for n in range(1, layers + 1)}
        partial = [Checkpointing(every=by_count[k]) for k in sorted(by_count)]
        if not self.selective:
            partial = [Checkpointing(every=1)]
        choices = [Checkpointing(every=1)] if self.always_checkpointed else [NO_CHECKPOINTING]
        if not self.always_checkpointed:
            choices += partial
        if device.type == "cuda" and self.selective:
            choices.append(Checkpointing(every=1, offload=True))
            choices.append(Checkpointing(every=1, offload=True, mlp_chunk=MLP_CHUNK_TOKENS))
        return choices

    def fixed_with(self, checkpointing: Checkpointing) -> int:
        """`fixed`, and a tiled MLP's chunk when the MLPs are tiled."""
        if not checkpointing.mlp_chunk:
            return self.fixed
        chunk = tiled_mlp_bytes(
            self.shape, self.dtype_bytes, self.fp32_adapter_inputs, checkpointing.mlp_chunk
        )
        return self.fixed + chunk


def estimate(model: PreTrainedModel | PeftModel, placement: Placement) -> Estimate:
    """Walk the model once for everything the budget needs besides the free memory."""
    shape = ModelShape.of(model)
    dtype_bytes = torch.finfo(placement.dtype).bits // 8
    fp32_inputs = casts_adapter_inputs(model, placement.dtype)
    always = is_checkpointed(model)
    enable = getattr(model, "activation_checkpointing_enable", None)
    selective = enable is not None and "every_n_layers" in inspect.signature(enable).parameters
    return Estimate(shape, fixed_bytes(model, shape), dtype_bytes, fp32_inputs, always, selective)


def use_checkpointing(model: torch.nn.Module, checkpointing: Checkpointing) -> None:
    """Turn transformers' gradient checkpointing on `model`'s layers on or off, as chosen
    (`model` a transformers model; the newer names first, the older where they are missing),
    and the MLPs' tiling."""
    tile_mlps(model, checkpointing.mlp_chunk)
    if checkpointing.every == 0:
        _method(model, "activation_checkpointing_disable", "gradient_checkpointing_disable")()
        return
    kwargs = {"use_reentrant": False}
    if getattr(model, "activation_checkpointing_enable", None) is None:  # transformers 4.x
        _method(model, "gradient_checkpointing_enable")(gradient_checkpointing_kwargs=kwargs)
        return
    enable = _method(model, "activation_checkpointing_enable")
    enable(kwargs, every_n_layers=checkpointing.every, offload=checkpointing.offload)


def tile_mlps(model: torch.nn.Module, chunk: int) -> None:
    """Run each decoder layer's MLP (the modules named `mlp`) in chunks of `chunk` positions,
    each under PyTorch's activation checkpointing, so that only one chunk's intermediate
    activations exist at once in the forward and the backward pass; `chunk` 0 restores the
    MLPs. An MLP acts on each position alone, so the chunks' outputs are the MLP's output
    (the idea of DeepSpeed's and Liger's TiledMLP, on `torch.utils.checkpoint`)."""
    for name, mlp in model.named_modules():
        if not name.endswith(".mlp"):
            continue
        untiled = mlp.__dict__.get(TILED_ATTR)
        if untiled is not None:  # back to the forward it had (the class's, or Liger's)
            del mlp.__dict__[TILED_ATTR]
            if untiled is _CLASS_FORWARD:
                mlp.__dict__.pop("forward", None)
            else:
                mlp.forward = untiled
        if chunk:
            forward = mlp.__dict__.get("forward", _CLASS_FORWARD)
            mlp.__dict__[TILED_ATTR] = forward
            mlp.forward = functools.partial(_tiled_forward, mlp.forward, chunk)


_CLASS_FORWARD = object()  # marks an MLP whose forward was its class's, not the instance's


def _tiled_forward(forward: Callable[[Tensor], Tensor], chunk: int, x: Tensor) -> Tensor:
    if not torch.is_grad_enabled() or x.shape[-2] <= chunk:
        return forward(x)
    parts = [checkpoint(forward, part, use_reentrant=False) for part in x.split(chunk, dim=-2)]
    return torch.cat(parts, dim=-2)


def _method(model: torch.nn.Module, *names: str) -> Callable[..., None]:
    """The first of `names` that `model` has as a method."""
    for name in names:
        found = getattr(model, name, None)
        if callable(found):
            return found  # type: ignore[no-any-return]
    raise AttributeError(f"{type(model).__name__} has none of {names}")


def pass_token_budget(
    model: PreTrainedModel | PeftModel,
    placement: Placement,
    *,
    free_bytes: int | None = None,
    longest: int = 0,
) -> Budget:
    """How many tokens one forward/backward pass of `model` may hold in free memory.

    Args:
        model: The PEFT model being trained (its weights already on the device).
        placement: Where it lives; its dtype sizes the activations.
        free_bytes: Free memory to assume instead of measuring it (for tests and planning).
        longest: The longest sequence a pass must hold (it cannot be split): the budget
            turns gradient checkpointing on, on as few layers as make it fit.

    Returns:
        The budget: free memory less a margin (10% and 1 GiB) and the fixed costs, divided
        by the estimated bytes per token; at least MIN_TOKENS, and on the CPU at most
        CPU_MAX_TOKENS.
    """
    return budget_of(estimate(model, placement), placement, free_bytes=free_bytes, longest=longest)


def budget_of(
    known: Estimate,
    placement: Placement,
    *,
    free_bytes: int | None = None,
    longest: int = 0,
    scale: float = 1.0,
) -> Budget:
    """`pass_token_budget` from an estimate made earlier: only the free memory is read.
    `scale` (below 1 after the device ran out of memory) shrinks the usable memory."""
    device = placement.device
    free = free_memory(device) if free_bytes is None else free_bytes
    fixed, shape = known.fixed, known.shape
    usable = int(free * (1 - MARGIN_FRACTION) * scale) - MARGIN_BYTES - fixed
    choices = known.choices(device)
    # A pass holds at least MIN_TOKENS whatever the estimate says (the floor below), so a
    # sequence that short always counts as fitting.
    fitting = [c for c in choices if max(MIN_TOKENS, _holds(known, c, usable)) >= longest]
    checkpointing = fitting[0] if fitting else max(choices, key=lambda c: _holds(known, c, usable))
    per_token = known.per_token_with(checkpointing)
    tokens = max(MIN_TOKENS, (usable - known.fixed_with(checkpointing) + fixed) // per_token)
    note = " (the minimum)" if tokens == MIN_TOKENS else ""
    if device.type != "cuda" and tokens > CPU_MAX_TOKENS:
        tokens, note = CPU_MAX_TOKENS, " (the CPU cap)"
    dtype = str(placement.dtype).removeprefix("torch.")
    explanation = (
        f"{'free' if device.type == 'cuda' else 'available'} memory {free / GiB:.1f} GiB on "
        f"{device}, {max(usable, 0) / GiB:.1f} GiB usable "
        f"after a margin ({_margin(scale)} + 1 GiB) and {fixed / GiB:.1f} GiB for logit chunks "
        f"and optimizer state; ~{per_token / MiB:.2f} MiB per token (estimated for "
        f"{shape.layers} layers, hidden {shape.hidden}, {dtype}, "
        f"{checkpointing.describe(shape.layers)}) -> one pass holds {tokens:,} tokens{note}"
    )
    plain = choices[0]
    if checkpointing != plain:
        explanation += (
            f"; {checkpointing.describe(shape.layers)} because the longest sequence "
            f"({longest:,} tokens) does not fit a pass with {plain.describe(shape.layers)} "
            f"({max(0, _holds(known, plain, usable)):,} tokens): a checkpointed layer keeps only "
            "its input and runs its forward pass again in the backward pass"
        )
    longest_fits = max(MIN_TOKENS, *(_holds(known, c, usable) for c in choices))
    if longest > longest_fits:
        explanation += (
            f"; the longest sequence ({longest:,} tokens) does not fit even so: lower "
            f"max_length to {longest_fits:,} or less, or train with quantization 4bit"
        )
    return Budget(tokens, free, per_token, explanation, checkpointing, longest_fits)


def _holds(known: Estimate, checkpointing: Checkpointing, usable: int) -> int:
    """The tokens one pass may hold with `checkpointing` in `usable` bytes of device memory
    (offloaded inputs also need room in host memory)."""
    tokens = (usable - known.fixed_with(checkpointing) + known.fixed) // known.per_token_with(
        checkpointing
    )
    if checkpointing.offload:
        s, h = known.dtype_bytes, known.shape.hidden
        host = int(available_ram() * (1 - MARGIN_FRACTION))
        tokens = min(tokens, host // (checkpointing.layers(known.shape.layers) * s * h))
    return tokens


def _margin(scale: float) -> str:
    if scale >= 1:
        return "10%"
    return f"10%, then {1 - scale:.0%} of the rest after running out of memory"
