"""Packing (engine/local/forward.py): several sequences to a row, positions restarting at 0,
gives each sequence the logprobs and the LoRA gradients it has alone (no attention across
sequences), and pack_rows fills rows first-fit by decreasing length."""

from __future__ import annotations

import torch
from tiny_lora import tiny_lora_model

from thinker.engine.local import forward

torch.set_num_threads(1)


def test_pack_rows_first_fit_decreasing() -> None:
    assert forward.pack_rows([10, 60, 30, 100, 45], width=100) == [[3], [1, 2, 0], [4]]
    # Nearly equal lengths waste little padding: one sequence per row, no packing.
    assert forward.pack_rows([100, 95, 98], width=100) == [[0], [1], [2]]


def test_packed_logprobs_and_gradients_equal_each_sequence_alone() -> None:
    model = tiny_lora_model()
    g = torch.Generator().manual_seed(0)
    lengths = [200, 13, 57, 120, 31, 3, 64]
    inputs = [torch.randint(3, 384, (n,), generator=g).tolist() for n in lengths]
    targets = [torch.randint(3, 384, (n,), generator=g) for n in lengths]
    assert len(forward.pack_rows(lengths, max(lengths))) < len(lengths)  # it does pack

    def run(pack: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        model.zero_grad()
        lps = forward.target_logprobs(model, inputs, targets, torch.device("cpu"), pack=pack)
        torch.stack([lp.sum() for lp in lps]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return [lp.detach() for lp in lps], grads

    alone = [
        forward.target_logprobs(model, [x], [t], torch.device("cpu"))[0].detach()
        for x, t in zip(inputs, targets, strict=True)
    ]
    packed, packed_grads = run(pack=True)
    padded, padded_grads = run(pack=False)
    for a, p, q in zip(alone, packed, padded, strict=True):
        assert a.shape == p.shape
        assert torch.allclose(p, a, atol=1e-5)
        assert torch.allclose(q, a, atol=1e-5)
    for name, grad in padded_grads.items():
        assert torch.allclose(packed_grads[name], grad, atol=1e-5, rtol=1e-4), name
