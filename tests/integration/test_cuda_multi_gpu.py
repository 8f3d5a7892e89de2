"""The local engine on a machine of several GPUs: an engine made while GPU 1 is current computes
on GPU 1 alone (its worker threads too), and two ranks over NCCL, one GPU each, take the
steps one GPU takes on the same batch, within bf16 rounding; their checkpoint resumes on one
GPU; and the same with the model's layers sharded over the two GPUs. Skipped with fewer than
two GPUs; run on such a machine with
`pytest tests/integration/test_cuda_multi_gpu.py -s` (-s prints the differences).
tests/perf/bench_multi_gpu.py measures the same on the Qwen3-0.6B shape, and the speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.support.data_parallel import STEPS, batch, run
from tinker import types

import thinker

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs"),
]


def test_an_engine_made_while_gpu_1_is_current_computes_on_gpu_1(tmp_path: Path) -> None:
    torch.cuda.set_device(1)
    try:
        service = thinker.ServiceClient(storage_dir=tmp_path)
        client = service.create_lora_training_client("thinker/tiny", rank=4).result()
        assert client._executor.submit(torch.cuda.current_device).result() == 1
        assert {p.device for p in client._params} == {torch.device("cuda", 1)}
        torch.cuda.synchronize(0)
        on_gpu_0 = torch.cuda.memory_allocated(0)
        client.forward_backward(batch(0), "cross_entropy").result()
        client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        sampler = client.save_weights_and_get_sampling_client().result()
        params = types.SamplingParams(max_tokens=8, temperature=1.0, stop=[])
        sampled = sampler.sample(types.ModelInput.from_ints([5, 6, 7]), 2, params).result()
        assert [len(s.tokens) for s in sampled.sequences] == [8, 8]
        assert torch.cuda.memory_allocated(0) == on_gpu_0  # nothing of it landed on GPU 0
    finally:
        torch.cuda.set_device(0)


@pytest.mark.parametrize("sharding", ["off", "fsdp"])
def test_two_gpus_step_as_one_and_their_checkpoint_resumes_on_one(
    tmp_path: Path, sharding: str
) -> None:
    """Each GPU holding the whole model, or half of each layer (FSDP2, its layers eager)."""
    two = run(tmp_path, 2, list(range(STEPS)), device="cuda", sharding=sharding)
    one = run(tmp_path, 1, list(range(STEPS)), device="cuda")
    for got, want in zip(two["seen"], one["seen"], strict=True):
        for key in ("ce", "pair", "grad_norm"):
            print(f"{key}: 2 GPUs {got[key]:.6g}, 1 GPU {want[key]:.6g}")
            assert got[key] == pytest.approx(want[key], rel=2e-2), key
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            torch.testing.assert_close(lp, ref, rtol=2e-2, atol=0.1)
    # AdamW's first steps move each weight by about the learning rate whatever the size of its
    # gradient, so a weight whose gradient is near 0 moves by +-lr on bf16 noise alone: the
    # largest elementwise difference is about lr over the largest weight on any two runs (on
    # one GPU too, the batch reordered: bench_multi_gpu.py). The norm of the difference is not.
    a, b = two["adapter"], one["adapter"]
    difference = max(float((a[k] - b[k]).norm() / b[k].norm()) for k in b)
    print(f"2 GPUs vs 1 after {STEPS} steps: adapter difference {difference:.1e} of its norm")
    assert difference < 2e-2
    resumed = run(tmp_path, 1, [STEPS], resume=two["path"], device="cuda")
    assert resumed["step"] == STEPS + 1
