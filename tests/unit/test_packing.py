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


def _reference_varlen(calls: list[list[int]]):  # noqa: ANN202
    """The varlen kernel's contract, computed per sequence with SDPA: the CPU has no
    FlashAttention, so this stands in for PyTorch's CUDA kernel (the CUDA tests run that)."""

    def varlen(q, k, v, cu_q, cu_k, max_q, max_k, is_causal=False):  # noqa: ANN001, ANN202
        assert is_causal and torch.equal(cu_q, cu_k) and cu_q.dtype == torch.int32
        bounds = cu_q.tolist()
        calls.append(bounds)
        assert max_q == max_k == max(b - a for a, b in zip(bounds, bounds[1:], strict=False))
        out = torch.empty_like(q)
        for a, b in zip(bounds, bounds[1:], strict=False):
            out[a:b] = torch.nn.functional.scaled_dot_product_attention(
                q[a:b].transpose(0, 1),
                k[a:b].transpose(0, 1),
                v[a:b].transpose(0, 1),
                is_causal=True,
            ).transpose(0, 1)
        return out

    return varlen


def test_flat_rows_give_each_sequence_its_own_logprobs_and_gradients(monkeypatch) -> None:  # noqa: ANN001
    """A model that takes flat rows (attention.py) gets every sequence in one unpadded row with
    its boundaries; the result and the LoRA gradients equal each sequence run alone, and calls
    without boundaries (padded batches) still go through SDPA."""
    from thinker.engine.local import attention

    calls: list[list[int]] = []
    monkeypatch.setattr(attention, "_varlen_fn", lambda: _reference_varlen(calls))
    monkeypatch.setattr(attention, "_PARAMS", frozenset({"is_causal"}))
    model = tiny_lora_model()
    g = torch.Generator().manual_seed(1)
    lengths = [90, 13, 57, 4, 31]
    inputs = [torch.randint(3, 384, (n,), generator=g).tolist() for n in lengths]
    targets = [torch.randint(3, 384, (n,), generator=g) for n in lengths]

    def run(model, pack: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:  # noqa: ANN001
        model.zero_grad()
        lps = forward.target_logprobs(model, inputs, targets, torch.device("cpu"), pack=pack)
        torch.stack([lp.sum() for lp in lps]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return [lp.detach() for lp in lps], grads

    alone = [
        forward.target_logprobs(model, [x], [t], torch.device("cpu"))[0].detach()
        for x, t in zip(inputs, targets, strict=True)
    ]
    padded, padded_grads = run(model, pack=False)
    attention.install(model.get_base_model())
    flat_lps, flat_grads = run(model, pack=True)
    n_layers = model.get_base_model().config.num_hidden_layers
    assert calls == [[0, 90, 103, 160, 164, 195]] * n_layers  # one flat row, every layer
    for lp, ref in zip(flat_lps, alone, strict=True):
        assert lp.shape == ref.shape
        torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-5)
    for name, grad in padded_grads.items():
        torch.testing.assert_close(flat_grads[name], grad, rtol=1e-4, atol=1e-5)
    calls.clear()
    again, _ = run(model, pack=False)  # padded: no boundaries, SDPA with the padding mask
    assert calls == []
    for lp, ref in zip(again, padded, strict=True):
        torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-5)
