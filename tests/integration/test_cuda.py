"""The local engine on a CUDA GPU: bf16 SL steps on a real model shape, sampling, save/load, QLoRA.

Skipped on machines without CUDA (CI has none); run on a GPU machine with
`pytest tests/integration/test_cuda.py`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from tinker import types

import thinker

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
QWEN = "thinker/random-qwen3-0.6b"


def _batch(vocab: int, batch: int, seq: int) -> list[types.Datum]:
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(0, vocab, (batch, seq + 1), generator=gen)
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(r[:-1].tolist()),
            loss_fn_inputs={"target_tokens": r[1:].tolist(), "weights": [1.0] * seq},
        )
        for r in rows
    ]


def test_bf16_sl_steps_sample_and_save_load_on_qwen3_shape(tmp_path: Path) -> None:
    service = thinker.ServiceClient(storage_dir=tmp_path)
    client = service.create_lora_training_client(QWEN, rank=16).result()
    assert (
        next(p for n, p in client._model.named_parameters() if "q_proj.base_layer" in n).dtype
        == torch.bfloat16
    )
    batch = _batch(151936, 4, 256)  # the same batch every step: the loss must fall
    losses = []
    for _ in range(4):
        fb = client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-3))
        losses.append(fb.result().metrics["loss:sum"] / (4 * 256))
    assert losses[-1] < losses[0], losses
    state = client.save_state("s4").result().path
    sampler = client.save_weights_and_get_sampling_client("s4").result()
    prompt = types.ModelInput.from_ints(batch[0].model_input.to_ints()[:64])
    out = sampler.sample(prompt, 8, types.SamplingParams(max_tokens=32, seed=0, stop=[])).result()
    assert [len(s.tokens) for s in out.sequences] == [32] * 8
    assert all(lp <= 0 for s in out.sequences for lp in s.logprobs)
    resumed = service.create_training_client_from_state_with_optimizer(state).result()
    assert resumed.step == 4
    next_loss = [
        c.forward(batch[:1], "cross_entropy").result().metrics["loss:sum"]
        for c in (client, resumed)
    ]
    assert next_loss[0] == pytest.approx(next_loss[1], rel=1e-3)


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="needs bitsandbytes")
def test_qlora_4bit_trains_and_samples(tmp_path: Path) -> None:
    service = thinker.ServiceClient(storage_dir=tmp_path, quantization="4bit")
    client = service.create_lora_training_client(QWEN, rank=16).result()
    assert getattr(client._model, "is_loaded_in_4bit", False) or any(
        "Linear4bit" in type(m).__name__ for m in client._model.modules()
    )
    batch = _batch(151936, 2, 128)
    losses = []
    for _ in range(4):
        fb = client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-3))
        losses.append(fb.result().metrics["loss:sum"])
    assert losses[-1] < losses[0], losses
    sampler = client.save_weights_and_get_sampling_client("q").result()
    out = sampler.sample(
        types.ModelInput.from_ints([1, 2, 3]), 2, types.SamplingParams(max_tokens=8, stop=[])
    ).result()
    assert [len(s.tokens) for s in out.sequences] == [8, 8]
