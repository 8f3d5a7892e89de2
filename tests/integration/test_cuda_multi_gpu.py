"""The local engine on a machine of several GPUs: an engine made while GPU 1 is current computes
on GPU 1 alone (its worker threads too), and two ranks over NCCL, one GPU each, take the
steps one GPU takes on the same batch, within bf16 rounding; their checkpoint resumes on one
GPU; and with the model's layers sharded over the two GPUs they do the arithmetic of two GPUs
holding it whole, and sample and score (in lockstep) what one GPU does. Skipped with fewer
than two GPUs; run on such a machine with `pytest tests/integration/test_cuda_multi_gpu.py
-s` (-s prints the differences).
tests/perf/bench_multi_gpu.py measures the same on the Qwen3-0.6B shape, and the speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.support.data_parallel import ADAM, STEPS, batch, run, sample
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


def test_two_gpus_step_as_one_and_their_checkpoint_resumes_on_one(tmp_path: Path) -> None:
    two = run(tmp_path, 2, list(range(STEPS)), device="cuda")
    one = run(tmp_path, 1, list(range(STEPS)), device="cuda")
    # The first step starts from the same weights: the losses are one GPU's, the gradient's
    # norm too within bf16 rounding (each GPU rounds its share's LoRA gradient to bf16, then
    # the shares are summed in fp32; one GPU rounds the sum).
    first, first_one = two["seen"][0], one["seen"][0]
    for key in ("ce", "pair"):
        assert first[key] == pytest.approx(first_one[key], rel=1e-4), key
    assert first["grad_norm"] == pytest.approx(first_one["grad_norm"], rel=1e-3)
    for got, want in zip(two["seen"], one["seen"], strict=True):
        for key in ("ce", "pair", "grad_norm"):
            print(f"{key}: 2 GPUs {got[key]:.6g}, 1 GPU {want[key]:.6g}")
            assert got[key] == pytest.approx(want[key], rel=2e-2), key
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            torch.testing.assert_close(lp, ref, rtol=2e-2, atol=0.1)
    # AdamW's first steps move each weight by about the learning rate whatever the size of its
    # gradient (m / sqrt(v) is about its sign), so a weight whose gradient is near 0 moves by
    # +-lr on that rounding alone: the adapters differ by up to a few lr per weight, and no
    # norm of their difference is a fixed fraction (2.5e-2 of the norm in one run, where one
    # GPU against itself with the batch reversed gave 7.3e-6: reversing changes no rounding).
    # What bounds it is AdamW's step: over two steps with beta1 0.9 and beta2 0.95 each moves a
    # weight by at most 1.0004 lr (Cauchy-Schwarz on the bias-corrected m / sqrt(v)), so two
    # runs differ by at most about 2 lr a step; a gradient summed wrongly would not move
    # weights further, but shows in the first step's norm above.
    lr, a, b = ADAM.learning_rate, two["adapter"], one["adapter"]
    largest = max(float((a[k] - b[k]).abs().max()) for k in b)
    print(f"2 GPUs vs 1 after {STEPS} steps: largest adapter difference {largest:.1e} (lr {lr})")
    assert largest <= 2.01 * lr * STEPS
    resumed = run(tmp_path, 1, [STEPS], resume=two["path"], device="cuda")
    assert resumed["step"] == STEPS + 1


def test_two_sharded_gpus_do_the_arithmetic_of_two_whole_ones(tmp_path: Path) -> None:
    """The same two-GPU steps with the model's layers sharded (FSDP2) and with each GPU holding
    it whole, layers eager in both (a sharded model's always are). Before any optimizer step
    each GPU runs the same datums and rounds the same partial gradients, so the first step's
    losses, logprobs and gradient norm agree to fp32 rounding. The optimizers then differ in
    implementation (the whole model's AdamW is CUDA's fused kernel, the sharded one steps
    tensor by tensor), and Adam's update, about lr * sign(g), turns their last-bit
    differences into larger ones where |g| is tiny: later steps agree to 1e-3 (1.8e-4 seen
    in the gradient norm), each adapter weight to within the updates, 2 * lr a step."""
    sharded = run(tmp_path, 2, list(range(STEPS)), device="cuda", sharding="fsdp")
    whole = run(tmp_path, 2, list(range(STEPS)), device="cuda", compile_layers=False)
    for step, (got, want) in enumerate(zip(sharded["seen"], whole["seen"], strict=True)):
        rel = 1e-5 if step == 0 else 1e-3
        for key in ("ce", "pair", "grad_norm"):
            print(f"step {step} {key}: sharded {got[key]:.8g}, whole {want[key]:.8g}")
            assert got[key] == pytest.approx(want[key], rel=rel), (step, key)
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            tol = 1e-5 if step == 0 else 1e-2  # per token, bf16's resolution later
            torch.testing.assert_close(lp, ref, rtol=tol, atol=tol)
    a, b = sharded["adapter"], whole["adapter"]
    largest = max(float((a[k] - b[k]).abs().max()) for k in b)
    print(f"adapter: largest difference {largest:.2e} (lr {ADAM.learning_rate})")
    assert largest <= 2.01 * ADAM.learning_rate * STEPS
    resumed = run(tmp_path, 1, [STEPS], resume=sharded["path"], device="cuda")
    assert resumed["step"] == STEPS + 1


def test_two_sharded_gpus_sample_and_score_as_one_gpu(tmp_path: Path) -> None:
    """Sampling and scoring on a model sharded over two GPUs (each rank's calls in lockstep
    with the other's, the layers eager, the adapter unmerged) against one GPU holding it whole
    (merged adapter, fused decode, CUDA graphs): bf16 rounds the two differently, so scores
    agree to bf16's resolution and greedy tokens mostly, not bit for bit."""
    two = sample(tmp_path / "two", 2, device="cuda", sharding="fsdp")
    one = sample(tmp_path / "one", 1, device="cuda")
    lengths = [len(s) for r in two["tokens"] for s in r]
    assert lengths == [3, 3, 5, 5, 7, 7, 9, 9, 11, 11]
    pairs = [
        (a, b)
        for got, want in zip(two["tokens"], one["tokens"], strict=True)
        for x, y in zip(got, want, strict=True)
        for a, b in zip(x, y, strict=True)
    ]
    agree = sum(a == b for a, b in pairs) / len(pairs)
    print(f"tokens: {agree:.0%} the same as one GPU's")
    assert agree >= 0.8
    for key in ("policy", "base"):
        largest = max(
            max(abs(g - w) for g, w in zip(got[1:], want[1:], strict=True))
            for got, want in zip(two[key], one[key], strict=True)
        )
        print(f"{key} scores: largest difference {largest:.2e}")
        assert largest < 0.05
    print(f"the next step's loss: sharded {two['after']:.6g}, one GPU {one['after']:.6g}")
    assert two["after"] == pytest.approx(one["after"], rel=1e-2)
