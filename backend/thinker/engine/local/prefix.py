"""Decoding several sampling calls at once, each call's samples sharing its prompt's KV cache.

An RL step asks for G groups of n samples: G prompts, each continued n ways. Decoded call by
call, each with its prompt repeated n times, a step reads every prompt n times over and the
card runs G small batches one after another. `PrefixDecoder` decodes all the calls as one
batch of B = sum(n) rows instead:

- each prompt is prefilled once, and its keys and values are kept once (G x P per layer);
- each row keeps only the keys and values of its own new tokens (B x T per layer);
- a row's attention is one softmax over both: its prompt's columns, computed for the n rows
  of a group as n query positions against the one prompt (so those keys are read once a
  step for the group), then its own columns. The arithmetic is transformers' eager attention
  (products in the model's dtype, softmax in fp32; the query scaled before its products),
  so the logits are those of the plain decode to rounding.

A LoRA adapter is folded into a copy of each adapted weight for the decode (W + s B A, made
at each prefill from the adapter as it is then): a step then runs one matmul per layer instead
of three plus the adapter's casts, scale and add, which on a small model are most of a step's
kernels. The copy costs the adapted weights' memory again; where the card lacks it (or the
adapter is not plain LoRA on plain linear layers), the adapter runs unmerged. For Llama-family
models on CUDA the prefill and the step do not run the model's layers: fused_decode.FusedDecode
holds the folded weights stacked (q|k|v, gate|up) and runs a step's layer as nine kernels.

It reaches the model through the attention hook (attention.py): a forward carries this
decoder's cache object, whose `__call__` is the attention of every layer, so the model's own
code (projections, norms, rotary embedding, adapters) runs unchanged.

On CUDA the one-token step is captured as a CUDA graph and replayed. A step attends to its
own columns only up to the end of the current TOKEN_BUCKET, so there is one graph per bucket
(sharing one memory pool): the first steps of a long decode do not read the empty columns
after them. The capture is kept per model for the last layout (groups, lengths, adapter on or
off) and reused by the next call of the same layout, so an RL loop captures once.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from peft import PeftModel
from peft.tuners.lora.layer import Linear as LoraLinear
from torch import Tensor, nn
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from thinker.engine.local import attention, decode_attention, fast
from thinker.engine.local.decode import adapters_enabled
from thinker.engine.local.fused_decode import FusedDecode, base_linear, mergeable

log = logging.getLogger(__name__)
PROMPT_BUCKET = 64  # prompt columns round up to this, so nearby prompt lengths share a capture
TOKEN_BUCKET = 128  # a row's own columns: attended up to the end of the current bucket
PREFILL_TOKENS = 16384  # prompts prefilled together: padded tokens a forward may take
# The decode step's forwards carry a 4-D mask, so that transformers builds none (the hook
# masks by itself); it is never read.
_UNUSED_MASK = torch.ones((1, 1, 1, 1), dtype=torch.bool)


def can_decode(model: nn.Module) -> bool:
    """Whether `model`'s attention takes the hook (full causal attention in every layer)."""
    return attention.takes_hooks(model)


@dataclass(frozen=True)
class Layout:
    """The static shape of a decode: rows per group, prompt and new-token columns, adapters."""

    counts: tuple[int, ...]
    prompt_columns: int
    token_columns: int
    adapter: Literal["fused", "merged", "unmerged", "off"]

    @property
    def rows(self) -> int:
        return sum(self.counts)


@dataclass
class SharedPromptCache:
    """Every layer's keys and values of one decode; called as the attention of each layer.

    Row b belongs to group `group_B[b]`; `slot_B[b]` is its place in a (G x widest group)
    grid, in which each group's rows are consecutive query positions against its prompt.
    """

    layout: Layout
    prompt_k: list[Tensor]  # per layer (G, kv heads, prompt columns, head dim)
    prompt_v: list[Tensor]
    token_k: list[Tensor]  # per layer (B, kv heads, token columns, head dim)
    token_v: list[Tensor]
    prompt_bias_B11P: Tensor  # 0 on a row's prompt positions, -inf on the padding after it
    slot_B: Tensor
    step_1: Tensor  # the column of the token being decoded (the same for every row)
    columns_T: Tensor  # 0 .. token columns - 1
    prefilling: int | None = None  # the first group whose prompts the current forward prefills
    window: int = TOKEN_BUCKET  # own columns the current step attends to
    _bias: Tensor | None = field(default=None, repr=False)  # this step's mask, both parts

    @classmethod
    def allocate(
        cls, layout: Layout, config: Any, dtype: torch.dtype, device: torch.device
    ) -> SharedPromptCache:
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        layers = config.num_hidden_layers
        g, b = len(layout.counts), layout.rows

        def zeros(*shape: int) -> list[Tensor]:  # zeros: masked columns must hold no NaN
            return [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]

        widest = max(layout.counts)
        group_B = torch.repeat_interleave(torch.arange(g), torch.tensor(layout.counts))
        first_of_group = torch.tensor([0, *layout.counts]).cumsum(0)[:-1]
        slot_B = group_B * widest + torch.arange(b) - first_of_group[group_B]
        common = (
            torch.zeros((b, 1, 1, layout.prompt_columns), dtype=dtype, device=device),
            slot_B.to(device),
            torch.zeros(1, dtype=torch.long, device=device),
            torch.arange(layout.token_columns, device=device),
        )
        if fast.enabled("DECODE_KERNEL", device) and decode_attention.available(
            device, dtype, head_dim
        ):
            columns = layout.prompt_columns + layout.token_columns
            return KernelPromptCache(
                layout,
                zeros(g, layout.prompt_columns, heads, head_dim),
                zeros(g, layout.prompt_columns, heads, head_dim),
                zeros(b, heads, layout.token_columns, head_dim),
                zeros(b, heads, layout.token_columns, head_dim),
                *common,
                group_B=group_B.to(device=device, dtype=torch.int32),
                prompt_used=torch.zeros(g, dtype=torch.int32, device=device),
                own_used=torch.ones(b, dtype=torch.int32, device=device),
                splits=decode_attention.splits_for(b, heads, columns, device),
            )
        if flash_decode_available(device, dtype, head_dim):
            query_heads = config.num_attention_heads
            return FlashPromptCache(
                layout,
                zeros(g, layout.prompt_columns, heads, head_dim),
                zeros(g, layout.prompt_columns, heads, head_dim),
                zeros(b, heads, layout.token_columns, head_dim),
                zeros(b, heads, layout.token_columns, head_dim),
                *common,
                cu_prompt_q=_offsets(layout.counts, device),
                cu_prompt_k=_offsets([layout.prompt_columns] * g, device),
                prompt_used=torch.zeros(g, dtype=torch.int32, device=device),
                cu_own_q=_offsets([query_heads // heads] * b * heads, device),
                cu_own_k=_offsets([layout.token_columns] * b * heads, device),
                own_used=torch.ones(b * heads, dtype=torch.int32, device=device),
            )
        return cls(
            layout,
            zeros(g, heads, layout.prompt_columns, head_dim),
            zeros(g, heads, layout.prompt_columns, head_dim),
            zeros(b, heads, layout.token_columns, head_dim),
            zeros(b, heads, layout.token_columns, head_dim),
            *common,
        )

    @property
    def windowed(self) -> bool:
        """Whether a step reads its own columns up to `window` (one graph per window), rather
        than up to each row's length."""
        return True

    @property
    def folded(self) -> bool:
        """Every group has the same number of rows: the slot grid is the rows themselves."""
        return len(set(self.layout.counts)) == 1

    def start(self, lengths: list[int]) -> None:
        """A new decode of this layout: the prompts' lengths, no token decoded yet."""
        self.set_prompt_lengths(lengths)
        self.step_1.zero_()

    def advanced(self) -> None:
        """One token decoded (recorded in a step's graph)."""
        self.step_1.add_(1)

    def set_prompt_lengths(self, lengths: list[int]) -> None:
        counts = torch.tensor(self.layout.counts)
        length_B = torch.repeat_interleave(torch.tensor(lengths), counts).to(self.slot_B.device)
        columns = torch.arange(self.layout.prompt_columns, device=self.slot_B.device)
        self.prompt_bias_B11P.copy_(
            torch.where(columns < length_B[:, None], 0.0, float("-inf"))[:, None, None]
        )

    def __call__(
        self,
        module: nn.Module,
        query_BHTD: Tensor,
        key_BHTD: Tensor,
        value_BHTD: Tensor,
        attention_mask: Tensor | None,
        dropout: float = 0.0,
        scaling: float | None = None,
        **kwargs: Any,
    ) -> tuple[Tensor, None]:
        layer: int = module.layer_idx  # type: ignore[assignment]
        if self.prefilling is not None:  # a few groups' prompts: keep their keys, attend as SDPA
            self.keep_prompts(layer, self.prefilling, key_BHTD, value_BHTD)
            return sdpa_attention_forward(
                module, query_BHTD, key_BHTD, value_BHTD, attention_mask, dropout, scaling, **kwargs
            )
        assert scaling is not None
        return self.decode(layer, query_BHTD, key_BHTD, value_BHTD, scaling), None

    def keep_prompts(self, layer: int, first: int, key_GHTD: Tensor, value_GHTD: Tensor) -> None:
        """Groups first .. first + G - 1, right-padded to one length (the padding's columns
        are masked)."""
        g, _, length, _ = key_GHTD.shape
        self.prompt_k[layer][first : first + g, :, :length] = key_GHTD
        self.prompt_v[layer][first : first + g, :, :length] = value_GHTD

    def decode(self, layer: int, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tensor:
        """One new token per row: (B, 1, query heads, head dim), as transformers expects."""
        b, q_heads, _, dim = query.shape
        kv_heads = key.shape[1]
        self.token_k[layer].index_copy_(2, self.step_1, key)
        self.token_v[layer].index_copy_(2, self.step_1, value)
        if layer == 0:  # the same for every layer of this step: one mask for both parts
            visible_T = self.columns_T[: self.window] <= self.step_1
            token_bias = torch.where(visible_T, 0.0, float("-inf")).to(query.dtype)
            self._bias = torch.cat(
                [self.prompt_bias_B11P, token_bias.expand(b, 1, 1, self.window)], dim=-1
            )
        assert self._bias is not None
        own_k = self.token_k[layer][:, :, : self.window]
        own_v = self.token_v[layer][:, :, : self.window]
        # The query heads that share a key head become rows of one product (GQA); scaled
        # once here rather than each part's scores.
        q_BKRD = query.reshape(b, kv_heads, q_heads // kv_heads, dim) * scale
        prompt_scores = self._to_rows(
            torch.matmul(self._to_groups(q_BKRD), self.prompt_k[layer].transpose(-1, -2))
        )
        own_scores = torch.matmul(q_BKRD, own_k.transpose(-1, -2))
        scores = torch.cat([prompt_scores, own_scores], dim=-1) + self._bias
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        prompt_probs, own_probs = probs.split([self.layout.prompt_columns, self.window], dim=-1)
        out_BKRD = self._to_rows(torch.matmul(self._to_groups(prompt_probs), self.prompt_v[layer]))
        out_BKRD = out_BKRD + torch.matmul(own_probs, own_v)
        return out_BKRD.reshape(b, 1, q_heads, dim)

    def _to_groups(self, x_BKRC: Tensor) -> Tensor:
        """(B, kv heads, r, C) -> (G, kv heads, widest * r, C): a group's rows side by side."""
        b, k, r, c = x_BKRC.shape
        g, widest = len(self.layout.counts), max(self.layout.counts)
        if not self.folded:
            x_BKRC = x_BKRC.new_zeros(g * widest, k, r, c).index_copy_(0, self.slot_B, x_BKRC)
        return x_BKRC.reshape(g, widest, k, r, c).transpose(1, 2).reshape(g, k, widest * r, c)

    def _to_rows(self, x_GKSC: Tensor) -> Tensor:
        """The inverse of `_to_groups`."""
        g, k, s, c = x_GKSC.shape
        widest = max(self.layout.counts)
        x = x_GKSC.view(g, k, widest, s // widest, c).transpose(1, 2).reshape(g * widest, k, -1, c)
        return x if self.folded else x.index_select(0, self.slot_B)


@dataclass
class _LengthsOnDevice(SharedPromptCache):
    """A cache whose kernels read each prompt's and each row's own length from the device
    (a step's graph advances them), with each group's prompt kept token-major
    ((columns, kv heads, head dim) per group)."""

    prompt_used: Tensor = field(kw_only=True)  # each group's prompt length (int32)
    own_used: Tensor = field(kw_only=True)  # each row's own tokens so far, this one included

    def start(self, lengths: list[int]) -> None:
        self.prompt_used.copy_(torch.tensor(lengths, dtype=torch.int32))
        self.own_used.fill_(1)
        self.step_1.zero_()

    def advanced(self) -> None:
        self.step_1.add_(1)
        self.own_used.add_(1)

    def keep_prompts(self, layer: int, first: int, key_GHTD: Tensor, value_GHTD: Tensor) -> None:
        g, _, length, _ = key_GHTD.shape
        self.prompt_k[layer][first : first + g, :length] = key_GHTD.transpose(1, 2)
        self.prompt_v[layer][first : first + g, :length] = value_GHTD.transpose(1, 2)


@dataclass
class FlashPromptCache(_LengthsOnDevice):
    """The shared-prompt cache for FlashAttention's varlen kernel (CUDA, bf16 or fp16).

    A step's attention is two kernel calls and their merge, not ~17 small kernels:

    - each group's rows as that group's queries against its prompt, so the prompt's keys are
      read once for the group (stored token-major, (columns, kv heads, head dim) per group);
    - each row's own tokens so far (`seqused_k` says how many, a device counter the step's
      graph advances), one sequence per row and key head whose queries are that key head's
      query heads: the kernel's tiles are 128 queries tall, so a sequence of one query would
      fill 1/128 of each and read its keys once per query head (stored head-major, (kv heads,
      columns, head dim) per row, so that each (row, key head) is one block of keys).

    The two partial softmaxes are combined by their log-sum-exps, as FlashInfer's cascade
    attention does.
    """

    cu_prompt_q: Tensor = field(kw_only=True)  # group g's rows: queries cu[g] .. cu[g + 1]
    cu_prompt_k: Tensor = field(kw_only=True)  # group g's prompt block starts
    cu_own_q: Tensor = field(kw_only=True)  # (row, key head) i: queries cu[i] .. cu[i + 1]
    cu_own_k: Tensor = field(kw_only=True)

    def decode(self, layer: int, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tensor:
        b, q_heads, _, dim = query.shape
        layout = self.layout
        kv_heads = key.shape[1]
        self.token_k[layer].index_copy_(2, self.step_1, key)
        self.token_v[layer].index_copy_(2, self.step_1, value)
        q_BHD = query.transpose(1, 2).reshape(b, q_heads, dim)
        widest = max(layout.counts)
        prompt_out, prompt_lse = _flash(
            q_BHD,
            self.prompt_k[layer].flatten(0, 1),
            self.prompt_v[layer].flatten(0, 1),
            self.cu_prompt_q,
            self.cu_prompt_k,
            widest,
            layout.prompt_columns,
            self.prompt_used,
            scale,
        )
        # Query head h reads key head h // (q_heads / kv_heads): the rows of q_BHD are
        # already (row, key head, its query heads), so the regrouping is a view.
        own_out, own_lse = _flash(
            q_BHD.view(b * q_heads, 1, dim),
            self.token_k[layer].view(-1, 1, dim),
            self.token_v[layer].view(-1, 1, dim),
            self.cu_own_q,
            self.cu_own_k,
            q_heads // kv_heads,
            self.window,
            self.own_used,
            scale,
        )
        own_out, own_lse = own_out.view(b, q_heads, dim), own_lse.view(b, q_heads)
        # softmax over both parts = each part's softmax weighted by its share of the mass.
        prompt_share_BH1 = torch.sigmoid(prompt_lse - own_lse).to(query.dtype)[..., None]
        out_BHD = torch.lerp(own_out, prompt_out, prompt_share_BH1)
        return out_BHD.view(b, 1, q_heads, dim)


@dataclass
class KernelPromptCache(_LengthsOnDevice):
    """The shared-prompt cache read by decode_attention's Triton kernel (CUDA, bf16 or fp16):
    one kernel a layer over each row's prompt and own tokens, each run read up to its length
    (device counters the step's graph advances), so one graph serves every step."""

    group_B: Tensor = field(kw_only=True)  # each row's group (int32)
    splits: int = field(kw_only=True)  # slices per (row, key head): decode_attention.splits_for

    @property
    def windowed(self) -> bool:
        return False

    def decode(self, layer: int, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tensor:
        b, q_heads, _, dim = query.shape
        out_BHD = decode_attention.attend(  # also keeps the step's key and value
            query[:, :, 0],
            key[:, :, 0],
            value[:, :, 0],
            self.prompt_k[layer],
            self.prompt_v[layer],
            self.token_k[layer],
            self.token_v[layer],
            self.group_B,
            self.prompt_used,
            self.own_used,
            scale,
            self.splits,
        )
        return out_BHD.view(b, 1, q_heads, dim)


def _offsets(sizes: Sequence[int], device: torch.device) -> Tensor:
    """0, then the running sums of `sizes`: the int32 boundaries FlashAttention takes."""
    return torch.tensor([0, *sizes], dtype=torch.int64).cumsum(0).to(torch.int32).to(device)


_LSE_HEADS_FIRST: bool | None = None  # the kernel's log-sum-exp layout, probed once


def flash_decode_available(device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    """Whether this torch's FlashAttention kernel can run the decode (CUDA, half precision,
    `seqused_k` in its signature) and is not turned off (THINKER_FAST_FLASH_DECODE=0)."""
    return (
        device.type == "cuda"
        and dtype in (torch.bfloat16, torch.float16)
        and head_dim % 8 == 0
        and head_dim <= 256
        and fast.enabled("FLASH_DECODE", device)
        and _FLASH_OP is not None
    )


def _load_flash_op() -> Any:
    op = getattr(torch.ops.aten, "_flash_attention_forward", None)
    if op is None or "seqused_k" not in {a.name for a in op.default._schema.arguments}:
        return None
    return op.default


_FLASH_OP = _load_flash_op()


def _flash(
    q_THD: Tensor,
    k_SHD: Tensor,
    v_SHD: Tensor,
    cu_q: Tensor,
    cu_k: Tensor,
    max_q: int,
    max_k: int,
    used_k: Tensor,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """FlashAttention over varlen sequences, no mask: output (T, H, D) and log-sum-exp (T, H),
    fp32 (for one head, (T, 1) whichever layout the kernel returns)."""
    global _LSE_HEADS_FIRST
    out, lse, *_ = _FLASH_OP(
        q_THD, k_SHD, v_SHD, cu_q, cu_k, max_q, max_k, 0.0, False, False,
        scale=scale, seqused_k=used_k,
    )  # fmt: skip
    t, h = q_THD.shape[:2]
    if lse.shape == (t, h) and t != h:
        _LSE_HEADS_FIRST = False
    elif lse.shape == (h, t) and t != h:
        _LSE_HEADS_FIRST = True
    elif _LSE_HEADS_FIRST is None:  # as many rows as heads: ask the kernel with other shapes
        _LSE_HEADS_FIRST = _probe_lse_layout(q_THD)
    return out, (lse.t() if _LSE_HEADS_FIRST else lse)


def _probe_lse_layout(like: Tensor) -> bool:
    """Whether the kernel returns its log-sum-exp as (heads, tokens): 3 queries, 2 heads."""
    q = torch.zeros((3, 2, like.shape[-1]), dtype=like.dtype, device=like.device)
    cu = torch.tensor([0, 3], dtype=torch.int32, device=like.device)
    used = torch.tensor([3], dtype=torch.int32, device=like.device)
    _, lse, *_ = _FLASH_OP(q, q, q, cu, cu, 3, 3, 0.0, False, False, seqused_k=used)
    return tuple(lse.shape) == (2, 3)


class MergedAdapter:
    """Each adapted linear layer's weight with its LoRA folded in, swapped in for the decode."""

    def __init__(self, model: PeftModel, layers: list[LoraLinear]) -> None:
        self._model, self._layers = model, layers
        self._bases = [base_linear(layer) for layer in layers]
        self._merged = [
            nn.Parameter(torch.empty_like(base.weight), requires_grad=False) for base in self._bases
        ]

    @classmethod
    def of(cls, model: nn.Module) -> MergedAdapter | None:
        """For a PEFT model whose adapter is plain LoRA on plain linear layers, when the card
        has room for the copy (twice its size free); else None."""
        if not isinstance(model, PeftModel) or not adapters_enabled(model):
            return None
        layers = [m for m in model.modules() if isinstance(m, LoraLinear)]
        if not layers or not all(mergeable(m) for m in layers):
            return None
        weights = [base_linear(m).weight for m in layers]
        size = sum(w.numel() * w.element_size() for w in weights)
        device = weights[0].device
        if device.type == "cuda" and 2 * size > torch.cuda.mem_get_info(device)[0]:
            log.info("no room for a merged adapter (%.1f GiB): decoding it unmerged", size / 2**30)
            return None
        return cls(model, layers)

    def current(self) -> bool:
        """Whether the model's adapted layers are still the ones this copy was made for (an
        adapter of another shape added to a shared model adapts other layers)."""
        layers = [m for m in self._model.modules() if isinstance(m, LoraLinear)]
        return len(layers) == len(self._layers) and all(
            a is b for a, b in zip(layers, self._layers, strict=True)
        )

    def refresh(self) -> None:
        """Fold the adapter as it is now into the copies (PEFT's own delta, W + s B A)."""
        for layer, base, merged in zip(self._layers, self._bases, self._merged, strict=True):
            (adapter,) = layer.active_adapters
            if adapter in layer.lora_A:
                torch.add(base.weight, layer.get_delta_weight(adapter), out=merged.data)
            else:  # adapters of other shapes share the model: this one leaves the layer be
                merged.data.copy_(base.weight)

    @contextlib.contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The merged weights in place of the base weights, the adapter off."""
        bases = self._bases
        originals = [base.weight for base in bases]
        try:
            for base, merged in zip(bases, self._merged, strict=True):
                base.weight = merged  # the module's attribute: a tied weight stays tied elsewhere
            with self._model.disable_adapter():
                yield
        finally:
            for base, original in zip(bases, originals, strict=True):
                base.weight = original


@dataclass
class _Capture:
    """A decode's cache, the step's input buffers and its graphs, one per token bucket."""

    cache: SharedPromptCache
    merged: MergedAdapter | FusedDecode | None  # the weights the decode runs with
    token_B1: Tensor
    position_B1: Tensor
    mask: Tensor  # _UNUSED_MASK on the device (a capture may not copy from the host)
    stream: torch.cuda.Stream | None  # None: steps run eagerly (CPU, or graphs off)
    graphs: dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)
    logits: dict[int, Tensor] = field(default_factory=dict)
    pool: Any = None
    failed: bool = False


# One capture per model (the most recent layout): graphs pin their cache and memory pool.
_CAPTURES: weakref.WeakKeyDictionary[nn.Module, _Capture] = weakref.WeakKeyDictionary()


class PrefixDecoder:
    """Prefill G prompts once each, then decode all their rows together, one token a step."""

    def __init__(
        self,
        model: nn.Module,
        config: Any,
        graphs: bool,
        fused: bool | None = None,
        merge: bool = True,
    ) -> None:
        """`fused`: run the step as fused_decode's kernels where the model allows (default:
        on CUDA, unless THINKER_FUSED_DECODE=0; the CPU tests turn it on). `merge`: fold the
        adapter into copies of the weights it adapts where there is room (off for a sharded
        model, whose layers hold shards of their weights)."""
        self._model, self._config, self._graphs = model, config, graphs
        self._fused, self._merge = fused, merge
        self._capture: _Capture | None = None
        self._steps = 0

    def prefill(self, prompts: list[list[int]], counts: list[int], max_new_tokens: int) -> Tensor:
        """Logits of each row's first new token: group g's `counts[g]` rows, in order."""
        device = self._embedding_weight().device
        capture = _CAPTURES.get(self._model)
        shape = (
            tuple(counts),
            _round_up(max(len(p) for p in prompts), PROMPT_BUCKET),
            _round_up(max_new_tokens, TOKEN_BUCKET),
        )
        merged: MergedAdapter | FusedDecode | None
        adapter: Literal["fused", "merged", "unmerged", "off"]
        kept = capture.merged if capture is not None else None
        fused = self._fused if self._fused is not None else fast.enabled("FUSED_DECODE", device)
        if fused and isinstance(kept, FusedDecode) and kept.current():
            merged, adapter = kept, "fused"  # the adapter on or off: refresh() folds either
        elif fused and (merged := FusedDecode.of(self._model)) is not None:
            adapter = "fused"
        elif not adapters_enabled(self._model):
            merged, adapter = None, "off"
        elif not self._merge:
            merged, adapter = None, "unmerged"
        elif isinstance(kept, MergedAdapter) and kept.current():
            merged, adapter = kept, "merged"
        else:
            merged = MergedAdapter.of(self._model)
            adapter = "merged" if merged is not None else "unmerged"
        layout = Layout(*shape, adapter)
        if capture is None or capture.cache.layout != layout or capture.merged is not merged:
            # (a new merged copy: the old graphs read the old copy's memory)
            _CAPTURES.pop(self._model, None)  # free the old cache and graphs before allocating
            capture = self._new_capture(layout, device, merged)
            _CAPTURES[self._model] = capture
        self._capture, self._steps = capture, 0
        if capture.merged is not None:
            capture.merged.refresh()
        if isinstance(capture.merged, FusedDecode):
            capture.merged.prepare(layout.prompt_columns + layout.token_columns)
        cache = capture.cache
        cache.start([len(p) for p in prompts])
        rows = []
        with _weights_of(capture):
            try:
                for first, batch in _prefill_batches(prompts):
                    cache.prefilling = first
                    rows += self._prefill(batch, cache, device)
            finally:
                cache.prefilling = None
        lengths = [len(p) for p, n in zip(prompts, counts, strict=True) for _ in range(n)]
        capture.position_B1.copy_(torch.tensor(lengths, device=device)[:, None])
        return torch.cat([row.expand(n, -1) for row, n in zip(rows, counts, strict=True)])

    def _prefill(
        self, prompts: list[list[int]], cache: SharedPromptCache, device: torch.device
    ) -> list[Tensor]:
        """One forward over `prompts`, right-padded to the longest: each one's last logits."""
        lengths = [len(p) for p in prompts]
        longest = max(lengths)
        ids = torch.zeros((len(prompts), longest), dtype=torch.long)
        for i, prompt in enumerate(prompts):
            ids[i, : len(prompt)] = torch.tensor(prompt)
        fused = self._capture.merged if self._capture is not None else None
        if isinstance(fused, FusedDecode):  # the step's kernels, not the layers' code
            first = cache.prefilling
            assert first is not None

            def keep(layer: int, key: Tensor, value: Tensor) -> None:
                cache.keep_prompts(layer, first, key, value)

            logits_GV = fused.prefill(ids.to(device), lengths, keep)
            return list(logits_GV[:, None])
        mask = None
        if min(lengths) < longest:  # padding after a prompt: its columns masked
            mask = (torch.arange(longest)[None] < torch.tensor(lengths)[:, None]).to(device)
        last = sorted(set(lengths))  # the positions whose logits are needed
        out = self._model(
            input_ids=ids.to(device),
            attention_mask=mask,
            use_cache=False,
            logits_to_keep=torch.tensor([n - 1 for n in last], device=device),
            **{attention.HOOK_KWARG: cache},
        )
        return [out.logits[i, last.index(n)][None].float() for i, n in enumerate(lengths)]

    def step(self, token_B: Tensor) -> Tensor:
        """Feed each row its new token; the logits of the token after it, in the model's dtype.
        Replayed from a CUDA graph, they are the graph's own output: read them (or queue the
        work that reads them) before the next step."""
        capture = self._capture
        assert capture is not None, "prefill first"
        if self._steps >= capture.cache.layout.token_columns:
            raise ValueError("decoded past the max_new_tokens given to prefill")
        columns = capture.cache.layout.token_columns
        window = columns
        if capture.cache.windowed:
            window = min(_round_up(self._steps + 1, TOKEN_BUCKET), columns)
        self._steps += 1
        capture.token_B1.copy_(token_B[:, None])
        capture.cache.window = window
        graph = capture.graphs.get(window)
        if graph is not None:
            graph.replay()
            return capture.logits[window]
        with _weights_of(capture):
            if capture.failed or capture.stream is None:
                return self._forward(capture)
            # The first step of a bucket: run it eagerly on the capture stream, then record it.
            capture.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(capture.stream):
                logits_BV = self._forward(capture)
            torch.cuda.current_stream().wait_stream(capture.stream)
            self._try_capture(capture, window)
        return logits_BV

    def _forward(self, capture: _Capture) -> Tensor:
        if isinstance(capture.merged, FusedDecode):
            return capture.merged.step(capture.token_B1, capture.position_B1, capture.cache)
        out = self._model(
            input_ids=capture.token_B1,
            position_ids=capture.position_B1,
            attention_mask=capture.mask,
            use_cache=False,
            logits_to_keep=1,
            **{attention.HOOK_KWARG: capture.cache},
        )
        capture.position_B1.add_(1)
        capture.cache.advanced()
        logits_BV: Tensor = out.logits[:, -1]
        return logits_BV

    def _try_capture(self, capture: _Capture, window: int) -> None:
        """Record the step just run eagerly (recording runs nothing, so no state moves)."""
        assert capture.stream is not None
        graph = torch.cuda.CUDAGraph()
        capture.stream.wait_stream(torch.cuda.current_stream())
        try:
            with torch.cuda.graph(graph, pool=capture.pool, stream=capture.stream):
                logits_BV = self._forward(capture)
        except Exception as e:  # a model whose forward syncs with the host cannot be captured
            capture.failed = True
            capture.graphs.clear()
            capture.logits.clear()
            log.warning("CUDA graph capture failed, decoding without graphs: %s", e)
            return
        finally:
            torch.cuda.current_stream().wait_stream(capture.stream)
        capture.pool = graph.pool()
        capture.graphs[window], capture.logits[window] = graph, logits_BV

    def _embedding_weight(self) -> Tensor:
        weight = self._model.get_input_embeddings().weight  # type: ignore[operator]
        assert isinstance(weight, Tensor), "an input embedding without a weight"
        return weight

    def _new_capture(
        self, layout: Layout, device: torch.device, merged: MergedAdapter | FusedDecode | None
    ) -> _Capture:
        dtype = self._embedding_weight().dtype
        cache = SharedPromptCache.allocate(layout, self._config, dtype, device)
        token_B1 = torch.zeros((layout.rows, 1), dtype=torch.long, device=device)
        stream = torch.cuda.Stream(device) if self._graphs else None
        mask = _UNUSED_MASK.to(device)
        return _Capture(cache, merged, token_B1, torch.zeros_like(token_B1), mask, stream)


def _weights_of(capture: _Capture) -> contextlib.AbstractContextManager[None]:
    """The weights of a decode through the model's layers: the merged adapter swapped in, or
    the model as it is (a fused decode computes with its own weights)."""
    if isinstance(capture.merged, MergedAdapter):
        return capture.merged.swapped_in()
    return contextlib.nullcontext()


def release(model: nn.Module) -> None:
    """Drop `model`'s kept capture (its cache and graphs), e.g. after running out of memory."""
    _CAPTURES.pop(model, None)


def _prefill_batches(prompts: list[list[int]]) -> Iterator[tuple[int, list[list[int]]]]:
    """Consecutive prompts prefilled by one forward (the index of the first, the prompts):
    as many as keep the padded batch within PREFILL_TOKENS (a longer prompt goes alone)."""
    first, longest = 0, 0
    for i, prompt in enumerate(prompts):
        wider = max(longest, len(prompt))
        if i > first and wider * (i - first + 1) > PREFILL_TOKENS:
            yield first, prompts[first:i]
            first, wider = i, len(prompt)
        longest = wider
    yield first, prompts[first:]


def _round_up(n: int, bucket: int) -> int:
    return -(-n // bucket) * bucket
