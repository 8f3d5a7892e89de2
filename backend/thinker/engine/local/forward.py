"""One batched forward pass that gives each sequence's per-token target logprobs.

The output layer runs in chunks of tokens: each chunk's logits are made, upcast to fp32,
reduced to the target tokens' logprobs and dropped, and (when gradients are on) recomputed in
the backward pass instead of being kept. A 152k-token vocabulary then never has all its
logits in memory at once: for Qwen3-0.6B at 8 x 1024 tokens the full fp32 logits alone are
5 GB, and their gradient as much again. The loss functions need every token's logprob (not
only a summed cross-entropy), which is why this is not a fused-loss kernel (Liger's fused
linear cross-entropy returns the loss alone).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

CHUNK_BYTES = 256 * 2**20  # fp32 logits per chunk


def target_logprobs(
    model: nn.Module, inputs: list[list[int]], targets: list[Tensor], device: torch.device
) -> list[Tensor]:
    """Right-pad the sequences into one batch; entry i of result j is log p(targets[j][i] | <=i).

    Logits are upcast to fp32 before the log-softmax, so bf16 models give fp32 logprobs.
    """
    lengths = [len(x) for x in inputs]
    width = max(lengths)
    input_ids_BT = torch.zeros((len(inputs), width), dtype=torch.long)
    target_ids_BT = torch.zeros((len(inputs), width), dtype=torch.long)
    mask_BT = torch.zeros((len(inputs), width), dtype=torch.long)
    for b, (tokens, target) in enumerate(zip(inputs, targets, strict=True)):
        input_ids_BT[b, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        target_ids_BT[b, : len(tokens)] = target
        mask_BT[b, : len(tokens)] = 1
    # Without padding, no mask: attention then takes SDPA's causal fast path.
    attention_mask = None if min(lengths) == width else mask_BT.to(device)
    input_ids_BT, target_ids_BT = input_ids_BT.to(device), target_ids_BT.to(device)
    logprobs_BT = _logprobs(model, input_ids_BT, attention_mask, target_ids_BT)
    return [logprobs_BT[b, :n] for b, n in enumerate(lengths)]


def _logprobs(
    model: nn.Module, input_ids_BT: Tensor, attention_mask: Tensor | None, target_ids_BT: Tensor
) -> Tensor:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings()
    if head is None or _rescales_logits(base):
        logits_BTV = model(input_ids=input_ids_BT, attention_mask=attention_mask).logits
        return _logprobs_of_logits(logits_BTV, target_ids_BT)
    hidden_BTD = base.get_decoder()(
        input_ids=input_ids_BT, attention_mask=attention_mask
    ).last_hidden_state
    batch, width, dim = hidden_BTD.shape
    hidden_ND, target_N = hidden_BTD.reshape(-1, dim), target_ids_BT.reshape(-1)
    chunk = max(64, CHUNK_BYTES // (4 * head.weight.shape[0]))
    pieces = [
        _head_logprobs(head, hidden_ND[i : i + chunk], target_N[i : i + chunk])
        for i in range(0, hidden_ND.shape[0], chunk)
    ]
    return torch.cat(pieces).view(batch, width)


def _head_logprobs(head: nn.Module, hidden_ND: Tensor, target_N: Tensor) -> Tensor:
    if torch.is_grad_enabled():  # recompute the chunk's logits in backward, keep none
        return checkpoint(_chunk, head, hidden_ND, target_N, use_reentrant=False)  # type: ignore[no-any-return]
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
