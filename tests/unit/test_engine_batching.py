"""How the local engine splits work: forward_backward in passes that fit memory (the same
gradient as one pass), and compute_logprobs requests answered together in batches (the same
answers as one at a time)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from tinker import types

import thinker
from thinker.engine.local import memory
from thinker.engine.local.forward import token_ranges
from thinker.engine.local.memory import Budget
from thinker.errors import BackendError

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


def _pin_budget(monkeypatch: pytest.MonkeyPatch, client: object, tokens: int) -> None:
    """Fix the tokens a pass may hold, so the split does not follow this machine's free memory."""
    budget = Budget(tokens=tokens, free_bytes=0, bytes_per_token=0, explanation="pinned")
    monkeypatch.setattr(client, "memory_budget", lambda longest=0: budget)


def test_a_batch_over_the_pass_budget_gives_the_one_pass_gradient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 datums of 699 tokens: one pass, then 15 passes of two (a budget of 1,500 tokens)."""
    g = torch.Generator().manual_seed(0)
    data = [_datum(torch.randint(3, 384, (700,), generator=g).tolist()) for _ in range(30)]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    _pin_budget(monkeypatch, client, 10**6)
    assert client._passes(data, with_graph=True) == [(0, 30)]
    whole = client.forward_backward(data, "cross_entropy").result()
    grads = {n: p.grad.clone() for n, p in client._model.named_parameters() if p.grad is not None}
    client._model.zero_grad()
    _pin_budget(monkeypatch, client, 1_500)
    assert len(client._passes(data, with_graph=True)) == 15
    split = client.forward_backward(data, "cross_entropy").result()
    # fp32 sums in another order: equal up to rounding, relative to the size of the sums
    assert split.metrics["loss:sum"] == pytest.approx(whole.metrics["loss:sum"], rel=1e-5)
    assert grads
    for name, p in client._model.named_parameters():
        if p.grad is not None:
            assert (p.grad - grads[name]).norm() <= 1e-4 * grads[name].norm(), name


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


def test_checkpointed_layers_train_to_the_same_gradient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """thinker/tiny, one sequence of 600 tokens, with transformers' gradient checkpointing on
    as the budget turns it on (every layer; which layers, the budget tests decide): the loss
    and gradient of layers that keep their activations, and the job log says why."""
    g = torch.Generator().manual_seed(1)
    data = [_datum(torch.randint(3, 384, (601,), generator=g).tolist())]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    kept = client.forward_backward(data, "cross_entropy").result()
    assert not memory.is_checkpointed(client._model)
    grads = {n: p.grad.clone() for n, p in client._model.named_parameters() if p.grad is not None}
    client._model.zero_grad()

    client._use_checkpointing(memory.Checkpointing(every=1), "the budget's reason")
    assert memory.is_checkpointed(client._model)
    assert "gradient checkpointing on 2 of 2 layers: the budget's reason" in capsys.readouterr().out
    # one pass as it is (the budget would turn checkpointing off for so short a sequence)
    monkeypatch.setattr(client, "_passes", lambda data, with_graph: [(0, len(data))])
    output = client.forward_backward(data, "cross_entropy").result()
    assert output.metrics["loss:sum"] == pytest.approx(kept.metrics["loss:sum"], rel=1e-6)
    assert grads
    for name, p in client._model.named_parameters():
        if p.grad is not None:
            assert (p.grad - grads[name]).norm() <= 1e-5 * grads[name].norm(), name
    client._use_checkpointing(memory.NO_CHECKPOINTING, "short sequences again")
    assert not memory.is_checkpointed(client._model)


def test_tiled_mlps_train_to_the_same_gradient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """thinker/tiny, one sequence of 600 tokens, every layer checkpointed and each MLP in
    chunks of 64 positions (the longest sequences' plan; 10 chunks a layer): the loss and
    gradient of whole MLPs, the chunks really taken, and the MLPs back as they were after."""
    g = torch.Generator().manual_seed(3)
    data = [_datum(torch.randint(3, 384, (601,), generator=g).tolist())]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    monkeypatch.setattr(client, "_passes", lambda data, with_graph: [(0, len(data))])
    kept = client.forward_backward(data, "cross_entropy").result()
    grads = {n: p.grad.clone() for n, p in client._model.named_parameters() if p.grad is not None}
    client._model.zero_grad()

    chunks: list[int] = []
    checkpoint = memory.checkpoint
    monkeypatch.setattr(
        memory, "checkpoint", lambda *a, **k: chunks.append(1) or checkpoint(*a, **k)
    )
    tiled = memory.Checkpointing(every=1, mlp_chunk=64)
    client._use_checkpointing(tiled, "the budget's reason")
    out = capsys.readouterr().out
    assert "gradient checkpointing on 2 of 2 layers, each MLP in chunks of 64 positions" in out
    output = client.forward_backward(data, "cross_entropy").result()
    # 2 layers x 10 chunks, run in the forward pass and again when each layer is recomputed
    assert len(chunks) == 2 * 2 * 10
    assert output.metrics["loss:sum"] == pytest.approx(kept.metrics["loss:sum"], rel=1e-6)
    assert grads
    for name, p in client._model.named_parameters():
        if p.grad is not None:
            assert (p.grad - grads[name]).norm() <= 1e-5 * grads[name].norm(), name
    client._use_checkpointing(memory.NO_CHECKPOINTING, "short sequences again")
    mlps = [m for n, m in client._model.named_modules() if n.endswith(".mlp")]
    assert mlps and all("forward" not in vars(m) and memory.TILED_ATTR not in vars(m) for m in mlps)


def test_a_sequence_that_cannot_fit_is_refused_with_the_setting_to_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = torch.Generator().manual_seed(2)
    data = [_datum(torch.randint(3, 384, (601,), generator=g).tolist())]
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    known = memory.estimate(client._model, client._placement)
    free = int((memory.MARGIN_BYTES + known.fixed) / (1 - memory.MARGIN_FRACTION)) + 10**6
    monkeypatch.setattr(memory, "free_memory", lambda device: free)
    with pytest.raises(BackendError, match=r"lower max_length to [\d,]+ or less") as refused:
        client.forward_backward(data, "cross_entropy").result()
    assert "600 tokens" in str(refused.value)
    assert all(p.grad is None for p in client._model.parameters())  # nothing half-applied


def test_requests_made_in_a_burst_decode_together_whatever_the_timing(tmp_path: Path) -> None:
    """Sample calls join a decode batch while it gathers, and which calls share a batch moves
    their logprobs in the last bits (measured 4.8e-7 on this model). Made inside `burst()`,
    they are held until the block ends, then decode as one batch: a pause between them (here
    longer than the gathering waits) changes nothing, bit for bit."""
    service = thinker.ServiceClient(storage_dir=tmp_path)
    trainer = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    policy = trainer.save_weights_and_get_sampling_client().result()
    prompts = [types.ModelInput.from_ints(list(range(10 + i, 30 + 3 * i))) for i in range(3)]

    def burst(pause: float) -> list[types.SampleResponse]:
        with policy.burst():
            futures = []
            for i, prompt in enumerate(prompts):
                params = types.SamplingParams(max_tokens=8, seed=5 + i)
                futures.append(policy.sample(prompt, 4, params))
                time.sleep(pause)
            time.sleep(pause)
            assert not any(f.future().done() for f in futures), "held until the block ends"
        return [f.result() for f in futures]

    quick, paused = burst(0.0), burst(0.2)
    for a, b in zip(quick, paused, strict=True):
        assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]
        assert [s.logprobs for s in a.sequences] == [s.logprobs for s in b.sequences]
