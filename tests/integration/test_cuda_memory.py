"""The local engine's memory on a CUDA GPU: gradient checkpointing and running out of memory.

Checkpointed layers must give the gradients of layers that keep their activations (the fast
path's compiled layers, on the Qwen3-0.6B shape). Running out of memory for real, in the
compiled and in the eager path, must not end the process: the engine gives the gradients
back, halves its budget and runs the call again, to the loss of a call that had room.
Skipped without CUDA; on the GPU machine `pytest tests/integration/test_cuda_memory.py -s`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tinker import types

import thinker
from thinker.engine.local import memory
from thinker.errors import BackendError

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
QWEN = "thinker/random-qwen3-0.6b"


def _batch(lengths: list[int], seed: int = 0) -> list[types.Datum]:
    gen = torch.Generator().manual_seed(seed)
    data = []
    for n in lengths:
        row = torch.randint(0, 151936, (n + 1,), generator=gen).tolist()
        weights = (torch.rand(n, generator=gen) * 2).tolist()
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(row[:-1]),
                loss_fn_inputs={"target_tokens": row[1:], "weights": weights},
            )
        )
    return data


def _client(tmp_path: Path):  # noqa: ANN202
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client(QWEN, rank=16, seed=0).result()
    for name, p in client._model.named_parameters():  # a non-zero adapter
        if "lora_B" in name:
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 1e-3)
    return client


def _grads(client) -> dict[str, torch.Tensor]:  # noqa: ANN001
    return {
        n: p.grad.float().cpu() for n, p in client._model.named_parameters() if p.grad is not None
    }


def _worst_relative(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys() and a
    return max(((a[n] - g).norm() / g.norm()).item() for n, g in b.items() if g.norm() > 0)


@pytest.mark.parametrize(
    "checkpointing",
    [
        memory.Checkpointing(every=1),
        memory.Checkpointing(every=1, offload=True, mlp_chunk=memory.MLP_CHUNK_TOKENS),
    ],
    ids=["every-layer", "offloaded-tiled-mlp"],
)
def test_checkpointed_layers_give_the_gradients_of_kept_activations(
    tmp_path: Path, checkpointing: memory.Checkpointing
) -> None:
    """Every layer checkpointed, and the longest sequences' plan (inputs offloaded, MLPs in
    chunks of 4,096 positions, run eagerly): the loss and gradients of kept activations."""
    client = _client(tmp_path)
    data = _batch([9000, 1100])  # the first sequence spans three MLP chunks
    kept = client.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]
    want = _grads(client)
    client._model.zero_grad(set_to_none=True)
    client._use_checkpointing(checkpointing, "the test asks for it")
    assert memory.is_checkpointed(client._model)
    # the budget would turn it off again for so short a batch: keep it on for this call
    client._passes = lambda data, with_graph: [(0, len(data))]  # type: ignore[method-assign]
    checkpointed = client.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]
    worst = _worst_relative(_grads(client), want)
    print(f"loss {checkpointed:.3f} vs {kept:.3f}; largest gradient difference {worst:.2e}")
    assert checkpointed == pytest.approx(kept, rel=1e-4)
    assert worst < 0.05  # bf16: the recomputed forward may round differently


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_running_out_of_memory_backs_off_and_the_call_succeeds(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    compiled: bool,
) -> None:
    """The free memory the budget reads is the driver's; the caching allocator is limited to
    the weights and a few GiB: a pass sized by the budget runs out of memory for real."""
    monkeypatch.setenv("THINKER_COMPILE", "1" if compiled else "0")
    data = _batch([6000, 6000, 6000, 6000], seed=2)  # each pass > the C++ wrapper's limit
    roomy = _client(tmp_path / "roomy")
    want_loss = roomy.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]
    want = _grads(roomy)
    del roomy
    torch.cuda.empty_cache()

    client = _client(tmp_path / "tight")
    total = torch.cuda.get_device_properties(0).total_memory
    allowed = torch.cuda.memory_allocated() + 6 * 2**30
    torch.cuda.set_per_process_memory_fraction(allowed / total)
    try:
        out = client.forward_backward(data, "cross_entropy").result()
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    log = capsys.readouterr().out
    worst = _worst_relative(_grads(client), want)
    print(log)
    print(f"loss {out.metrics['loss:sum']:.3f} vs {want_loss:.3f}; gradients {worst:.2e}")
    assert "[thinker] out of memory" in log and client._memory_scale < 1
    assert out.metrics["loss:sum"] == pytest.approx(want_loss, rel=1e-3)
    assert worst < 0.05


def test_out_of_memory_with_nothing_left_to_try_says_what_to_change(tmp_path: Path) -> None:
    client = _client(tmp_path)
    total = torch.cuda.get_device_properties(0).total_memory
    allowed = torch.cuda.memory_allocated() + 2**28  # 256 MiB: not even one short pass
    torch.cuda.set_per_process_memory_fraction(allowed / total)
    try:
        with pytest.raises(BackendError, match="out of memory .* lower max_length"):
            client.forward_backward(_batch([9000]), "cross_entropy").result()
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert all(p.grad is None for p in client._model.parameters())
