"""The model's attention: SDPA, FlashAttention's varlen kernel for packed rows, or a hook.

The fast path trains several sequences of unequal length as one flat row (no padding at
all), each sequence attending only to itself. The kernel is PyTorch's own FlashAttention-2
varlen entry point (`torch.nn.attention.varlen.varlen_attn`, forward and backward); it skips
the positions another sequence owns instead of masking them, so a packed row costs the sum of
its sequences' attention, not the square of the row's width.

It reaches the model through transformers' attention interface: `install` registers
`thinker` and sets it on the model. The function answers exactly as SDPA does unless the call
carries `cu_seq_lens_q` (the sequence boundaries, which transformers passes through to the
attention as it does for FlashAttention; only on a model installed with `flat_rows`), or a
callable under HOOK_KWARG, which then answers instead (the shared-prompt decode of prefix.py
keeps its own cache this way). Padded batches and plain decoding are unchanged.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch
from torch import Tensor, nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "thinker"
FLAT_ROW_KWARG = "cu_seq_lens_q"  # in a model call's (and each layer's) kwargs: a flat row
ENABLED_ATTR = "thinker_varlen"  # set on a model whose attention takes packed flat rows
HOOK_KWARG = "thinker_attention_hook"  # in a model call's kwargs: the attention to run instead
HOOKS_ATTR = "thinker_attention_hooks"  # set on a model whose attention takes HOOK_KWARG
# The masks are never read on the varlen path; a 4-D mask makes transformers skip building a
# (row x row) mask it would otherwise make for the packed row.
_UNUSED_MASK = torch.ones((1, 1, 1, 1), dtype=torch.bool)


def _load_varlen() -> Any:
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:  # torch < 2.9
        return None
    return varlen_attn


VARLEN_ATTN = _load_varlen()  # None where this torch has no varlen kernel
# Its keyword arguments changed between torch releases (scale, enable_gqa, window_size).
_PARAMS = frozenset(inspect.signature(VARLEN_ATTN).parameters) if VARLEN_ATTN else frozenset()


def use_varlen(model: PreTrainedModel, device: torch.device) -> bool:
    """Make `model`, which will compute on `device`, take flat packed rows (CUDA, full causal
    attention in every layer). False where that is not possible; the caller then packs into
    padded rows instead. `device`, not the model's own: a model to be sharded is still on
    the meta device here."""
    if device.type != "cuda" or VARLEN_ATTN is None or not eligible(model):
        return False
    install(model, flat_rows=True)
    return True


def eligible(model: PreTrainedModel) -> bool:
    """Whether `model`'s attention can be `thinker`: SDPA (or already `thinker`), full causal
    attention in every layer (no sliding window, whose cache columns are not positions)."""
    config = model.config
    return (
        config._attn_implementation in ("sdpa", NAME)
        and getattr(config, "sliding_window", None) is None
        and all(t == "full_attention" for t in getattr(config, "layer_types", None) or [])
        and getattr(config, "is_causal", True)
    )


def takes_hooks(model: nn.Module) -> bool:
    """Whether calls to `model` (or the transformers model under its PEFT wrapper) may carry
    an attention hook under HOOK_KWARG."""
    get_base_model = getattr(model, "get_base_model", None)
    base = get_base_model() if get_base_model is not None else model
    return bool(getattr(base, HOOKS_ATTR, False))


def install(model: PreTrainedModel, flat_rows: bool = False) -> None:
    """Register `thinker_attention` with transformers and set it as `model`'s attention (masks
    as for SDPA, which it answers like when a call carries neither boundaries nor a hook).
    `flat_rows` also marks the model as taking packed flat rows (forward.py)."""
    AttentionInterface.register(NAME, thinker_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
    setattr(model, HOOKS_ATTR, True)
    if flat_rows:
        setattr(model, ENABLED_ATTR, True)


def flat_kwargs(lengths: list[int], device: torch.device) -> dict[str, Any]:
    """The model-call arguments that tell `varlen_attention` where each sequence starts."""
    cu_seq_lens = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu_seq_lens[1:] = torch.tensor(lengths).cumsum(0)
    cu_seq_lens = cu_seq_lens.to(device)
    longest = max(lengths)
    return {
        "attention_mask": _UNUSED_MASK.to(device),
        FLAT_ROW_KWARG: cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": longest,
        "max_length_k": longest,
    }


def thinker_attention(
    module: nn.Module,
    query_BHTD: Tensor,
    key_BHTD: Tensor,
    value_BHTD: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers' attention-function signature: output (batch, tokens, heads, dim)."""
    hook = kwargs.pop(HOOK_KWARG, None)
    if hook is not None:
        out: tuple[Tensor, None] = hook(
            module, query_BHTD, key_BHTD, value_BHTD, attention_mask, dropout, scaling, **kwargs
        )
        return out
    return varlen_attention(
        module, query_BHTD, key_BHTD, value_BHTD, attention_mask, dropout, scaling, **kwargs
    )


def varlen_attention(
    module: nn.Module,
    query_BHTD: Tensor,
    key_BHTD: Tensor,
    value_BHTD: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """FlashAttention's varlen kernel over one flat row; SDPA for a call without boundaries."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(
            module, query_BHTD, key_BHTD, value_BHTD, attention_mask, dropout, scaling, **kwargs
        )
    if query_BHTD.shape[0] != 1 or dropout:
        raise ValueError("varlen attention takes one flat row and no dropout")
    assert max_length_q is not None
    head_dim = query_BHTD.shape[-1]
    extra: dict[str, Any] = {}
    if scaling is not None and "scale" in _PARAMS:
        extra["scale"] = scaling
    elif scaling is not None and not math.isclose(scaling, head_dim**-0.5):
        query_BHTD = query_BHTD * (scaling * math.sqrt(head_dim))  # the kernel's scale is fixed
    groups = query_BHTD.shape[1] // key_BHTD.shape[1]
    if groups > 1 and "enable_gqa" in _PARAMS:
        extra["enable_gqa"] = True
    elif groups > 1:
        key_BHTD, value_BHTD = repeat_kv(key_BHTD, groups), repeat_kv(value_BHTD, groups)
    if "window_size" in _PARAMS:  # torch >= 2.12: causal is a (left, right) window
        extra["window_size"] = (-1, 0)
    else:
        extra["is_causal"] = True
    out_THD = VARLEN_ATTN(
        query_BHTD[0].transpose(0, 1).contiguous(),
        key_BHTD[0].transpose(0, 1).contiguous(),
        value_BHTD[0].transpose(0, 1).contiguous(),
        cu_seq_lens_q,
        cu_seq_lens_q,
        max_length_q,
        max_length_q,
        **extra,
    )
    return out_THD[None], None
