"""One batched forward pass that gives each sequence's per-token target logprobs.

The output layer runs in chunks of tokens: each chunk's logits are made, reduced to the
target tokens' logprobs and dropped, and (when gradients are on) recomputed in the backward
pass instead of being kept. A 152k-token vocabulary then never has all its logits in memory
at once: for Qwen3-0.6B at 8 x 1024 tokens the full fp32 logits alone are 5 GB, and their
gradient as much again. The loss functions need every token's logprob, not a summed
cross-entropy: on the CUDA fast path, training uses Liger's fused linear cross-entropy with a
per-token result (one Triton pass over each chunk's bf16 logits); otherwise each chunk is
upcast to fp32 for a log-softmax.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from peft.tuners.lora import Linear as LoraLinear
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from thinker.engine.local import attention, fast

CHUNK_BYTES = 256 * 2**20  # fp32 logits per chunk
# Liger's chunk of tokens holds logits of up to this many times the chunk's hidden states
# (512 tokens a chunk for Qwen3-0.6B at 8 x 1024 tokens; its default makes chunks of 64).
LIGER_CHUNK_MEM = 8


def target_logprobs(
    model: nn.Module,
    inputs: list[list[int]],
    targets: list[Tensor],
    device: torch.device,
    pack: bool = False,
) -> list[Tensor]:
    """Entry i of result j is log p(targets[j][i] | inputs[j][: i + 1]).

    The sequences are right-padded into one batch, or with `pack` (when their lengths differ)
    packed: on a model that takes flat rows (attention.py) all into one row with no padding,
    otherwise (when padding would waste over a tenth of the batch) several to a padded row,
    each starting again at position 0 so attention stays within its own sequence. Logits are
    upcast to fp32 before the log-softmax, so bf16 models give fp32 logprobs.
    """
    lengths = [len(x) for x in inputs]
    if pack and len(set(lengths)) > 1 and _takes_flat_rows(model):
        return _flat_logprobs(model, inputs, targets, device)
    width = max(lengths)
    rows = pack_rows(lengths, width) if pack else [[i] for i in range(len(inputs))]
    input_ids_BT = torch.zeros((len(rows), width), dtype=torch.long)
    target_ids_BT = torch.zeros((len(rows), width), dtype=torch.long)
    position_ids_BT = torch.zeros((len(rows), width), dtype=torch.long)
    spans: list[tuple[int, int, int]] = [(0, 0, 0)] * len(inputs)  # (row, start, length)
    for b, members in enumerate(rows):
        start = 0
        for i in members:
            end = start + lengths[i]
            input_ids_BT[b, start:end] = torch.tensor(inputs[i], dtype=torch.long)
            target_ids_BT[b, start:end] = targets[i]
            position_ids_BT[b, start:end] = torch.arange(lengths[i])
            spans[i], start = (b, start, lengths[i]), end
        position_ids_BT[b, start:] = torch.arange(width - start)  # the padding: its own segment
    packed = len(rows) < len(inputs)
    # Packed rows need no mask: the position ids delimit the sequences. Unpadded rows need
    # none either, and attention takes SDPA's causal fast path. Otherwise, a padding mask.
    attention_mask = None
    if not packed and min(lengths) < width:
        attention_mask = (torch.arange(width) < torch.tensor(lengths)[:, None]).long().to(device)
    position_ids = position_ids_BT.to(device) if packed else None
    logprobs_BT = _logprobs(
        model, input_ids_BT.to(device), attention_mask, position_ids, target_ids_BT.to(device)
    )
    return [logprobs_BT[b, start : start + n] for b, start, n in spans]


def vocab_logprobs(
    model: nn.Module, tokens: list[int], device: torch.device, start: int = 0
) -> Iterator[tuple[int, Tensor]]:
    """log p(v | tokens[: i + 1]) for every vocabulary entry v at each position i >= `start`
    of one sequence, as (i of the first row, fp32 (C, V)) chunks.

    The model's body runs once; the output layer runs chunk by chunk, so the logits of a long
    sequence never exist in full (the sampler's top-k, chosen-id and alternative-token options
    for a prompt read these). No gradient is kept.
    """
    base = _base(model)
    head = base.get_output_embeddings()
    args = {"input_ids": torch.tensor([tokens], dtype=torch.long, device=device)}
    if head is None or _rescales_logits(base):
        with torch.no_grad(), fast.adapter_autocast(model):
            logits_TV = model(**args, use_cache=False).logits[0]
        chunk = max(64, CHUNK_BYTES // (4 * logits_TV.shape[-1]))
        for i in range(start, len(tokens), chunk):
            yield i, torch.log_softmax(logits_TV[i : i + chunk].float(), dim=-1)
        return
    with torch.no_grad(), fast.adapter_autocast(model):
        hidden_TD = base.get_decoder()(**args, use_cache=False).last_hidden_state[0]
    weight_VD = head.weight
    assert isinstance(weight_VD, Tensor)  # an output layer's weight (nn.Module types it loosely)
    chunk = max(64, CHUNK_BYTES // (4 * weight_VD.shape[0]))
    for i in range(start, len(tokens), chunk):
        with torch.no_grad(), fast.adapter_autocast(model):
            logits_CV = head(hidden_TD[i : i + chunk])
        yield i, torch.log_softmax(logits_CV.float(), dim=-1)


def _base(model: nn.Module) -> PreTrainedModel:
    """The transformers model under a PEFT wrapper (or the model itself)."""
    get_base_model: Callable[[], nn.Module] | None = getattr(model, "get_base_model", None)
    base = get_base_model() if get_base_model is not None else model
    assert isinstance(base, PreTrainedModel), f"not a transformers model: {type(base).__name__}"
    return base


def _takes_flat_rows(model: nn.Module) -> bool:
    return bool(getattr(_base(model), attention.ENABLED_ATTR, False))


def _flat_logprobs(
    model: nn.Module, inputs: list[list[int]], targets: list[Tensor], device: torch.device
) -> list[Tensor]:
    """Every sequence in one row, back to back, positions restarting at each."""
    lengths = [len(x) for x in inputs]
    input_ids_1T = torch.tensor([[t for x in inputs for t in x]], dtype=torch.long)
    target_ids_1T = torch.cat(targets).to(torch.long)[None]
    position_ids_1T = torch.cat([torch.arange(n) for n in lengths])[None]
    logprobs_1T = _logprobs(
        model,
        input_ids_1T.to(device),
        None,
        position_ids_1T.to(device),
        target_ids_1T.to(device),
        attention.flat_kwargs(lengths, device),
    )
    return list(logprobs_1T[0].split(lengths))


def to_host(logprobs: list[Tensor]) -> list[Tensor]:
    """The sequences' logprobs as fp32 CPU tensors, in one device-to-host copy instead of one
    (and one wait for the GPU) per sequence."""
    if not logprobs:
        return []
    flat = torch.cat([lp.detach().float().reshape(-1) for lp in logprobs]).cpu()
    return list(flat.split([lp.numel() for lp in logprobs]))


def token_ranges(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive (start, end) ranges of sequences, each within `budget` tokens in all (a
    longer sequence gets a range of its own)."""
    ranges, start, tokens = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and tokens + n > budget:
            ranges.append((start, i))
            start, tokens = i, 0
        tokens += n
    return [*ranges, (start, len(lengths))]


def pack_rows(lengths: list[int], width: int, min_fill: float = 0.9) -> list[list[int]]:
    """Sequences (by index) grouped into rows of at most `width` tokens, first fit by
    decreasing length; one sequence per row when padding wastes under 1 - `min_fill`."""
    if sum(lengths) >= min_fill * width * len(lengths):
        return [[i] for i in range(len(lengths))]
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        b = next((b for b, r in enumerate(room) if r >= lengths[i]), len(rows))
        if b == len(rows):
            rows.append([])
            room.append(width)
        rows[b].append(i)
        room[b] -= lengths[i]
    return rows


def _logprobs(
    model: nn.Module,
    input_ids_BT: Tensor,
    attention_mask: Tensor | None,
    position_ids_BT: Tensor | None,
    target_ids_BT: Tensor,
    extra: dict[str, object] | None = None,
) -> Tensor:
    base = _base(model)
    head = base.get_output_embeddings()
    # No cache: transformers reads packed sequences from the position ids only without one.
    args = {
        "input_ids": input_ids_BT,
        "attention_mask": attention_mask,
        "position_ids": position_ids_BT,
        "use_cache": False,
        **(extra or {}),
    }
    with fast.adapter_autocast(model):  # the adapted output layer too (train_unembed)
        if head is None or _rescales_logits(base):
            return _logprobs_of_logits(model(**args).logits, target_ids_BT)
        hidden_BTD = base.get_decoder()(**args).last_hidden_state
        if torch.is_grad_enabled() and fast.enabled("FUSED_KERNELS", hidden_BTD.device):
            fused = _fused_head_logprobs(head, hidden_BTD, target_ids_BT)
            if fused is not None:
                return fused
        return _chunked_head_logprobs(head, hidden_BTD, target_ids_BT)


def _fused_head_logprobs(
    head: nn.Module, hidden_BTD: Tensor, target_ids_BT: Tensor
) -> Tensor | None:
    """Liger's fused linear cross-entropy with a per-token result (reduction="none"): the
    same chunked recompute as `_chunked_head_logprobs`, but the log-softmax runs in one Triton
    pass over each chunk's bf16 logits instead of an fp32 copy, a log-softmax and a gather
    (on the Qwen3-0.6B shape the output layer was 44% of an SL step's GPU time). None where
    liger-kernel is not installed, or the layer is not one weight (`linear_weight`)."""
    fused_loss = _liger_fused_linear_cross_entropy()
    weights = linear_weight(head)
    if fused_loss is None or weights is None:
        return None
    weight_VD, bias_V = weights
    batch, width, dim = hidden_BTD.shape
    loss_N = fused_loss(
        hidden_BTD.reshape(-1, dim),
        weight_VD.to(hidden_BTD.dtype),
        target_ids_BT.reshape(-1),
        bias_V,
        reduction="none",
        chunk_mem_const=LIGER_CHUNK_MEM,
    )
    return -loss_N.view(batch, width)


def linear_weight(head: nn.Module) -> tuple[Tensor, Tensor | None] | None:
    """The output layer as one linear map (weight, bias): a plain `nn.Linear`'s own, or for a
    LoRA-adapted one (train_unembed, Tinker's default) the merged weight W + scale * B A,
    made under autograd so the fused kernel's weight gradient flows on to A and B (the frozen
    W gets none). Merging costs one vocabulary-sized weight and its gradient (0.3 + 0.6 GB
    on Qwen3-0.6B) and 2 x vocab x hidden x rank FLOPs, against logits that never exist in
    full. None for anything else: several adapters, dropout, DoRA or another variant, or a
    bias on the adapter."""
    if type(head) is nn.Linear:
        return head.weight, head.bias
    if not isinstance(head, LoraLinear) or head.merged:
        return None
    base = head.get_base_layer()
    if type(base) is not nn.Linear:
        return None
    if head.disable_adapters:  # the reference pass (adapter off) is the base layer alone
        return base.weight, base.bias
    active = [a for a in head.active_adapters if a in head.lora_A]
    if len(active) != 1 or active[0] in head.lora_variant:
        return None
    name = active[0]
    lora_A, lora_B = head.lora_A[name], head.lora_B[name]
    if not isinstance(head.lora_dropout[name], nn.Identity) or lora_B.bias is not None:
        return None
    delta_VD = (lora_B.weight @ lora_A.weight) * head.scaling[name]
    return base.weight + delta_VD.to(base.weight.dtype), base.bias


@functools.cache
def _liger_fused_linear_cross_entropy() -> Callable[..., Tensor] | None:
    """Imported on first use (it loads Triton), once."""
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except ImportError:
        return None
    fused: Callable[..., Tensor] = liger_fused_linear_cross_entropy
    return fused


def _chunked_head_logprobs(head: nn.Module, hidden_BTD: Tensor, target_ids_BT: Tensor) -> Tensor:
    batch, width, dim = hidden_BTD.shape
    hidden_ND, target_N = hidden_BTD.reshape(-1, dim), target_ids_BT.reshape(-1)
    weight_VD = head.weight
    assert isinstance(weight_VD, Tensor)  # an output layer's weight (nn.Module types it loosely)
    chunk = max(64, CHUNK_BYTES // (4 * weight_VD.shape[0]))
    pieces = [
        _head_logprobs(head, hidden_ND[i : i + chunk], target_N[i : i + chunk])
        for i in range(0, hidden_ND.shape[0], chunk)
    ]
    return torch.cat(pieces).view(batch, width)


def _head_logprobs(head: nn.Module, hidden_ND: Tensor, target_N: Tensor) -> Tensor:
    if torch.is_grad_enabled():  # recompute the chunk's logits in backward, keep none
        logprobs_N: Tensor = checkpoint(_chunk, head, hidden_ND, target_N, use_reentrant=False)
        return logprobs_N
    return _chunk(head, hidden_ND, target_N)


def _chunk(head: nn.Module, hidden_ND: Tensor, target_N: Tensor) -> Tensor:
    return -F.cross_entropy(head(hidden_ND).float(), target_N, reduction="none")


def _logprobs_of_logits(logits_BTV: Tensor, target_ids_BT: Tensor) -> Tensor:
    batch, width, vocab = logits_BTV.shape
    return -F.cross_entropy(
        logits_BTV.reshape(-1, vocab).float(), target_ids_BT.reshape(-1), reduction="none"
    ).view(batch, width)


def _rescales_logits(model: nn.Module) -> bool:
    """Models whose forward changes the head's output (softcapping, scaling): full path."""
    config = getattr(model, "config", None)
    return any(
        getattr(config, name, None) not in (None, 1.0)
        for name in ("final_logit_softcapping", "logit_scale", "logits_scaling")
    )
