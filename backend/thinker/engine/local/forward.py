"""One batched forward pass that gives each sequence's per-token target logprobs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


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
    logits_BTV = model(input_ids=input_ids_BT, attention_mask=attention_mask).logits
    batch, _, vocab = logits_BTV.shape
    logprobs_BT = -F.cross_entropy(
        logits_BTV.reshape(-1, vocab).float(), target_ids_BT.reshape(-1), reduction="none"
    ).view(batch, width)
    return [logprobs_BT[b, :n] for b, n in enumerate(lengths)]
