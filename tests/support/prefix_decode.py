"""Driving a shared-prompt decode (engine/local/prefix.py) step by step in tests."""

from __future__ import annotations

import torch

from thinker.engine.local import prefix


def shared_decode(
    decoder: prefix.PrefixDecoder, prompts: list[list[int]], counts: list[int], steps: int
) -> torch.Tensor:
    """The logits of every step (steps, rows, vocab), fp32; row i of a group is fed its
    (i+1)-th likeliest token so that the rows differ."""
    logits = [decoder.prefill(prompts, counts, steps)]
    for _ in range(steps - 1):
        token_B = torch.cat(
            [
                part.topk(n, dim=-1).indices.diagonal()
                for part, n in zip(logits[-1].split(counts), counts, strict=True)
            ]
        )
        logits.append(decoder.step(token_B).to(torch.float32, copy=True))
    return torch.stack(logits)
