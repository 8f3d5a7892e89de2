"""The CUDA fast path against the plain transformers + PEFT path on a real model shape.

The fast path (engine/local/fast.py: compiled layers, fused kernels, packing into flat rows,
bf16 adapter matmuls, CUDA-graph decode) is on by default on CUDA; THINKER_FAST=0 gives the
plain path. Both clients start from the same seeded weights, so at the first step their
losses, logprobs and LoRA gradients must agree within bf16 rounding. Skipped without CUDA;
run on the GPU machine with `pytest tests/integration/test_cuda_fast_path.py -s` (-s prints
the measured differences).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tinker import types

import thinker
from thinker.engine.local import (
    decode_attention,
    draw_kernel,
    fast,
    forward,
    fused_decode,
    prefix,
)
from thinker.engine.local.models import Placement, attach_lora, load_base_model, load_tokenizer
from thinker.engine.local.sampling import LocalSamplingClient

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
QWEN = "thinker/random-qwen3-0.6b"
LENGTHS = [700, 64, 300, 37, 512, 129]  # unequal: the fast path packs them


def _batch() -> list[types.Datum]:
    gen = torch.Generator().manual_seed(0)
    rows = [torch.randint(0, 151936, (n + 1,), generator=gen).tolist() for n in LENGTHS]
    # Unequal weights: the fused output layer's per-token gradients must carry each one.
    weights = [(torch.rand(n, generator=gen) * 2).tolist() for n in LENGTHS]
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(r[:-1]),
            loss_fn_inputs={"target_tokens": r[1:], "weights": w},
        )
        for r, w in zip(rows, weights, strict=True)
    ]


def _first_step(tmp_path: Path, fast: bool, train_unembed: bool) -> dict:
    with pytest.MonkeyPatch.context() as mp:  # THINKER_FAST only while this side runs
        mp.setenv("THINKER_FAST", "1" if fast else "0")
        chunked: list[int] = []  # output-layer passes that did not take the fused kernel
        unfused = forward._chunked_head_logprobs
        mp.setattr(forward, "_chunked_head_logprobs", lambda *a: chunked.append(1) or unfused(*a))
        client = (
            thinker.ServiceClient(storage_dir=tmp_path / str(fast))
            .create_lora_training_client(QWEN, rank=16, seed=0, train_unembed=train_unembed)
            .result()
        )
        for name, p in client._model.named_parameters():  # a non-zero adapter, the same on both
            if "lora_B" in name:
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 1e-3)
        out = client.forward_backward(_batch(), "cross_entropy").result()
    grads = {
        n: p.grad.float().cpu() for n, p in client._model.named_parameters() if p.grad is not None
    }
    logprobs = [torch.tensor(o["logprobs"].tolist()) for o in out.loss_fn_outputs]
    result = {"loss": out.metrics["loss:sum"], "logprobs": logprobs, "grads": grads}
    result["chunked_passes"] = len(chunked)
    del client
    torch.cuda.empty_cache()
    return result


@pytest.fixture(scope="module", params=[True, False], ids=["adapted-head", "plain-head"])
def both(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict, dict]:
    """Either way the fast path's output layer is Liger's fused linear cross-entropy: with
    train_unembed (Tinker's default) over the adapted layer's merged weight W + scale * B A,
    whose gradient reaches the adapter through the merge; the plain path runs the layer."""
    assert importlib.util.find_spec("liger_kernel"), "the fused head needs liger-kernel"
    tmp = tmp_path_factory.mktemp("fast")
    return _first_step(tmp, True, request.param), _first_step(tmp, False, request.param)


def test_fast_path_loss_and_logprobs_match_the_plain_path(both: tuple[dict, dict]) -> None:
    fast, plain = both
    rel = abs(fast["loss"] - plain["loss"]) / abs(plain["loss"])
    worst = max(
        (a - b).abs().max().item() for a, b in zip(fast["logprobs"], plain["logprobs"], strict=True)
    )
    print(
        f"summed loss {fast['loss']:.3f} vs {plain['loss']:.3f} (rel {rel:.2e}); "
        f"largest per-token logprob difference {worst:.4f}"
    )
    assert [len(x) for x in fast["logprobs"]] == LENGTHS
    assert rel < 1e-3
    assert worst < 0.1  # bf16 rounding of one token's logprob


def test_the_fast_path_trains_the_output_layer_in_the_fused_kernel(
    both: tuple[dict, dict],
) -> None:
    fast, plain = both
    assert fast["chunked_passes"] == 0 and plain["chunked_passes"] > 0


def test_fast_path_lora_gradients_match_the_plain_path(both: tuple[dict, dict]) -> None:
    fast, plain = both
    assert fast["grads"].keys() == plain["grads"].keys() and plain["grads"]
    rel = {
        n: ((fast["grads"][n] - g).norm() / g.norm()).item()
        for n, g in plain["grads"].items()
        if g.norm() > 0
    }
    worst = max(rel, key=rel.get)
    print(
        f"largest relative gradient difference {rel[worst]:.2e} ({worst}); "
        f"median {sorted(rel.values())[len(rel) // 2]:.2e} over {len(rel)} tensors"
    )
    assert rel[worst] < 0.05


def test_graph_decode_logprobs_are_the_training_logprobs(tmp_path: Path) -> None:
    """RL's importance ratios start at 1: the sampler's logprobs of its own tokens (decoded by
    a replayed CUDA graph) equal what the training client computes for the same sequence."""
    client = (
        thinker.ServiceClient(storage_dir=tmp_path)
        .create_lora_training_client(QWEN, rank=16)
        .result()
    )
    sampler = client.save_weights_and_get_sampling_client().result()
    prompt = _batch()[3].model_input.to_ints()
    params = types.SamplingParams(max_tokens=48, temperature=1.0, seed=3, stop=[])
    out = sampler.sample(types.ModelInput.from_ints(prompt), 4, params).result()
    capture = prefix._CAPTURES.get(client._model)
    assert capture is not None and capture.graphs  # the graph path really ran
    diffs = []
    for seq in out.sequences:
        tokens = prompt + list(seq.tokens)
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
        )
        trained = client.forward([datum], "cross_entropy").result()
        expected = torch.tensor(trained.loss_fn_outputs[0]["logprobs"].tolist())[-48:]
        diffs.append((torch.tensor(seq.logprobs) - expected).abs())
    diff = torch.cat(diffs)
    print(f"sampled vs trained logprobs: max difference {diff.max():.4f}, mean {diff.mean():.5f}")
    assert diff.max() < 0.15 and diff.mean() < 0.02  # bf16 rounding, not a different model
    # The same call again (captured anew: the forwards above took the memory back) repeats
    # itself with its seed.
    again = sampler.sample(types.ModelInput.from_ints(prompt), 4, params).result()
    assert [s.tokens for s in again.sequences] == [s.tokens for s in out.sequences]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_fused_draw_samples_the_softmax_and_reports_the_logits_logprobs(
    temperature: float,
) -> None:
    """draw_kernel over Qwen3's vocabulary: 8,192 rows of the same bf16 logits (a few likely
    tokens, a long tail) draw tokens whose frequencies are softmax(logits / T)'s within 5
    standard errors, each reported with log_softmax(logits)[token]; a seed gives the same
    tokens however the vocabulary is sliced, and another seed other tokens."""
    gen = torch.Generator().manual_seed(0)
    vocab, rows = 151936, 8192
    one = torch.randn(vocab, generator=gen) * 2
    one[torch.randperm(vocab, generator=gen)[:12]] += 9  # where most of the mass is
    logits = one.to("cuda", torch.bfloat16).expand(rows, vocab).contiguous()
    assert draw_kernel.available(logits)

    def draw(seed: int, slices: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        token = torch.empty(rows, dtype=torch.long, device="cuda")
        history = torch.empty((rows, 3), dtype=torch.long, device="cuda")
        logprob = torch.empty((rows, 3), dtype=torch.float32, device="cuda")
        draw_kernel.draw(logits, temperature, seed, token, history[:, 1], logprob[:, 1], slices)
        assert torch.equal(token, history[:, 1])
        return token, logprob[:, 1]

    token, logprob = draw(1234)
    reference = torch.log_softmax(logits[0].float(), -1)
    error = (logprob - reference[token]).abs().max().item()
    p = torch.softmax(logits[0].float() / temperature, -1)
    frequency = torch.bincount(token, minlength=vocab).float() / rows
    likely = p > 1e-3
    z = ((frequency - p).abs() / (p * (1 - p) / rows).sqrt())[likely]
    print(
        f"T={temperature}: logprob error {error:.2e}; {int(likely.sum())} tokens over 1e-3, "
        f"largest z {z.max():.2f}; mass drawn outside them {frequency[~likely].sum():.4f} "
        f"(expected {p[~likely].sum():.4f})"
    )
    assert error < 1e-5
    assert z.max() < 5
    assert abs(frequency[~likely].sum() - p[~likely].sum()) < 5 * (p[~likely].sum() / rows) ** 0.5
    assert torch.equal(draw(1234, slices=1)[0], token)  # one slice a row, as the default's many
    assert torch.equal(draw(1234)[0], token)
    assert (draw(4321)[0] != token).float().mean() > 0.2


def test_shared_prompt_decode_gives_what_independent_decoding_gives() -> None:
    """4 prompts x 8 greedy samples decoded together, each prompt's cache shared by its
    samples (CUDA graphs, 150 tokens: two token buckets), against each prompt decoded alone
    with its cache repeated per sample (the per-call CUDA-graph decode): the same tokens and
    logprobs. In fp32, so that no near-tie of bf16 rounding can pick another token."""
    device = torch.device("cuda")
    base = load_base_model(QWEN, Placement(device, torch.float32, None))
    model = attach_lora(base, rank=16, seed=0, targets=["q_proj", "v_proj", "down_proj"])
    for name, p in model.named_parameters():  # an adapter that changes the logits
        if "lora_B" in name:
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 1e-2)
    client = LocalSamplingClient(model, load_tokenizer(QWEN), QWEN, None, device)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, 151936, (n,), generator=gen).tolist() for n in (37, 100, 5, 64)]
    params = types.SamplingParams(max_tokens=150, temperature=0.0, stop=[])
    calls = [client.sample(types.ModelInput.from_ints(p), 8, params) for p in prompts]
    together = [c.result() for c in calls]
    capture = prefix._CAPTURES.get(model)
    assert capture is not None and capture.cache.layout.counts == (8, 8, 8, 8)
    assert len(capture.graphs) == 2  # both token buckets replayed as CUDA graphs
    diffs = []
    with pytest.MonkeyPatch.context() as mp:  # each prompt alone: the per-call path
        mp.setattr(prefix, "can_decode", lambda model: False)
        alone_calls = [client.sample(types.ModelInput.from_ints(p), 8, params) for p in prompts]
        alone_all = [c.result() for c in alone_calls]
    for got, alone in zip(together, alone_all, strict=True):
        for seq, ref in zip(got.sequences, alone.sequences, strict=True):
            assert list(seq.tokens) == list(ref.tokens)
            diffs.append((torch.tensor(seq.logprobs) - torch.tensor(ref.logprobs)).abs())
    diff = torch.cat(diffs)
    print(f"shared vs independent logprobs: max difference {diff.max():.2e}")
    assert diff.max() < 1e-3


def test_top_k_logprobs_on_the_graph_decode(tmp_path: Path) -> None:
    """The SDK's top-k options on the CUDA path (a trainer's sampler: shared-prompt decode,
    CUDA graphs, bf16), greedy: each step's top-k is sorted, headed by the sampled token with
    its own logprob, and agrees with a plain forward of the same sequence over the whole
    vocabulary within bf16 rounding; the prompt's top-k likewise."""
    client = (
        thinker.ServiceClient(storage_dir=tmp_path)
        .create_lora_training_client(QWEN, rank=16)
        .result()
    )
    sampler = client.save_weights_and_get_sampling_client().result()
    prompt = _batch()[1].model_input.to_ints()
    params = types.SamplingParams(max_tokens=40, temperature=0.0, stop=[])  # greedy
    out = sampler.sample(
        types.ModelInput.from_ints(prompt),
        4,
        params,
        include_prompt_logprobs=True,
        topk_prompt_logprobs=3,
        topk_sample_logprobs=5,
    ).result()
    assert prefix._CAPTURES.get(client._model) is not None  # the shared-prompt decode ran
    listed = 0
    diffs = []
    for seq in out.sequences:
        tokens = prompt + list(seq.tokens)
        with torch.inference_mode(), fast.adapter_autocast(client._model):
            logits = client._model(torch.tensor([tokens], device="cuda")).logits[0]
        plain = torch.log_softmax(logits.float(), dim=-1)[len(prompt) - 1 : -1]
        assert seq.topk_logprobs is not None and len(seq.topk_logprobs) == len(seq.tokens)
        for step, (top, token, logprob) in enumerate(
            zip(seq.topk_logprobs, seq.tokens, seq.logprobs, strict=True)
        ):
            assert top is not None and len(top) == 5
            values = [v for _, v in top]
            assert values == sorted(values, reverse=True)
            assert top[0][0] == token  # greedy: the sampled token heads its top-k
            assert top[0][1] == pytest.approx(logprob, abs=1e-6)
            listed += 1
            ids = torch.tensor([i for i, _ in top], device="cuda")
            diffs.append((plain[step, ids].cpu() - torch.tensor(values)).abs())
    diff = torch.cat(diffs)
    print(f"top-k vs plain forward: max {diff.max():.4f}, mean {diff.mean():.5f}; {listed} listed")
    assert listed > 0 and diff.max() < 0.15 and diff.mean() < 0.02
    prompt_top = out.topk_prompt_logprobs
    assert prompt_top is not None and prompt_top[0] is None and len(prompt_top) == len(prompt)
    with torch.inference_mode(), fast.adapter_autocast(client._model):
        logits = client._model(torch.tensor([prompt], device="cuda")).logits[0]
    plain = torch.log_softmax(logits.float(), dim=-1)
    for position in range(1, len(prompt)):
        top = prompt_top[position]
        assert top is not None and len(top) == 3
        for token, value in top:
            assert abs(plain[position - 1, token].item() - value) < 0.15


def _teacher_forced(model, prompts, counts, tokens_SB, graphs: bool) -> tuple[torch.Tensor, str]:  # noqa: ANN001
    """Logits of every step of a shared-prompt decode fed `tokens_SB` (steps x rows), and how
    its steps ran (the layout's adapter: "fused", or through the layers)."""
    decoder = prefix.PrefixDecoder(model, model.config, graphs=graphs)
    logits = [decoder.prefill(prompts, counts, tokens_SB.shape[0] + 1)]
    # A copy of each: a replayed step's logits are the graph's buffer (fp32 `.float()` is no
    # copy).
    logits += [decoder.step(token_B).to(torch.float32, copy=True) for token_B in tokens_SB]
    ran = prefix._CAPTURES[model].cache.layout.adapter
    prefix.release(model)
    return torch.stack(logits), ran


@pytest.mark.parametrize("counts", [[8, 8, 8, 8], [3, 5, 2, 6], [1, 1, 1, 1]])
def test_decode_kernels_are_as_close_to_fp32_as_the_eager_decode(
    monkeypatch: pytest.MonkeyPatch, counts: list[int]
) -> None:
    """The shared-prompt decode's fused step (fused_decode.py: stacked projections, Liger's
    add + RMSNorm, the heads' norm + RoPE and SiLU * up kernels) with its attention as eager
    products, through the Triton decode kernel (one kernel a layer) and through FlashAttention
    (two kernels a layer and a log-sum-exp merge), CUDA graphs, 150 steps (two token buckets),
    against the step through transformers' layers with eager products, all in bf16, each
    compared with the layers' decode in fp32: none is further from fp32 than the layers' path
    (bf16 rounding, not a different model). 16 rows, as many as the model's query heads,
    check FlashAttention's log-sum-exp layout."""
    device = torch.device("cuda")
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, 151936, (n,), generator=gen).tolist() for n in (37, 100, 5, 64)]
    tokens_SB = torch.randint(0, 151936, (150, sum(counts)), generator=gen).to(device)
    caches = {
        "layers": prefix.SharedPromptCache,
        "eager": prefix.SharedPromptCache,
        "flash": prefix.FlashPromptCache,
        "kernel": prefix.KernelPromptCache,
    }

    def decode(dtype: torch.dtype, path: str) -> torch.Tensor:
        monkeypatch.setenv("THINKER_DECODE_KERNEL", "1" if path == "kernel" else "0")
        monkeypatch.setenv("THINKER_FLASH_DECODE", "1" if path == "flash" else "0")
        monkeypatch.setenv("THINKER_FUSED_DECODE", "0" if path == "layers" else "1")
        base = load_base_model(QWEN, Placement(device, dtype, None))
        model = attach_lora(base, rank=16, seed=0, targets=["q_proj", "v_proj", "down_proj"])
        for name, p in model.named_parameters():
            if "lora_B" in name:
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)) * 1e-2)
        with torch.inference_mode(), fast.eager():
            probe = prefix.SharedPromptCache.allocate(
                prefix.Layout((1,), 64, 128, "off"), model.config, dtype, device
            )
            assert type(probe) is caches[path]  # the path named really runs
            out, ran = _teacher_forced(model, prompts, counts, tokens_SB, graphs=True)
            assert ran == ("merged" if path == "layers" else "fused")
            return torch.log_softmax(out, dim=-1)

    reference = decode(torch.float32, "layers")
    errors = {path: (decode(torch.bfloat16, path) - reference).abs() for path in caches}
    print(
        f"counts {counts}: logprob error vs fp32 in bf16, "
        + "; ".join(f"{k} max {e.max():.3f} mean {e.mean():.4f}" for k, e in errors.items())
    )
    for path in ("eager", "flash", "kernel"):
        assert errors[path].mean() <= 1.25 * errors["layers"].mean()
        assert errors[path].max() <= 1.5 * errors["layers"].max()


@pytest.mark.parametrize("norm", [True, False], ids=["qwen3-heads-norm", "llama"])
def test_fused_decode_kernels_against_their_torch_arithmetic(norm: bool) -> None:
    """The fused step's two Triton kernels (heads' RMSNorm + RoPE, with the value heads
    copied beside the keys; SiLU(gate) * up) against the torch operations the CPU runs
    (transformers' arithmetic), bf16, on odd positions: within one bf16 rounding."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    gen = torch.Generator(device).manual_seed(7)
    rows, q_heads, kv_heads, dim = 37, 16, 8, 128
    qkv = torch.randn(rows, (q_heads + 2 * kv_heads) * dim, generator=gen, device=device)
    qkv = qkv.to(dtype)
    position_B = torch.randint(0, 5000, (rows,), generator=gen, device=device)
    angles = torch.arange(5000, device=device)[:, None] * 0.37 ** torch.arange(dim, device=device)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)

    def norm_weights() -> tuple[torch.Tensor, float]:
        w = 1 + 0.2 * torch.randn(dim, generator=gen, device=device)
        return w.to(dtype), 1e-6

    layer = SimpleNamespace(
        q_norm=norm_weights() if norm else None, k_norm=norm_weights() if norm else None
    )
    args = (qkv, layer, position_B, cos, sin, q_heads, kv_heads, dim)
    for got, want in zip(
        fused_decode._heads(*args, triton_ok=True),
        fused_decode._heads(*args, triton_ok=False),
        strict=True,
    ):
        assert got.shape == want.shape
        diff = (got.float() - want.float()).abs()
        assert (diff <= 2**-7 * want.float().abs() + 1e-2).all(), diff.max()
    gate_up = torch.randn(rows, 2 * 3072, generator=gen, device=device).to(dtype)
    got = fused_decode._silu_mul(gate_up, triton_ok=True)
    want = fused_decode._silu_mul(gate_up, triton_ok=False)
    torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-3)  # exp's rounding may differ


@pytest.mark.parametrize(
    ("counts", "query_heads", "key_heads", "dim", "splits"),
    [((3, 5, 2), 16, 8, 128, 1), ((3, 5, 2), 16, 8, 128, 5), ((1, 2), 28, 4, 80, 3)],
)
def test_decode_kernel_against_fp32_attention(
    counts: tuple[int, ...], query_heads: int, key_heads: int, dim: int, splits: int
) -> None:
    """decode_attention.attend on ragged groups, prompts and own runs, in one slice and cut
    in several (merged by log-sum-exps), a head dimension not a power of two and 7 query
    heads a key head: within bf16 rounding of fp32 attention over each row's keys (its
    prompt, its cached run, the step's token), and the step's key and value kept."""
    device = torch.device("cuda")
    gen = torch.Generator().manual_seed(7)
    groups, rows = len(counts), sum(counts)
    group_B = torch.repeat_interleave(torch.arange(groups), torch.tensor(counts))
    prompt_used = torch.randint(1, 700, (groups,), generator=gen)
    own_used = torch.randint(1, 300, (rows,), generator=gen)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen).to(device, torch.bfloat16)

    # The query as transformers passes it: a (rows, heads, 1, dim) view of (rows, 1, heads, dim).
    query = randn(rows, 1, query_heads, dim).transpose(1, 2)[:, :, 0]
    key, value = (randn(rows, 1, key_heads, dim).transpose(1, 2)[:, :, 0] for _ in range(2))
    prompt_k, prompt_v = randn(groups, 700, key_heads, dim), randn(groups, 700, key_heads, dim)
    own_k, own_v = randn(rows, key_heads, 300, dim), randn(rows, key_heads, 300, dim)
    scale = dim**-0.5
    got = decode_attention.attend(
        query, key, value, prompt_k, prompt_v, own_k, own_v,
        group_B.to(device, torch.int32), prompt_used.to(device, torch.int32),
        own_used.to(device, torch.int32), scale, splits,
    )  # fmt: skip
    assert got.dtype == torch.bfloat16 and got.shape == (rows, query_heads, dim)
    # The step's key and value, kept in each row's run:
    rows_B, last = torch.arange(rows, device=device), own_used.to(device) - 1
    assert torch.equal(own_k[rows_B, :, last], key)
    assert torch.equal(own_v[rows_B, :, last], value)
    share = query_heads // key_heads
    worst = 0.0
    for b in range(rows):
        g, p, t = group_B[b], prompt_used[group_B[b]], own_used[b]
        keys = torch.cat([prompt_k[g, :p].transpose(0, 1), own_k[b, :, :t]], dim=1).float()
        values = torch.cat([prompt_v[g, :p].transpose(0, 1), own_v[b, :, :t]], dim=1).float()
        # (own_k/v[b, :, t - 1] now hold the step's key and value: checked above)
        keys, values = keys.repeat_interleave(share, 0), values.repeat_interleave(share, 0)
        weights = torch.softmax(query[b].float()[:, None] @ keys.transpose(1, 2) * scale, -1)
        want = (weights @ values)[:, 0]
        worst = max(worst, (got[b].float() - want).abs().max().item())
    print(f"kernel vs fp32 attention, splits {splits}: max difference {worst:.2e}")
    assert worst < 2e-2  # bf16 inputs and probabilities


def test_padded_row_packing_keeps_sequences_apart_as_flat_rows_do() -> None:
    """Packing several sequences into one padded row (the path of a model whose attention
    cannot take flat rows, e.g. a sliding window) keeps each within its own positions and
    attention: its logprobs differ from one-sequence-per-row logprobs no more than flat rows'
    (bf16 rounding), where a sequence seeing its row-mate would differ by far more."""
    from thinker.engine.local import attention

    device = torch.device("cuda")
    model = load_base_model(QWEN, Placement(device, torch.bfloat16))
    assert getattr(model, attention.ENABLED_ATTR, False), "the flat rows to compare with"
    gen = torch.Generator().manual_seed(0)
    lengths = [300, 40, 37, 129, 64]  # packed two and three to a padded row of 300
    inputs = [torch.randint(100, 5000, (n,), generator=gen).tolist() for n in lengths]
    targets = [torch.tensor([*x[1:], 7]) for x in inputs]
    assert len(forward.pack_rows(lengths, max(lengths))) < len(lengths)

    def logprobs(pack: bool, flat: bool) -> list[torch.Tensor]:
        setattr(model, attention.ENABLED_ATTR, flat)
        with torch.no_grad():
            out = forward.target_logprobs(model, inputs, targets, device, pack=pack)
        return [lp.float().cpu() for lp in out]

    alone = logprobs(pack=False, flat=False)
    padded = logprobs(pack=True, flat=False)
    flat = logprobs(pack=True, flat=True)
    worst = {
        name: max(float((a - b).abs().max()) for a, b in zip(got, alone, strict=True))
        for name, got in (("padded rows", padded), ("flat rows", flat))
    }
    print(f"largest logprob difference from one sequence a row: {worst}")
    assert worst["padded rows"] <= 2 * worst["flat rows"] + 0.05
