"""The decode step of a Llama-family model in nine kernels a layer.

A decode step of a small model at a few dozen rows is launch-bound, not bandwidth-bound: each
of its kernels reads a few MB, and transformers' layer code runs about eighteen of them a layer
(three projections for q, k and v, two for the MLP's gate and up, two norms of the heads, the
rotary embedding, the activation and its product, the residual adds and their norms), each
paying a few microseconds however little it reads. `FusedDecode` runs the same arithmetic as
nine:

    add + RMSNorm (Liger)  ->  q|k|v (one matmul)  ->  heads' RMSNorm + RoPE (one kernel)
    ->  attention (the cache's kernel)  ->  o  ->  add + RMSNorm  ->  gate|up (one matmul)
    ->  SiLU(gate) * up (one kernel)  ->  down

The projections of q, k and v (and of gate and up) are one matrix each: a copy of the layer's
weights side by side, with the LoRA adapter folded in (W + s B A, PEFT's own delta, made at
each prefill from the adapter as it is then), so it replaces prefix.MergedAdapter's copies and
costs about as much memory (the fused projections' weights again, and the adapted others').
The prefill runs the same arithmetic at every prompt position (the attention causal, through
PyTorch's SDPA), so prefill and steps compute with the same weights, and a prefill is about a
dozen launches a layer rather than transformers' layer code (36 ms of a call's fixed cost for
one 128-token prompt on Qwen3-0.6B, docs/benchmarks.md run AE).

It takes the models whose layers are exactly Llama's (Llama, Mistral without a sliding window,
Qwen2, Qwen3 with its heads' norms); others decode through transformers' layers as before. The
kernels are Triton (CUDA); on the CPU the same steps run as plain torch operations, which is
what the CPU tests compare against transformers' layers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from peft import PeftModel
from peft.tuners.lora.layer import Linear as LoraLinear
from torch import Tensor, nn

from thinker.engine.local import fused_kernels
from thinker.engine.local.decode import adapters_enabled

log = logging.getLogger(__name__)
# Architectures whose decoder layer is Llama's: pre-norm RMSNorm (weight * normed, the norm
# cast to the model's dtype first), q/k/v/o and gate/up/down projections, SiLU, rotate-half
# RoPE; Qwen3 adds an RMSNorm of each query and key head before the RoPE.
FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


class StepCache(Protocol):
    """What the step needs of prefix.SharedPromptCache: one layer's attention of the step's
    token, (B, heads, 1, head dim) in, (B, 1, query heads, head dim) out."""

    def decode(self, layer: int, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tensor:
        """The attention of `layer`, keeping the step's key and value."""
        ...

    def advanced(self) -> None:
        """One token decoded."""
        ...


class PromptKeeper(Protocol):
    """Where the prefill leaves a layer's keys and values (G, kv heads, P, head dim)."""

    def __call__(self, layer: int, key: Tensor, value: Tensor) -> None: ...


@dataclass
class _Linear:
    """One projection of the fused step: the module(s) it comes from and the weight used."""

    modules: list[nn.Module]  # the model's layers (LoRA or plain), in the order stacked
    weight: Tensor  # (sum of outputs, inputs): a copy, or the base weight itself
    bias: Tensor | None
    copied: bool  # weight is this object's own copy (refreshed at each prefill)


@dataclass
class _Layer:
    qkv: _Linear
    o: _Linear
    gate_up: _Linear
    down: _Linear
    input_norm: tuple[Tensor, float]
    post_norm: tuple[Tensor, float]
    q_norm: tuple[Tensor, float] | None
    k_norm: tuple[Tensor, float] | None
    scale: float


class FusedDecode:
    """Fused weights of one model and its decode step (see the module's docstring)."""

    def __init__(self, model: nn.Module, decoder: Any, lm_head: nn.Module) -> None:
        """`decoder`: the transformers model under the LM head (`embed_tokens`, `layers`,
        `norm`, `rotary_emb`), whose attributes each family names alike."""
        config: Any = model.config
        self._model = model
        self._adapted = _lora_layers(model)
        self.q_heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.q_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.q_heads
        self._rotary = decoder.rotary_emb
        self._embed: Tensor = decoder.embed_tokens.weight
        self._final_norm = _norm(decoder.norm)
        self._layers = [
            _Layer(
                qkv=_stack(
                    [layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj]
                ),
                o=_stack([layer.self_attn.o_proj]),
                gate_up=_stack([layer.mlp.gate_proj, layer.mlp.up_proj]),
                down=_stack([layer.mlp.down_proj]),
                input_norm=_norm(layer.input_layernorm),
                post_norm=_norm(layer.post_attention_layernorm),
                q_norm=_norm(layer.self_attn.q_norm)
                if hasattr(layer.self_attn, "q_norm")
                else None,
                k_norm=_norm(layer.self_attn.k_norm)
                if hasattr(layer.self_attn, "k_norm")
                else None,
                scale=float(layer.self_attn.scaling),
            )
            for layer in decoder.layers
        ]
        self._lm_head = _stack([lm_head])
        self._table: tuple[Tensor, Tensor] | None = None  # cos, sin: (positions, head dim)

    @classmethod
    def of(cls, model: nn.Module) -> FusedDecode | None:
        """For a model of FAMILIES whose adapter (if any) is plain LoRA on linear layers, when
        the card has room for the copies (twice their size free); else None."""
        base: Any = model.get_base_model() if isinstance(model, PeftModel) else model
        config = getattr(base, "config", None)
        if getattr(config, "model_type", None) not in FAMILIES or not _plain_layers(base, config):
            return None
        if any(hasattr(m, "lora_A") and not mergeable(m) for m in model.modules()):
            return None
        size = _copies_size(base)
        device = base.lm_head.weight.device
        if device.type == "cuda" and 2 * size > torch.cuda.mem_get_info(device)[0]:
            log.info(
                "no room for the fused decode's weights (%.1f GiB): decoding through the layers",
                size / 2**30,
            )
            return None
        try:
            fused = cls(model, base.model, base.lm_head)
        except torch.OutOfMemoryError:
            log.info("no room for the fused decode's weights: decoding through the layers")
            return None
        return fused

    def current(self) -> bool:
        """Whether the model's adapted layers are still those this copy was made for (an
        adapter of another shape added to a shared model adapts other layers)."""
        layers = _lora_layers(self._model)
        return len(layers) == len(self._adapted) and all(
            a is b for a, b in zip(layers, self._adapted, strict=True)
        )

    def refresh(self) -> None:
        """The weights as the model computes them now: base + the live adapter, or the base
        alone inside `disable_adapter()`."""
        on = adapters_enabled(self._model)
        for linear in self._linears():
            if not linear.copied:
                continue
            first = 0
            for module in linear.modules:
                base = base_linear(module)
                rows = linear.weight[first : first + base.out_features]
                adapter = _adapter_of(module) if on else None
                if adapter is not None:
                    _fold(module, adapter, base.weight, rows)
                else:
                    rows.copy_(base.weight)
                first += base.out_features

    def prepare(self, positions: int) -> None:
        """The rotary embedding's cos and sin for positions 0 .. positions - 1, from the
        model's own rotary module (its scaling included)."""
        if self._table is not None and self._table[0].shape[0] >= positions:
            return
        like = self._embed[:1]
        ids = torch.arange(positions, device=like.device)[None]
        cos, sin = self._rotary(like[None], ids)
        self._table = (cos[0].contiguous(), sin[0].contiguous())

    def step(self, token_B1: Tensor, position_B1: Tensor, cache: StepCache) -> Tensor:
        """One token for every row: the next token's logits (B, vocab), in the model's dtype.
        Advances the positions and the cache, as a forward through the layers does."""
        assert self._table is not None, "prepare first"
        cos, sin = self._table
        triton_ok = _triton_on(self._embed)
        x = F.embedding(token_B1[:, 0], self._embed)
        residual = x
        h = _rms_norm(x, *self._layers[0].input_norm)
        for i, layer in enumerate(self._layers):
            if i > 0:
                h, residual = _add_rms_norm(x, residual, *layer.input_norm)
            qkv = _project(h, layer.qkv)
            q, k, v = _heads(
                qkv, layer, position_B1[:, 0], cos, sin, self.q_heads, self.kv_heads,
                self.head_dim, triton_ok,
            )  # fmt: skip
            out = cache.decode(i, q[:, :, None], k[:, :, None], v[:, :, None], layer.scale)
            x = _project(out.reshape(out.shape[0], -1), layer.o)
            h, residual = _add_rms_norm(x, residual, *layer.post_norm)
            x = _project(_silu_mul(_project(h, layer.gate_up), triton_ok), layer.down)
        h, _ = _add_rms_norm(x, residual, *self._final_norm)
        position_B1.add_(1)
        cache.advanced()
        return _project(h, self._lm_head)

    def prefill(self, ids_GP: Tensor, lengths: list[int], keep: PromptKeeper) -> Tensor:
        """Prompts right-padded to one length (G, P): each one's last token's logits (G,
        vocab, fp32), each layer's keys and values handed to `keep` (G, kv heads, P, head
        dim). The step's arithmetic for every position, with causal attention over the prompt
        (SDPA): the padding after a prompt comes later, so no real position attends to it."""
        assert self._table is not None, "prepare first"
        cos, sin = self._table
        triton_ok = _triton_on(self._embed)
        g, p = ids_GP.shape
        positions = torch.arange(p, device=ids_GP.device).repeat(g)
        x = F.embedding(ids_GP.reshape(-1), self._embed)
        residual = x
        h = _rms_norm(x, *self._layers[0].input_norm)
        for i, layer in enumerate(self._layers):
            if i > 0:
                h, residual = _add_rms_norm(x, residual, *layer.input_norm)
            q, k, v = _heads(
                _project(h, layer.qkv), layer, positions, cos, sin, self.q_heads,
                self.kv_heads, self.head_dim, triton_ok,
            )  # fmt: skip
            q, k, v = (t.view(g, p, *t.shape[1:]).transpose(1, 2) for t in (q, k, v))
            keep(i, k, v)
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=layer.scale, enable_gqa=True
            )
            x = _project(out.transpose(1, 2).reshape(g * p, -1), layer.o)
            h, residual = _add_rms_norm(x, residual, *layer.post_norm)
            x = _project(_silu_mul(_project(h, layer.gate_up), triton_ok), layer.down)
        last = (
            torch.tensor(lengths, device=ids_GP.device)
            - 1
            + p * torch.arange(g, device=ids_GP.device)
        )
        h, _ = _add_rms_norm(x[last], residual[last], *self._final_norm)
        return _project(h, self._lm_head).float()

    def _linears(self) -> Iterator[_Linear]:
        for layer in self._layers:
            yield from (layer.qkv, layer.o, layer.gate_up, layer.down)
        yield self._lm_head


def _plain_layers(base: Any, config: Any) -> bool:
    """Whether the model's layers are Llama's, in full attention, SiLU, no tensor slicing."""
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) != 1:
        return False
    decoder = getattr(base, "model", None)
    layers = getattr(decoder, "layers", None)
    if layers is None or not hasattr(decoder, "rotary_emb") or not hasattr(base, "lm_head"):
        return False
    for layer in layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        names = ("q_proj", "k_proj", "v_proj", "o_proj")
        if attn is None or mlp is None or not all(hasattr(attn, n) for n in names):
            return False
        if getattr(attn, "sliding_window", None) is not None:
            return False
        if not all(hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj")):
            return False
        projections = [getattr(attn, n) for n in names]
        projections += [mlp.gate_proj, mlp.up_proj, mlp.down_proj]
        if not all(_plain_linear(m) for m in projections):
            return False
    return _plain_linear(base.lm_head)


def _plain_linear(module: nn.Module) -> bool:
    """A torch Linear of floating weights (not a 4-bit one), bare or under a LoRA layer."""
    base = module.get_base_layer() if isinstance(module, LoraLinear) else module
    return type(base) is nn.Linear and base.weight.dtype.is_floating_point


def _norm(module: nn.Module) -> tuple[Tensor, float]:
    """An RMSNorm's weight and epsilon (transformers' `variance_epsilon`, Liger's `eps`)."""
    eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        eps = module.eps
    weight = module.weight
    assert isinstance(weight, Tensor)
    return weight, float(eps)  # type: ignore[arg-type]


def base_linear(module: nn.Module) -> nn.Linear:
    base = module.get_base_layer() if isinstance(module, LoraLinear) else module
    assert isinstance(base, nn.Linear), f"a projection that is a {type(base).__name__}"
    return base


def _lora_layers(model: nn.Module) -> list[LoraLinear]:
    return [m for m in model.modules() if isinstance(m, LoraLinear)]


def mergeable(module: nn.Module) -> bool:
    """A LoRA layer whose delta folds into a plain weight (prefix.MergedAdapter's rule too)."""
    if not isinstance(module, LoraLinear):
        return False  # LoRA on an embedding or a convolution: not decoded here
    base = module.get_base_layer()
    return (
        type(base) is nn.Linear
        and base.weight.dtype.is_floating_point
        and len(module.active_adapters) == 1
        and not any(module.use_dora.values())
        and not module.merged
    )


def _fold(module: nn.Module, adapter: str, weight: Tensor, out: Tensor) -> None:
    """out = W + s B A: one addmm, the factors cast to W's dtype (the trainer's bf16 adapter
    matmuls take them so); PEFT's own delta for a layer that stores W transposed. A call's
    fixed cost on Qwen3-0.6B was 13.5 ms of `get_delta_weight`'s three launches a layer."""
    assert isinstance(module, LoraLinear)
    if module.fan_in_fan_out:
        torch.add(weight, module.get_delta_weight(adapter), out=out)
        return
    a: Tensor = module.lora_A[adapter].weight  # type: ignore[assignment]
    b: Tensor = module.lora_B[adapter].weight  # type: ignore[assignment]
    torch.addmm(
        weight, b.to(weight.dtype), a.to(weight.dtype), alpha=module.scaling[adapter], out=out
    )


def _adapter_of(module: nn.Module) -> str | None:
    """The active adapter of a LoRA layer that holds it; None for a plain layer or one that
    an adapter of another shape on a shared model leaves be."""
    if not isinstance(module, LoraLinear):
        return None
    (adapter,) = module.active_adapters
    return adapter if adapter in module.lora_A else None


def _copied(modules: list[nn.Module]) -> bool:
    """Whether a stack is a copy: several layers side by side, or an adapted one."""
    return len(modules) > 1 or any(isinstance(m, LoraLinear) for m in modules)


def _copies_size(base: nn.Module) -> int:
    """Bytes of the copies FusedDecode would make of `base`'s weights."""
    stacks: list[list[nn.Module]] = [[base.lm_head]]  # type: ignore[list-item]
    for layer in base.model.layers:  # type: ignore[union-attr]
        attn, mlp = layer.self_attn, layer.mlp
        stacks += [[attn.q_proj, attn.k_proj, attn.v_proj], [attn.o_proj]]
        stacks += [[mlp.gate_proj, mlp.up_proj], [mlp.down_proj]]
    return sum(
        sum(base_linear(m).weight.nbytes for m in stack) for stack in stacks if _copied(stack)
    )


def _stack(modules: list[nn.Module]) -> _Linear:
    """One weight for `modules` side by side: a copy when there are several or one is
    adapted (refreshed at each prefill), else the module's own weight."""
    bases = [base_linear(m) for m in modules]
    copied = _copied(modules)
    if copied:
        first = bases[0].weight
        rows = sum(b.out_features for b in bases)
        weight = torch.empty((rows, first.shape[1]), dtype=first.dtype, device=first.device)
    else:
        weight = bases[0].weight
    biases = [b.bias for b in bases]
    bias = None
    if any(b is not None for b in biases):
        bias = torch.cat(
            [
                b.detach() if b is not None else torch.zeros_like(base.weight[:, 0])
                for b, base in zip(biases, bases, strict=True)
            ]
        )
    return _Linear(modules, weight, bias, copied)


def _project(x: Tensor, linear: _Linear) -> Tensor:
    return F.linear(x, linear.weight, linear.bias)


def _triton_on(like: Tensor) -> bool:
    return (
        fused_kernels.available() and like.is_cuda and like.dtype in (torch.bfloat16, torch.float16)
    )


# The layer's small operations: Liger's add + RMSNorm where installed, Triton kernels of ours
# for the heads and the activation on CUDA; transformers' arithmetic in torch otherwise.


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    liger = _liger()
    if liger is not None and x.is_cuda:
        return liger[0].apply(x, weight, eps, 0.0, "llama", False)  # type: ignore[no-any-return]
    return _torch_rms_norm(x, weight, eps)


def _add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(RMSNorm(x + residual), x + residual)."""
    liger = _liger()
    if liger is not None and x.is_cuda:
        normed, summed = liger[1].apply(x, residual, weight, eps, 0.0, "llama", False)
        return normed, summed
    summed = residual + x
    return _torch_rms_norm(summed, weight, eps), summed


def _torch_rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """transformers' LlamaRMSNorm."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


_LIGER: tuple[Any, Any] | None | bool = False  # False: not looked up yet


def _liger() -> tuple[Any, Any] | None:
    """Liger's RMSNorm and fused add + RMSNorm functions, or None where not installed."""
    global _LIGER
    if _LIGER is False:
        try:
            from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        except ImportError:  # the optional `gpu` extra
            _LIGER = None
        else:
            _LIGER = (LigerRMSNormFunction, LigerFusedAddRMSNormFunction)
    return _LIGER  # type: ignore[return-value]


def _heads(
    qkv: Tensor, layer: _Layer, position_B: Tensor, cos: Tensor, sin: Tensor,
    q_heads: int, kv_heads: int, head_dim: int, triton_ok: bool,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The step's query (B, q heads, D), key and value (B, kv heads, D each, with the same
    strides): the heads' norms (Qwen3) and the rotary embedding applied to query and key."""
    if triton_ok:
        q_norm, k_norm = layer.q_norm, layer.k_norm
        return fused_kernels.heads(
            qkv, q_norm, k_norm, position_B, cos, sin, q_heads, kv_heads, head_dim
        )
    b = qkv.shape[0]
    q, k, v = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q, k, v = (
        q.view(b, q_heads, head_dim),
        k.view(b, kv_heads, head_dim),
        v.reshape(b, kv_heads, head_dim),
    )
    if layer.q_norm is not None and layer.k_norm is not None:
        q, k = _torch_rms_norm(q, *layer.q_norm), _torch_rms_norm(k, *layer.k_norm)
    cos_B1D, sin_B1D = cos[position_B][:, None], sin[position_B][:, None]
    return _rope(q, cos_B1D, sin_B1D), _rope(k, cos_B1D, sin_B1D), v


def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """transformers' apply_rotary_pos_emb for one tensor."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos) + (rotated * sin)


def _silu_mul(gate_up: Tensor, triton_ok: bool) -> Tensor:
    """SiLU(gate) * up of the stacked gate|up projection (B, 2 I) -> (B, I)."""
    if triton_ok:
        return fused_kernels.silu_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up
