"""The output layer in chunks (engine/local/forward.py) gives the same logprobs and the same
LoRA gradients as one full logits tensor, also when the chunks split sequences."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tiny_lora import tiny_lora_model

from thinker.engine.local import forward

torch.set_num_threads(1)


def _full(model: torch.nn.Module, inputs: list[list[int]], targets: list[torch.Tensor]):
    """The reference: the model's own logits, whole, then a log-softmax."""
    width = max(len(x) for x in inputs)
    ids = torch.zeros((len(inputs), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    tgt = torch.zeros_like(ids)
    for b, (x, t) in enumerate(zip(inputs, targets, strict=True)):
        ids[b, : len(x)], tgt[b, : len(x)], mask[b, : len(x)] = torch.tensor(x), t, 1
    logits = model(input_ids=ids, attention_mask=mask).logits.float()
    lp = -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
    lp = lp.view(len(inputs), width)
    return [lp[b, : len(x)] for b, x in enumerate(inputs)]


@pytest.mark.parametrize("chunk_tokens", [64, 100_000])  # several chunks; one chunk
def test_chunks_match_the_full_logits(monkeypatch: pytest.MonkeyPatch, chunk_tokens: int) -> None:
    model = tiny_lora_model(train_unembed=True, b_std=0.02)
    vocab = model.get_base_model().get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(forward, "CHUNK_BYTES", 4 * vocab * chunk_tokens)
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (90, 57, 130)]
    targets = [torch.randint(0, 256, (len(x),), generator=g) for x in inputs]
    weights = [torch.rand(len(x), generator=g) for x in inputs]

    model.zero_grad()
    got = forward.target_logprobs(model, inputs, targets, torch.device("cpu"))
    sum(-(lp * w).sum() for lp, w in zip(got, weights, strict=True)).backward()
    got_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    model.zero_grad()
    want = _full(model, inputs, targets)
    sum(-(lp * w).sum() for lp, w in zip(want, weights, strict=True)).backward()
    want_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert got_grads.keys() == want_grads.keys() and any("lm_head" in n for n in got_grads)
    for name, grad in got_grads.items():
        torch.testing.assert_close(grad, want_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_an_adapted_output_layer_is_one_merged_weight() -> None:
    """The fused kernel takes the output layer as one weight: for a LoRA-adapted layer the
    merged W + scale * B A must give the layer's own output, and the gradients that reach A
    and B through the merge must be the layer's own."""
    model = tiny_lora_model(train_unembed=True, b_std=0.02)
    head = model.get_base_model().get_output_embeddings()
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(37, head.in_features, generator=g)
    upstream = torch.randn(37, head.out_features, generator=g)

    def adapter_grads(out: torch.Tensor) -> dict[str, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        (out * upstream).sum().backward()
        return {n: p.grad.clone() for n, p in head.named_parameters() if p.grad is not None}

    want = head(hidden)
    want_grads = adapter_grads(want)
    merged = forward.linear_weight(head)
    assert merged is not None
    got = F.linear(hidden, *merged)
    got_grads = adapter_grads(got)

    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert sorted(got_grads) == sorted(want_grads) and len(got_grads) == 2  # lora_A, lora_B
    for name, grad in got_grads.items():  # fp32 sums in another order: relative to the largest
        scale = want_grads[name].abs().max().item()
        torch.testing.assert_close(grad, want_grads[name], rtol=1e-5, atol=1e-5 * scale, msg=name)
    with model.disable_adapter():  # the reference pass: the base layer's weight alone
        weight, _ = forward.linear_weight(head)
        assert weight is head.get_base_layer().weight
