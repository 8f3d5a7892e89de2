"""How the local engine splits work: forward_backward in passes that fit memory (the same
gradient as one pass), and compute_logprobs requests answered together in batches (the same
answers as one at a time)."""

from __future__ import annotations

from pathlib import Path

import torch
from tinker import types

import thinker
from thinker.engine.local.forward import token_ranges

torch.set_num_threads(1)


def test_token_ranges_keep_order_and_budget() -> None:
    assert token_ranges([4, 4, 4, 9, 1], budget=8) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert token_ranges([3, 3], budget=100) == [(0, 2)]
    assert token_ranges([50], budget=8) == [(0, 1)]  # too long alone: still one pass


def _datum(tokens: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def test_a_batch_over_the_pass_budget_gives_the_one_pass_gradient(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    data = [_datum(torch.randint(3, 384, (700,), generator=g).tolist()) for _ in range(30)]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    budget = client.memory_budget().tokens
    assert sum(d.model_input.length for d in data) > budget  # so it takes several passes
    whole = client.forward_backward(data, "cross_entropy").result()
    grads = {n: p.grad.clone() for n, p in client._model.named_parameters() if p.grad is not None}
    client._model.zero_grad()
    parts = [
        client.forward_backward(data[i : i + 5], "cross_entropy").result() for i in range(0, 30, 5)
    ]
    assert abs(whole.metrics["loss:sum"] - sum(p.metrics["loss:sum"] for p in parts)) < 1e-2
    for name, p in client._model.named_parameters():
        if p.grad is not None:
            assert torch.allclose(p.grad, grads[name], atol=1e-4, rtol=1e-3), name  # fp32 sum order


def test_logprob_requests_made_together_match_single_requests(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 384, (n,), generator=g).tolist() for n in (40, 1, 300, 7)]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    futures = [sampler.compute_logprobs(types.ModelInput.from_ints(p)) for p in prompts]
    together = [f.result() for f in futures]
    alone = [sampler.compute_logprobs(types.ModelInput.from_ints(p)).result() for p in prompts]
    assert [len(x) for x in together] == [40, 1, 300, 7]
    assert together[1] == [None]
    for a, b in zip(together, alone, strict=True):
        assert a[0] is None and b[0] is None
        assert torch.allclose(torch.tensor(a[1:]), torch.tensor(b[1:]), atol=1e-5)
