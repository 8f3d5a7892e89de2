"""Packing (engine/local/forward.py): several sequences to a row, positions restarting at 0,
gives each sequence the logprobs and the LoRA gradients it has alone (no attention across
sequences), and pack_rows fills rows first-fit by decreasing length."""

from __future__ import annotations

import torch
from tiny_lora import each_alone, logprobs_and_grads, random_batch, tiny_lora_model

from thinker.engine.local import forward

torch.set_num_threads(1)


def test_pack_rows_first_fit_decreasing() -> None:
    assert forward.pack_rows([10, 60, 30, 100, 45], width=100) == [[3], [1, 2, 0], [4]]
    # Nearly equal lengths waste little padding: one sequence per row, no packing.
    assert forward.pack_rows([100, 95, 98], width=100) == [[0], [1], [2]]


def test_packed_logprobs_and_gradients_equal_each_sequence_alone() -> None:
    model = tiny_lora_model()
    lengths = [200, 13, 57, 120, 31, 3, 64]
    inputs, targets = random_batch(lengths, seed=0)
    assert len(forward.pack_rows(lengths, max(lengths))) < len(lengths)  # it does pack

    alone = each_alone(model, inputs, targets)
    packed, packed_grads = logprobs_and_grads(model, inputs, targets, pack=True)
    padded, padded_grads = logprobs_and_grads(model, inputs, targets, pack=False)
    for a, p, q in zip(alone, packed, padded, strict=True):
        assert a.shape == p.shape
        assert torch.allclose(p, a, atol=1e-5)
        assert torch.allclose(q, a, atol=1e-5)
    assert padded_grads
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
    monkeypatch.setattr(attention, "VARLEN_ATTN", _reference_varlen(calls))
    monkeypatch.setattr(attention, "_PARAMS", frozenset({"is_causal"}))
    model = tiny_lora_model()
    inputs, targets = random_batch([90, 13, 57, 4, 31], seed=1)
    alone = each_alone(model, inputs, targets)
    padded, padded_grads = logprobs_and_grads(model, inputs, targets, pack=False)
    attention.install(model.get_base_model(), flat_rows=True)
    flat_lps, flat_grads = logprobs_and_grads(model, inputs, targets, pack=True)
    n_layers = model.get_base_model().config.num_hidden_layers
    assert calls == [[0, 90, 103, 160, 164, 195]] * n_layers  # one flat row, every layer
    for lp, ref in zip(flat_lps, alone, strict=True):
        assert lp.shape == ref.shape
        torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-5)
    assert padded_grads
    for name, grad in padded_grads.items():  # fp32 rounding; gradients here reach about 40
        assert (flat_grads[name] - grad).norm() <= 1e-5 * grad.norm(), name
    calls.clear()
    again, _ = logprobs_and_grads(
        model, inputs, targets, pack=False
    )  # padded: no boundaries, SDPA with the padding mask
    assert calls == []
    for lp, ref in zip(again, padded, strict=True):
        torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-5)
