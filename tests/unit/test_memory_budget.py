"""The pass token budget (engine/local/memory.py) and the batch plan (algorithms/common.py), on
hand-computed values and on the two H200 calibration points."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from thinker.algorithms.common import plan_batch
from thinker.engine.local import memory
from thinker.engine.local.memory import Budget, ModelShape, bytes_per_token, pass_token_budget
from thinker.engine.local.models import BUILTIN_CONFIGS, Placement, attach_lora

GiB = 2**30
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CUDA_BF16 = Placement(torch.device("cuda", 0), torch.bfloat16)
QWEN3_06B = ModelShape(28, 1024, 3072, 16 * 128, 8 * 128, 151936, qk_norm=True)


def _meta_model(name: str, dtype: torch.dtype = torch.bfloat16) -> PeftModel:
    """A real-shaped model with LoRA r=16 on the 7 projections, on the meta device (no memory)."""
    with torch.device("meta"):
        base = AutoModelForCausalLM.from_config(BUILTIN_CONFIGS[name](), dtype=dtype)
    base.requires_grad_(False)
    return attach_lora(base, 16, 0, PROJECTIONS)


@pytest.mark.parametrize(
    ("name", "batch", "width", "peak_gib", "weight_bytes"),
    [
        ("thinker/random-qwen3-0.6b", 8, 1024, 18.4, 1.2e9),
        ("thinker/random-llama3.1-8b", 2, 2048, 46.9, 16.1e9),
    ],
)
def test_estimate_covers_the_h200_measurements(
    name: str, batch: int, width: int, peak_gib: float, weight_bytes: float
) -> None:
    """Measured on an H200 (bf16, fused kernels, fp32 adapter inputs): per token
    (peak - weights) / tokens = 2.16 MiB (Qwen3-0.6B), 7.98 MiB (Llama-3.1-8B). The estimate
    must not be below it, nor far above (2.47 and 9.02 MiB: 14% and 13% high)."""
    model = _meta_model(name)
    tokens = batch * width
    budget = pass_token_budget(model, CUDA_BF16, free_bytes=139 * GiB)
    measured = (peak_gib * GiB - weight_bytes) / tokens
    assert measured <= budget.bytes_per_token <= 1.2 * measured
    assert budget.tokens >= tokens
    fixed = memory.fixed_bytes(model, ModelShape.of(model))
    assert weight_bytes + fixed + tokens * budget.bytes_per_token >= peak_gib * GiB


def test_bytes_per_token_by_hand() -> None:
    """Qwen3-0.6B, bf16 (s = 2), h 1024, i 3072, q 2048, kv 1024, 28 layers. Per layer:
    fp32 adapter inputs 4 (5h + q + i) = 40,960; attention 2 (2q + 2kv) = 12,288; SwiGLU 3 s i
    = 18,432; norms 8h = 8,192; q/k norms 4 (q + kv) = 12,288; total 92,160. Once: 4h + s h =
    6,144. So 28 * 92,160 + 6,144 = 2,586,624 bytes. With the adapter in bf16 the inputs count
    once each, 2 (2h + q + i) = 14,336: 28 * 65,536 + 6,144 = 1,841,152. With gradient
    checkpointing (and fp32 inputs) the top layer's recompute, with the 28 layers' inputs
    2h each, is the peak: 28 * 2,048 + 2 (92,160 + 2 * 3,072) + 6,144 = 260,096."""
    assert bytes_per_token(QWEN3_06B, 2, fp32_adapter_inputs=True, checkpointed=False) == 2_586_624
    assert bytes_per_token(QWEN3_06B, 2, fp32_adapter_inputs=False, checkpointed=False) == (
        1_841_152
    )
    assert bytes_per_token(QWEN3_06B, 2, fp32_adapter_inputs=True, checkpointed=True) == 260_096


def test_shape_and_modes_read_from_the_model() -> None:
    model = _meta_model("thinker/random-qwen3-0.6b")
    assert ModelShape.of(model) == QWEN3_06B
    assert memory.casts_adapter_inputs(model, torch.bfloat16)
    assert not memory.casts_adapter_inputs(model, torch.float32)  # nothing to cast
    assert not memory.is_checkpointed(model)
    base = model.get_base_model()
    # transformers 5.x renamed it; the flag the layers carry is the same
    enable = getattr(base, "activation_checkpointing_enable", base.gradient_checkpointing_enable)
    enable()
    assert memory.is_checkpointed(model)


def test_cpu_budget_is_capped_and_floored() -> None:
    """thinker/tiny in fp32 takes 13,312 bytes a token (2 layers of 6,400 + 512), so 1 TiB
    would hold millions of tokens: the CPU cap applies. 1 GiB is all margin: the floor."""
    model = _meta_model("thinker/tiny", torch.float32)
    cpu = Placement(torch.device("cpu"), torch.float32)
    roomy = pass_token_budget(model, cpu, free_bytes=2**40)
    assert roomy.bytes_per_token == 13_312
    assert roomy.tokens == memory.CPU_MAX_TOKENS and "CPU cap" in roomy.explanation
    tight = pass_token_budget(model, cpu, free_bytes=GiB)
    assert tight.tokens == memory.MIN_TOKENS and "minimum" in tight.explanation
    assert pass_token_budget(model, cpu).free_bytes > 0  # measured: the available RAM


def test_explanation_gives_the_figures() -> None:
    budget = pass_token_budget(
        _meta_model("thinker/random-qwen3-0.6b"), CUDA_BF16, free_bytes=139 * GiB
    )
    assert budget.explanation.startswith("free memory 139.0 GiB on cuda:0")
    assert "2.47 MiB per token" in budget.explanation
    assert f"one pass holds {budget.tokens:,} tokens" in budget.explanation


# ---- plan_batch ---------------------------------------------------------------------------
class _LocalClient:
    """A training client with the local engine's memory_budget(): a fixed budget."""

    def __init__(self, tokens: int) -> None:
        self.budget = Budget(tokens, 100 * GiB, 2**20, f"one pass holds {tokens:,} tokens")

    def memory_budget(self, longest: int = 0) -> Budget:
        return self.budget


class _RemoteClient:
    """Tinker's client: no memory_budget(), it manages memory itself."""


@pytest.fixture
def lengths() -> Iterator[list[int]]:
    yield [100, 300, 500, 200]  # the longest, 500, sizes a pass


def test_automatic_plan_fits_the_step_in_one_pass(lengths: list[int]) -> None:
    """10,000 tokens / 500 = 20 examples fit; batch_size defaults to 16, so 1 pass of 16."""
    plan = plan_batch(_LocalClient(10_000), lengths, 16, None)
    assert (plan.batch_size, plan.micro_batch_size, plan.grad_accumulation) == (16, 16, 1)
    assert "20 per pass" in plan.explanation
    assert "batch_size 16 -> 1 pass(es) of up to 16 examples" in plan.explanation


def test_small_budget_accumulates_and_keeps_batch_size(lengths: list[int]) -> None:
    """3,000 / 500 = 6 fit: batch_size stays 16, in ceil(16 / 6) = 3 passes of 6, 6, 4."""
    plan = plan_batch(_LocalClient(3_000), lengths, 16, None)
    assert (plan.batch_size, plan.micro_batch_size, plan.grad_accumulation) == (16, 6, 3)
    assert [len(p) for p in plan.passes(list(range(16)))] == [6, 6, 4]


def test_budget_below_one_example_still_runs_one_per_pass() -> None:
    plan = plan_batch(_LocalClient(256), [1000], 8, None, unit="pairs")
    assert (plan.batch_size, plan.micro_batch_size, plan.grad_accumulation) == (8, 1, 8)
    assert "8 pass(es) of up to 1 pairs" in plan.explanation


def test_user_values_are_kept_and_a_risky_micro_batch_is_flagged(lengths: list[int]) -> None:
    """batch 32, micro 8 as set: ceil(32 / 8) = 4 passes. 2,000 / 500 = 4 fit: a warning."""
    plan = plan_batch(_LocalClient(2_000), lengths, 32, 8)
    assert (plan.batch_size, plan.micro_batch_size, plan.grad_accumulation) == (32, 8, 4)
    assert "micro_batch_size 8 (as set): WARNING" in plan.explanation
    assert "batch_size 32 -> 4 pass(es)" in plan.explanation
    calm = plan_batch(_LocalClient(100_000), lengths, 32, 8)
    assert "WARNING" not in calm.explanation


def test_grad_accumulation_rounds_up_and_micro_is_at_most_batch(lengths: list[int]) -> None:
    """batch 10, micro 4: ceil(10 / 4) = 3 passes (4, 4, 2). micro 64 > batch 10: one pass."""
    plan = plan_batch(_LocalClient(100_000), lengths, 10, 4)
    assert plan.grad_accumulation == 3
    assert [len(p) for p in plan.passes(list(range(10)))] == [4, 4, 2]
    whole = plan_batch(_LocalClient(100_000), lengths, 10, 64)
    assert (whole.micro_batch_size, whole.grad_accumulation) == (10, 1)


def test_remote_client_runs_the_step_in_one_pass(lengths: list[int]) -> None:
    plan = plan_batch(_RemoteClient(), lengths, 16, None)
    assert (plan.batch_size, plan.micro_batch_size, plan.grad_accumulation) == (16, 16, 1)
    assert "manages its own memory" in plan.explanation
    set_micro = plan_batch(_RemoteClient(), lengths, 16, 4)
    assert (set_micro.micro_batch_size, set_micro.grad_accumulation) == (4, 4)


# ---- gradient checkpointing, chosen by the budget -------------------------------------------
def test_a_long_sequence_turns_checkpointing_on_only_as_far_as_it_must(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Llama-3.1-8B shape, 64 GiB free: 2,048 tokens need no checkpointing; 32,768 need some
    layers checkpointed, and one layer fewer would not fit; 80,000 need every layer's input
    offloaded to host memory; ten million fit nowhere and the budget says what to lower."""
    monkeypatch.setattr(memory, "available_ram", lambda *a: 256 * GiB)  # the host, pinned
    model = _meta_model("thinker/random-llama3.1-8b")
    known = memory.estimate(model, CUDA_BF16)

    def budget(longest: int) -> Budget:
        return memory.budget_of(known, CUDA_BF16, free_bytes=64 * GiB, longest=longest)

    short = budget(2_048)
    assert short.checkpointing == memory.NO_CHECKPOINTING and short.tokens >= 2_048
    assert "no gradient checkpointing" in short.explanation

    long = budget(32_768)
    layers = long.checkpointing.layers(32)
    assert 0 < layers <= 32 and not long.checkpointing.offload and long.tokens >= 32_768
    fewer = [c for c in known.choices(CUDA_BF16.device) if c.layers(32) < layers]
    usable = long.tokens * long.bytes_per_token  # what the budget divided, about
    assert all(usable // known.per_token_with(c) < 32_768 for c in fewer)
    assert f"gradient checkpointing on {layers} of 32 layers because" in long.explanation

    offloaded = budget(80_000)
    assert offloaded.checkpointing == memory.Checkpointing(every=1, offload=True)
    assert offloaded.tokens >= 80_000 and "offloaded to host memory" in offloaded.explanation

    # Past what offloading holds, the MLPs go in chunks; only then (each chunk runs twice).
    beyond = offloaded.longest_fits  # what the best choice holds
    offload_only = memory._holds(known, offloaded.checkpointing, _usable(64 * GiB, known))
    tiled = budget(offload_only + 1)
    assert tiled.checkpointing == memory.Checkpointing(
        every=1, offload=True, mlp_chunk=memory.MLP_CHUNK_TOKENS
    )
    assert tiled.tokens > offload_only and beyond is not None and beyond >= tiled.tokens
    assert "each MLP in chunks of 4,096 positions" in tiled.explanation

    too_long = budget(10_000_000)
    assert too_long.longest_fits is not None and too_long.longest_fits < 10_000_000
    assert f"lower max_length to {too_long.longest_fits:,} or less" in too_long.explanation


def _usable(free: int, known: memory.Estimate) -> int:
    return int(free * (1 - memory.MARGIN_FRACTION)) - memory.MARGIN_BYTES - known.fixed


def test_a_tiled_mlp_costs_a_chunk_not_a_share_of_each_token() -> None:
    """Llama-3.1-8B shape, bf16 adapter inputs, every layer checkpointed and offloaded: the
    recomputed layer's MLP, (3 s i + s i) + 2 s i = 6 s i a token (offloaded, its activations
    count once), becomes 2 s h a token (its output and gradient) plus a fixed
    2 x 4,096 x (4 s i + s i) for the chunk."""
    shape = ModelShape.of(_meta_model("thinker/random-llama3.1-8b"))
    s, h, i = 2, shape.hidden, shape.intermediate
    offload = memory.Checkpointing(every=1, offload=True)
    tiled = memory.Checkpointing(every=1, offload=True, mlp_chunk=4096)
    whole = bytes_per_token(shape, s, False, offload)
    assert whole - bytes_per_token(shape, s, False, tiled) == 4 * s * i + 2 * s * i - 2 * s * h
    assert memory.tiled_mlp_bytes(shape, s, False, 4096) == 2 * 4096 * (4 * s * i + s * i)


def test_checkpointing_memory_by_hand() -> None:
    """4 layers of 1,000 bytes a token, a recomputed layer's backward 2,500, inputs of 10.
    Every 2nd layer (0 and 2) checkpointed: after the forward pass 10 + 1,000 + 10 + 1,000 =
    2,020; recomputing layer 2 holds layers 0 and 1 (1,010), its input (10) and 2,500: 3,520.
    Offloaded, the stored inputs leave the device: 1,000 + 10 + 2,500 = 3,510. Every layer:
    30 + 10 + 2,500 = 2,540."""
    two = memory.Checkpointing(every=2)
    assert memory._layers_peak(4, two, 1_000, 2_500, 10) == 3_520
    offloaded = memory.Checkpointing(2, offload=True)
    assert memory._layers_peak(4, offloaded, 1_000, 2_500, 10) == 3_510
    assert memory._layers_peak(4, memory.NO_CHECKPOINTING, 1_000, 2_500, 10) == 4_000
    assert memory._layers_peak(4, memory.Checkpointing(every=1), 1_000, 2_500, 10) == 2_540
