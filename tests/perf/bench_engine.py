"""The local engine's speed and memory against plain transformers + PEFT, one row per workload.

Every row runs in its own process: the baseline (plain transformers + PEFT: bf16, SDPA, LoRA
r=16 on the seven linear projections, torch AdamW, no packing, `model.generate` for
sampling) and then Thinker's local engine through its Tinker-shaped client, on the same
random-initialised model of a real shape and the same random tokens. Usage (CUDA machine):

    PYTHONPATH=backend python tests/perf/bench_engine.py            # every row, then a table
    PYTHONPATH=backend python tests/perf/bench_engine.py --rows sl-qwen3,rl-sampling

Columns: tokens/s counts every position a step processes (padding included); real tokens/s
counts only the examples' own tokens; peak memory is `torch.cuda.max_memory_allocated` over
the timed steps; time to first step runs from building the model to the end of the first
step (or first sampling call). Figures are medians over timed steps after warm-up steps.

MFU = real tokens/s x FLOPs per token / the card's dense bf16 peak (989 TFLOP/s for an H100
or H200 SXM). FLOPs per token, training with LoRA: 4N (forward 2N plus the activation
gradients 2N; the frozen weights get no weight gradient) + 12 * layers * heads * head_dim * c,
the attention score and value products (2 * 2 * heads * head_dim * c forward, three times
that with backward) with c the mean number of positions a token attends to ((T + 1) / 2 for
a causal sequence of T). N counts the weights of the matmuls a token goes through: every
layer's projections and the output layer, not the embedding lookup. Sampling: 2N + 4 *
layers * heads * head_dim * c per generated token.

The RL sampling rows also give the memory-bandwidth limit of a decode step: the bytes it must
read (every weight once, and the KV cache: each prompt once, each row's own new tokens, at
their mean length) over the bytes/s a sum over 4 GiB reads on the card, in tokens/s.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
QWEN, LLAMA = "thinker/random-qwen3-0.6b", "thinker/random-llama3.1-8b"
PEAK_BF16 = 989e12  # dense bf16 FLOP/s of an H100 / H200 SXM
RANK = 16


@dataclass(frozen=True)
class Row:
    name: str
    work: str
    model: str
    target: str


ROWS = [
    Row("sl-llama8b", "SL step, 2 x 2048", LLAMA, "tokens/s >= 1.5x, memory <= 0.8x"),
    Row("sl-qwen3", "SL step, 8 x 1024", QWEN, "tokens/s >= 2x, memory <= 0.35x"),
    Row("packing", "SL, 8 chats of 64-2048 tokens", QWEN, "real tokens/s >= 1.8x, loss 1e-3"),
    Row("qlora", "QLoRA SL step, 2 x 2048", LLAMA, "memory <= 0.45x of bf16 LoRA"),
    Row("dpo", "DPO step vs SL step, 4 pairs x 2 x 1024", QWEN, "time <= 1.6x SL step"),
    Row("rl-sampling", "64 completions x 256 tokens", QWEN, ">= 30,000 tokens/s"),
    Row("rl-groups", "8 prompts x 32 samples x 512 tokens", QWEN, ">= 40,000 tokens/s"),
    Row("playground", "1 x 1,024-token prompt, 256 tokens", QWEN, "TTFT < 100 ms, >= 100 tok/s"),
    Row(
        "job-qwen3",
        "default SL job vs the engine benchmark, 3,000 chats of ~500-1,000 tokens",
        QWEN,
        "steady tokens/s >= 0.95x; evaluation <= 10%; first step <= 60 s",
    ),
    Row(
        "job-qwen3-again",
        "the same job again, a new process, compile cache kept",
        QWEN,
        "first step <= 20 s",
    ),
    Row(
        "job-llama8b",
        "default SL job vs the engine benchmark, 3,000 chats, 30 steps",
        LLAMA,
        "steady tokens/s >= 0.95x",
    ),
    Row("long-qwen3", "longest sequence, batch 1", QWEN, ">= 262,144 tokens"),
    Row("long-llama8b", "longest sequence, batch 1", LLAMA, ">= 131,072 tokens"),
    Row("long-qlora-llama8b", "longest sequence, batch 1, QLoRA", LLAMA, ">= 262,144 tokens"),
    Row(
        "long-32k-llama8b",
        "32,768 tokens, batch 1",
        LLAMA,
        "tokens/s >= 1.3x transformers + PEFT + Liger + checkpointing",
    ),
]
COMPILE_CACHE = "/tmp/thinker-bench-inductor"  # the job rows' torch.compile cache


# ---- measuring ------------------------------------------------------------------------------
def time_steps(step: Callable[[], object], warmup: int, steps: int) -> tuple[float, float]:
    """Median seconds per step and the peak GPU memory (GiB) over the timed steps."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**30


def first_step_seconds(setup_started: float, step: Callable[[], object]) -> float:
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - setup_started


def free_memory() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def flops_per_token(model: str, context: float, training: bool) -> float:
    from thinker.engine.local.models import BUILTIN_CONFIGS

    c = BUILTIN_CONFIGS[model]()
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    q, kv = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    per_layer = c.hidden_size * (2 * q + 2 * kv) + 3 * c.hidden_size * c.intermediate_size
    n = c.num_hidden_layers * per_layer + c.hidden_size * c.vocab_size
    attention = 4 * c.num_hidden_layers * q * context
    return (4 * n + 3 * attention) if training else (2 * n + attention)


def mfu(real_tokens_per_s: float, model: str, context: float, training: bool = True) -> float:
    return real_tokens_per_s * flops_per_token(model, context, training) / PEAK_BF16


# ---- the two sides ----------------------------------------------------------------------
def plain_model(model: str, quantized: bool = False):  # noqa: ANN201
    """The baseline: the model from its config, bf16, SDPA, a PEFT LoRA on seven projections."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from thinker.engine.local.models import BUILTIN_CONFIGS, BUILTIN_SEED

    torch.manual_seed(BUILTIN_SEED)
    with torch.device("cuda"):
        base = AutoModelForCausalLM.from_config(
            BUILTIN_CONFIGS[model](), dtype=torch.bfloat16, attn_implementation="sdpa"
        )
    return get_peft_model(base, LoraConfig(r=RANK, lora_alpha=32, target_modules=PROJECTIONS))


def plain_sl_step(model, input_ids_BT: torch.Tensor, lengths: list[int] | None = None):  # noqa: ANN001, ANN201
    """One plain step: padded batch with a mask when lengths differ, HF's own loss."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    mask = None
    labels = input_ids_BT.clone()
    if lengths is not None:
        mask = (
            torch.arange(input_ids_BT.shape[1], device="cuda")
            < torch.tensor(lengths, device="cuda")[:, None]
        ).long()
        labels = labels.masked_fill(mask == 0, -100)

    def step() -> float:
        loss = model(input_ids=input_ids_BT, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    return step


def engine_client(  # noqa: ANN201
    model: str, quantization: str | None = None, rank: int = RANK, train_unembed: bool = False
):
    import thinker

    service = thinker.ServiceClient(
        backend="local", storage_dir="/tmp/thinker-bench", quantization=quantization
    )
    return service, service.create_lora_training_client(
        model, rank=rank, train_unembed=train_unembed
    ).result()


def datums(rows: list[list[int]]):  # noqa: ANN201
    """Next-token datums: input row[:-1], targets row[1:], every token weighted 1."""
    from tinker import types

    return [
        types.Datum(
            model_input=types.ModelInput.from_ints(row[:-1]),
            loss_fn_inputs={"target_tokens": row[1:], "weights": [1.0] * (len(row) - 1)},
        )
        for row in rows
    ]


def engine_sl_step(client, batch) -> Callable[[], float]:  # noqa: ANN001
    from tinker import types

    def step() -> float:
        fb = client.forward_backward(batch, "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-4)).result()
        return fb.result().metrics["loss:sum"]

    return step


def random_rows(model: str, lengths: list[int], seed: int = 0) -> list[list[int]]:
    from thinker.engine.local.models import BUILTIN_CONFIGS

    vocab = BUILTIN_CONFIGS[model]().vocab_size
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n + 1,), generator=g).tolist() for n in lengths]


def sampling_side(
    name: str,
    seconds: float,
    peak: float,
    ttfs: float,
    tokens: int,
    context: float,
    **extra: object,
) -> dict:
    """A sampling side on the Qwen3 shape: every generated token is a real one."""
    return side(name, seconds, peak, ttfs, tokens, tokens, QWEN, context, False, **extra)


def side(
    name: str,
    seconds: float,
    peak: float,
    ttfs: float,
    tokens: int,
    real: int,
    model: str,
    context: float,
    training: bool = True,
    **extra: object,
) -> dict:
    real_per_s = real / seconds
    return {
        "side": name,
        "s_per_step": seconds,
        "tokens_per_s": tokens / seconds,
        "real_tokens_per_s": real_per_s,
        "mfu": mfu(real_per_s, model, context, training),
        "peak_gib": peak,
        "time_to_first_step_s": ttfs,
        **extra,
    }


# ---- rows -------------------------------------------------------------------------------
def run_sl(model: str, batch: int, seq: int, quantization: str | None = None) -> list[dict]:
    rows = random_rows(model, [seq] * batch)
    tokens = batch * seq
    started = time.perf_counter()
    plain = plain_model(model)
    step = plain_sl_step(plain, torch.tensor(rows, device="cuda")[:, :-1])
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 4)
    results = [side("transformers+peft", seconds, peak, ttfs, tokens, tokens, model, (seq + 1) / 2)]
    plain = step = None
    free_memory()
    started = time.perf_counter()
    _, client = engine_client(model, quantization)
    step = engine_sl_step(client, datums(rows))
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 4)
    name = "thinker" + (" (4-bit)" if quantization else "")
    results.append(side(name, seconds, peak, ttfs, tokens, tokens, model, (seq + 1) / 2))
    return results


def run_packing() -> list[dict]:
    """Chats of 64-2048 tokens: padded to the longest (baseline) vs packed (Thinker)."""
    lengths = torch.randint(64, 2049, (8,), generator=torch.Generator().manual_seed(1)).tolist()
    rows = random_rows(QWEN, lengths)
    width, real = max(lengths), sum(lengths)
    context = sum(n * (n + 1) / 2 for n in lengths) / real
    padded = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        padded[b, : lengths[b]] = torch.tensor(row[:-1])
    started = time.perf_counter()
    plain = plain_model(QWEN)
    step = plain_sl_step(plain, padded.cuda(), lengths)
    with torch.no_grad():  # the per-token loss at the initial weights, for the exactness check
        plain_loss = _plain_loss(plain, padded.cuda(), lengths)
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 4)
    results = [
        side(
            "transformers+peft (padded)",
            seconds,
            peak,
            ttfs,
            len(rows) * width,
            real,
            QWEN,
            context,
            per_token_loss=plain_loss,
        )
    ]
    plain = step = None
    free_memory()
    started = time.perf_counter()
    _, client = engine_client(QWEN)
    batch = datums(rows)
    packed_loss = client.forward(batch, "cross_entropy").result().metrics["loss:sum"] / real
    os.environ["THINKER_PACKING"] = "0"
    unpacked_loss = client.forward(batch, "cross_entropy").result().metrics["loss:sum"] / real
    os.environ["THINKER_PACKING"] = "1"
    step = engine_sl_step(client, batch)
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 4)
    from thinker.engine.local.forward import pack_rows

    packed_tokens = len(pack_rows(lengths, width)) * width
    results.append(
        side(
            "thinker (packed)",
            seconds,
            peak,
            ttfs,
            packed_tokens,
            real,
            QWEN,
            context,
            per_token_loss=packed_loss,
            unpacked_per_token_loss=unpacked_loss,
            loss_vs_unpacked=abs(packed_loss - unpacked_loss),
            loss_vs_baseline=abs(packed_loss - plain_loss),
        )
    )
    return results


def _plain_loss(model, input_ids_BT: torch.Tensor, lengths: list[int]) -> float:  # noqa: ANN001
    mask = (
        torch.arange(input_ids_BT.shape[1], device="cuda")
        < torch.tensor(lengths, device="cuda")[:, None]
    ).long()
    labels = input_ids_BT.masked_fill(mask == 0, -100)
    logits = model(input_ids=input_ids_BT, attention_mask=mask).logits.float()
    # HF shifts labels by one; the engine's targets are row[1:]: compare the same pairs.
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, input_ids_BT[:, 1:, None]).squeeze(-1)
    keep = labels[:, 1:] != -100
    return float(-(lp * keep).sum() / keep.sum())


def run_dpo() -> list[dict]:
    """A DPO step (reference logprobs with the adapter off, then the DPO loss's gradient) vs an
    SL step on the same 8 sequences of 1,024 tokens, both through the engine."""
    from tinker import types

    from thinker.algorithms.dpo import dpo_custom_loss

    rows = random_rows(QWEN, [1024] * 8)
    batch = datums(rows)
    started = time.perf_counter()
    service, client = engine_client(QWEN)
    sl = engine_sl_step(client, batch)
    ttfs = first_step_seconds(started, sl)
    seconds, peak = time_steps(sl, 1, 4)
    results = [side("thinker SL step", seconds, peak, ttfs, 8 * 1024, 8 * 1024, QWEN, 512.5)]
    reference = service.create_sampling_client(base_model=QWEN).result()

    def references() -> torch.Tensor:
        # As the DPO loop does: every reference request first, then the answers.
        futures = [reference.compute_logprobs(d.model_input) for d in batch]
        return torch.tensor([sum(x for x in f.result() if x is not None) for f in futures])

    def train_step(ref: torch.Tensor) -> float:
        fb = client.forward_backward_custom(batch, dpo_custom_loss(ref[0::2], ref[1::2], 0.1))
        client.optim_step(types.AdamParams(learning_rate=1e-4)).result()
        return fb.result().metrics["loss:sum"]

    started = time.perf_counter()
    ttfs = first_step_seconds(started, lambda: train_step(references()))
    # A one-epoch run computes each pair's reference once: a step's share is its batch's.
    dpo_seconds, dpo_peak = time_steps(lambda: train_step(references()), 1, 4)
    results.append(
        side(
            "thinker DPO step, reference included",
            dpo_seconds,
            dpo_peak,
            ttfs,
            8 * 1024,
            8 * 1024,
            QWEN,
            512.5,
            vs_sl_step=dpo_seconds / seconds,
        )
    )
    fixed = references()  # later epochs: the references are already known
    step_seconds, step_peak = time_steps(lambda: train_step(fixed), 1, 4)
    results.append(
        side(
            "thinker DPO step, reference known",
            step_seconds,
            step_peak,
            ttfs,
            8 * 1024,
            8 * 1024,
            QWEN,
            512.5,
            vs_sl_step=step_seconds / seconds,
        )
    )
    return results


def run_rl_sampling(n: int = 64, new_tokens: int = 256, prompt_len: int = 128) -> list[dict]:

    prompt = random_rows(QWEN, [prompt_len - 1])[0]
    context = prompt_len + new_tokens / 2
    started = time.perf_counter()
    plain = plain_model(QWEN).eval()
    plain.generation_config.eos_token_id = None  # every sequence runs the full length
    ids = torch.tensor([prompt], device="cuda").expand(n, -1)

    def generate() -> None:
        out = plain.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,
        )
        assert out.shape == (n, prompt_len + new_tokens)

    ttfs = first_step_seconds(started, generate)
    seconds, peak = time_steps(generate, 1, 2)
    tokens = n * new_tokens
    results = [sampling_side("transformers generate", seconds, peak, ttfs, tokens, context)]
    plain = None  # the closures above hold it: drop it before the engine's turn
    free_memory()
    results += engine_sampling_sides([prompt], n, new_tokens)
    return results


def run_rl_groups(groups: int = 8, n: int = 32, new_tokens: int = 512) -> list[dict]:
    """An RL step's sampling: `groups` prompts of 128 tokens, `n` samples each, all at once."""
    prompts = random_rows(QWEN, [127] * groups, seed=1)
    return engine_sampling_sides(prompts, n, new_tokens)


def engine_sampling_sides(prompts: list[list[int]], n: int, new_tokens: int) -> list[dict]:
    """Thinker's sampler (a trainer's weights, as RL samples) on every prompt at once, and the
    same calls decoded one after another, each prompt repeated per sample (the per-call path,
    the engine's behaviour before shared-prompt decoding); each against the bandwidth limit."""
    from tinker import types

    from thinker.engine.local import prefix

    started = time.perf_counter()
    _, client = engine_client(QWEN)
    sampler = client.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=new_tokens, temperature=1.0, stop=[])

    def sample() -> None:
        futures = [sampler.sample(types.ModelInput.from_ints(p), n, params) for p in prompts]
        for future in futures:
            out = future.result()
            assert all(
                len(s.tokens) == new_tokens and len(s.logprobs) == new_tokens for s in out.sequences
            )

    bandwidth = read_bandwidth()
    model = client._model
    weights = sum(
        p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values()
    )
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_token = config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * 2
    rows, prompt_tokens = n * len(prompts), sum(len(p) for p in prompts)
    shared_kv = kv_token * (prompt_tokens + rows * new_tokens / 2)  # mean bytes read a step
    repeated_kv = kv_token * (n * prompt_tokens + rows * new_tokens / 2)
    context = prompt_tokens / len(prompts) + new_tokens / 2
    tokens = rows * new_tokens
    results = []
    plain = {"THINKER_FUSED_DRAW": "0"}
    sides = (
        ("thinker sample", True, {}),
        # The same decode with each step's tokens drawn by a log-softmax, an exp and
        # multinomial (run AE's engine) instead of the one-pass draw.
        ("thinker sample, plain draw (before)", True, plain),
        # ... and with each step (and the prefill) through transformers' layers (the merged
        # adapter, Liger's kernels) instead of the fused step (run AC's engine).
        (
            "thinker sample, step through the layers (before)",
            True,
            {**plain, "THINKER_FUSED_DECODE": "0"},
        ),
        # ... and with run AB's attention (FlashAttention's varlen kernel, two calls a layer)
        # instead of the Triton decode kernel.
        (
            "thinker sample, FlashAttention decode (before)",
            True,
            {**plain, "THINKER_FUSED_DECODE": "0", "THINKER_DECODE_KERNEL": "0"},
        ),
        ("thinker, call by call (before)", False, plain),
    )
    for name, shared, env in sides:
        prefix.release(model)  # the cache's kind is chosen when a capture is made
        with (
            _patched(prefix, "can_decode", None if shared else (lambda model: False)),
            mock.patch.dict(os.environ, env),
        ):
            ttfs = first_step_seconds(started, sample)  # also the warm-up (graph captures)
            seconds, peak = time_steps(sample, 0, 3)
        kv = shared_kv if shared else repeated_kv
        limit = rows / ((weights + kv) / bandwidth)
        results.append(
            sampling_side(
                name,
                seconds,
                peak,
                ttfs,
                tokens,
                context,
                bandwidth_limit_tokens_per_s=limit,
                fraction_of_bandwidth_limit=tokens / seconds / limit,
                read_bandwidth_tb_s=bandwidth / 1e12,
            )
        )
        started = time.perf_counter()
    return results


def read_bandwidth() -> float:
    """Bytes/s this card reads: a sum over 4 GiB, the median of five."""
    x = torch.ones(2**31, dtype=torch.bfloat16, device="cuda")
    x.sum()
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        x.sum()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    size = x.numel() * x.element_size()
    del x
    free_memory()
    return size / statistics.median(times)


@contextlib.contextmanager
def _patched(module: object, name: str, value: object) -> Iterator[None]:
    """`module.name` set to `value` in the block (left alone for None)."""
    before = getattr(module, name)
    if value is not None:
        setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, before)


def run_playground(prompt_len: int = 1024, new_tokens: int = 256) -> list[dict]:
    """Time to first token and streaming speed for one 1,024-token prompt."""
    from tinker import types

    prompt = random_rows(QWEN, [prompt_len - 1])[0]
    started = time.perf_counter()
    plain = plain_model(QWEN).eval()
    plain.generation_config.eos_token_id = None
    ids = torch.tensor([prompt], device="cuda")

    def generate(tokens: int) -> Callable[[], None]:
        return lambda: plain.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            top_k=0,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            pad_token_id=0,
        )

    ttfs = first_step_seconds(started, generate(1))
    ttft, _ = time_steps(generate(1), 1, 3)
    whole, peak = time_steps(generate(new_tokens), 1, 2)
    results = [
        sampling_side(
            "transformers generate",
            whole,
            peak,
            ttfs,
            new_tokens,
            prompt_len + new_tokens / 2,
            ttft_s=ttft,
            stream_tokens_per_s=(new_tokens - 1) / max(whole - ttft, 1e-9),
        )
    ]
    plain = None  # the closures above hold it: drop it before the engine's turn
    free_memory()
    started = time.perf_counter()
    service, client = engine_client(QWEN)
    del client  # the playground samples a standalone model, as the server's pool loads it
    free_memory()
    sampler = service.create_sampling_client(base_model=QWEN).result()
    params = types.SamplingParams(max_tokens=new_tokens, temperature=1.0, stop=[])
    stamps: list[float] = []

    def stream() -> None:
        stamps.clear()
        stamps.append(time.perf_counter())
        sampler.sample_stream(
            types.ModelInput.from_ints(prompt),
            params,
            lambda _t: stamps.append(time.perf_counter()),
        ).result()

    ttfs = first_step_seconds(started, stream)
    cold_ttft = stamps[1] - stamps[0]
    ttfts, rates = [], []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(3):
        stream()
        ttfts.append(stamps[1] - stamps[0])
        rates.append((len(stamps) - 2) / (stamps[-1] - stamps[1]))
    whole = stamps[-1] - stamps[0]
    results.append(
        sampling_side(
            "thinker sample_stream",
            whole,
            torch.cuda.max_memory_allocated() / 2**30,
            ttfs,
            new_tokens,
            prompt_len + new_tokens / 2,
            ttft_s=statistics.median(ttfts),
            cold_ttft_s=cold_ttft,
            stream_tokens_per_s=statistics.median(rates),
        )
    )
    return results


# ---- what a default job runs ---------------------------------------------------------------
def chat_file(path: Path, rows: int, seed: int = 0) -> Path:
    """Chats whose rendered length is ~500-1,000 tokens for the built-in byte tokenizer: a
    user message of 100-300 characters and an answer of 380-680."""
    import random

    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "tensor", "graph", "vector", "sum", "the", "of"]

    def text(chars: int) -> str:
        out = ""
        while len(out) < chars:
            out += rng.choice(words) + " "
        return out[:chars]

    with path.open("w") as f:
        for _ in range(rows):
            messages = [
                {"role": "user", "content": text(rng.randint(100, 300))},
                {"role": "assistant", "content": text(rng.randint(380, 680))},
            ]
            f.write(json.dumps({"messages": messages}) + "\n")
    return path


class _TimedLogger:
    """A run's metrics logger that also notes when each step's metrics arrived."""

    def __init__(self, run_dir: Path) -> None:
        from thinker.runs import RunLogger

        self.inner = RunLogger(run_dir)
        self.times: list[tuple[int, float, dict]] = []
        self.startup: dict = {}  # the run's `startup` event: seconds per phase to step 1

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.times.append((step, time.perf_counter(), dict(metrics)))
        self.inner.log_metrics(metrics, step)

    def log_event(self, kind: str, payload: dict) -> None:
        if kind == "startup":
            self.startup = dict(payload)
        self.inner.log_event(kind, payload)


def compile_stats() -> dict:
    """What torch.compile did in this process so far: frames, graphs, recompiles and the hits
    and misses of its caches (dynamo's counters), to tell a compile from a cache load."""
    from torch._dynamo import utils

    skip = {"graph_break", "aten_mm_info"}
    return {k: dict(v) for k, v in utils.counters.items() if k not in skip}


def run_job(model: str, max_steps: int | None = None, cold: bool = True) -> list[dict]:
    """The SL loop exactly as a job runs it with the job defaults (rank 32, output layer
    adapted, packing, the batch plan, held-out evaluation) on 3,000 chats, first in its process
    so its first step includes compiling (from an empty cache when `cold`); then the engine
    benchmark's configuration (rank 16, output layer not adapted) on the job's own batches."""
    import asyncio
    import shutil
    import tempfile

    from thinker.algorithms import sl
    from thinker.algorithms.common import epoch_batch
    from thinker.engine.local.models import load_tokenizer

    if cold:
        shutil.rmtree(COMPILE_CACHE, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix="thinker-job-"))
    config = sl.SLConfig(
        dataset=chat_file(work / "chats.jsonl", 3000),
        base_model=model,
        log_path=work / "run",
        max_steps=max_steps,
    )
    train, held_out = sl._datasets(config, load_tokenizer(model))
    per_epoch = max(1, len(train) // config.batch_size)
    total = max_steps or config.num_epochs * per_epoch

    def step_tokens(number: int) -> int:
        batch = epoch_batch(train, number, per_epoch, config.batch_size, config.seed)
        return sum(d.model_input.length for d in batch)

    lengths = [d.model_input.length for d in train]
    facts = {"rendered_tokens_min": min(lengths), "rendered_tokens_max": max(lengths)}

    results = []
    # The job: the loop a worker runs, its evaluation timed.
    evaluating = [0.0]
    eval_nll = sl._eval_nll

    async def timed_eval(client, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        # The loop evaluates with a training step in flight, and the evaluation's passes queue
        # behind it: wait for that step first, so the clock counts the evaluation alone (in
        # runs I-K it also counted the rest of the step, an upper bound on the share).
        await asyncio.to_thread(client._executor.submit(lambda: None).result)
        began = time.perf_counter()
        try:
            return await eval_nll(client, *args, **kwargs)
        finally:
            evaluating[0] += time.perf_counter() - began

    sl._eval_nll = timed_eval
    logger = _TimedLogger(config.log_path)
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    asyncio.run(sl.main(config, logger=logger))
    ended = time.perf_counter()
    rows = logger.times
    first_at = rows[0][1]
    # steady steps: after the first, without an evaluation in their interval
    steady = [
        (rows[i][0], rows[i][1] - rows[i - 1][1])
        for i in range(1, len(rows))
        if "eval_mean_nll" not in rows[i - 1][2] and "eval_mean_nll" not in rows[i][2]
    ]
    tokens = sum(step_tokens(number - 1) for number, _ in steady)
    seconds = sum(dt for _, dt in steady)
    training = ended - first_at - evaluating[0]
    results.append(
        side(
            "default job (r32, head adapted, eval)",
            seconds / len(steady),
            torch.cuda.max_memory_allocated() / 2**30,
            first_at - started,
            tokens // len(steady),
            tokens // len(steady),
            model,
            400.0,
            steps=len(rows),
            eval_seconds=evaluating[0],
            eval_share_of_training=evaluating[0] / training,
            job_seconds=ended - started,
            job_tokens_per_s=sum(step_tokens(i) for i in range(len(rows))) / (ended - started),
            startup=logger.startup,
            compile=compile_stats(),
            **facts,
        )
    )
    if cold:  # then the engine alone on the job's first batches, in two configurations
        # a job's client: the config's rank and the service's default (adapted) output layer
        job_options = {"rank": sl.SLConfig.model_fields["lora_rank"].default, "train_unembed": True}
        configs = [("engine, the job's configuration (r32, head adapted)", job_options)]
        if model == QWEN:  # the configuration the engine benchmark's SL rows measure
            configs.append(("engine benchmark (r16, head not adapted)", {}))
        engine_steps = min(total, 24 if model == QWEN else 10)
        for name, options in reversed(configs):
            results.insert(
                0,
                engine_side(
                    name, model, options, train, per_epoch, config, engine_steps, step_tokens, facts
                ),
            )

    return results


def engine_side(  # noqa: PLR0913
    name: str,
    model: str,
    options: dict,
    train: list,
    per_epoch: int,
    config,  # noqa: ANN001
    count: int,
    step_tokens: Callable[[int], int],
    facts: dict,
) -> dict:
    """The engine alone, steps of `train`'s first batches as the job takes them (3 warm-up
    steps, then timed), with no loop, evaluation or logging around it."""
    from thinker.algorithms.common import epoch_batch

    free_memory()
    started = time.perf_counter()
    _, client = engine_client(model, **options)
    steps = [
        engine_sl_step(client, epoch_batch(train, i, per_epoch, config.batch_size, 0))
        for i in range(count)
    ]
    ttfs = first_step_seconds(started, steps[0])
    for step in steps[1:3]:
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    began = time.perf_counter()
    for step in steps[3:]:
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    tokens = sum(step_tokens(i) for i in range(3, len(steps)))
    peak = torch.cuda.max_memory_allocated() / 2**30
    n = len(steps) - 3
    client = steps = None
    free_memory()
    return side(name, seconds / n, peak, ttfs, tokens // n, tokens // n, model, 400.0, **facts)


# ---- long sequences ---------------------------------------------------------------------------
def run_longest(model: str, lengths: list[int], quantization: str | None = None) -> list[dict]:
    """One SL step (forward_backward and optim_step) on one sequence of each length, shortest
    first, until one fails: the batch plan chooses checkpointing and offload itself."""
    import io
    from contextlib import redirect_stdout

    results = []
    _, client = engine_client(model, quantization)
    for n in lengths:
        log = io.StringIO()
        torch.cuda.reset_peak_memory_stats()
        began = time.perf_counter()
        try:
            with redirect_stdout(log):
                engine_sl_step(client, datums(random_rows(model, [n])))()
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the row records why the length failed
            results.append(
                {
                    "side": f"thinker, {n:,} tokens",
                    "error": str(e)[:600],
                    "log": log.getvalue()[-1500:],
                }
            )
            break
        seconds = time.perf_counter() - began
        results.append(
            side(
                f"thinker, {n:,} tokens",
                seconds,
                torch.cuda.max_memory_allocated() / 2**30,
                seconds,
                n,
                n,
                model,
                (n + 1) / 2,
                log=log.getvalue()[-1500:],
            )
        )
    return results


def run_long_vs_peer(model: str, n: int = 32_768) -> list[dict]:
    """One sequence of `n` tokens: Thinker (its plan decides), then transformers + PEFT with
    Liger's kernels (its fused linear cross-entropy included) and gradient checkpointing.
    Thinker first: Liger patches transformers' modules for the whole process."""
    from liger_kernel.transformers import _apply_liger_kernel_to_instance

    rows = random_rows(model, [n])
    started = time.perf_counter()
    _, client = engine_client(model)
    step = engine_sl_step(client, datums(rows))
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 2)
    ours = side(
        "thinker",
        seconds,
        peak,
        ttfs,
        n,
        n,
        model,
        (n + 1) / 2,
        checkpointing=client._checkpointing.describe(32),
    )
    client = step = None
    free_memory()
    ids = torch.tensor(rows, device="cuda")[:, :-1]
    started = time.perf_counter()
    plain = plain_model(model)
    _apply_liger_kernel_to_instance(model=plain.get_base_model())
    plain.get_base_model().gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False}
    )
    plain.get_base_model().enable_input_require_grads()
    plain.train()
    step = plain_sl_step(plain, ids)
    ttfs = first_step_seconds(started, step)
    seconds, peak = time_steps(step, 1, 2)
    peer = side(
        "transformers+peft+liger+checkpointing", seconds, peak, ttfs, n, n, model, (n + 1) / 2
    )
    return [peer, ours]


RUNNERS: dict[str, Callable[[], list[dict]]] = {
    "sl-llama8b": lambda: run_sl(LLAMA, 2, 2048),
    "sl-qwen3": lambda: run_sl(QWEN, 8, 1024),
    "packing": run_packing,
    "qlora": lambda: run_sl(LLAMA, 2, 2048, quantization="4bit"),
    "dpo": run_dpo,
    "rl-sampling": run_rl_sampling,
    "rl-groups": run_rl_groups,
    "playground": run_playground,
    "job-qwen3": lambda: run_job(QWEN),
    "job-qwen3-again": lambda: run_job(QWEN, cold=False),
    "job-llama8b": lambda: run_job(LLAMA, max_steps=30),
    "long-qwen3": lambda: run_longest(QWEN, [65_536, 131_072, 262_144, 393_216]),
    "long-llama8b": lambda: run_longest(LLAMA, [16_384, 32_768, 65_536, 131_072, 196_608]),
    "long-qlora-llama8b": lambda: run_longest(LLAMA, [131_072, 262_144], quantization="4bit"),
    "long-32k-llama8b": lambda: run_long_vs_peer(LLAMA),
}


# ---- the driver ---------------------------------------------------------------------------
def run_row(name: str) -> None:
    results = RUNNERS[name]()
    print(
        "RESULT "
        + json.dumps({"row": name, "device": torch.cuda.get_device_name(), "sides": results}),
        flush=True,
    )


def table(results: list[dict]) -> str:
    lines = [
        "| row | work | side | tokens/s | real tokens/s | MFU | peak GiB | first step s | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = {r.name: r for r in ROWS}
    for result in results:
        row = rows[result["row"]]
        base = result["sides"][0]
        for s in result["sides"]:
            if "error" in s:
                lines.append(
                    f"| {row.name} | {row.work} | {s['side']} | failed: {s['error'][:200]} |"
                )
                continue
            notes = []
            if s is not base and "error" not in base:
                memory = s["peak_gib"] / base["peak_gib"] if base["peak_gib"] else float("nan")
                notes.append(
                    f"{s['real_tokens_per_s'] / base['real_tokens_per_s']:.2f}x real "
                    f"tokens/s, {memory:.2f}x memory"
                )
            for key in ("ttft_s", "cold_ttft_s"):
                if key in s:
                    notes.append(f"{key.removesuffix('_s')} {s[key] * 1000:.0f} ms")
            for key in (
                "stream_tokens_per_s",
                "vs_sl_step",
                "loss_vs_unpacked",
                "loss_vs_baseline",
                "eval_share_of_training",
                "job_tokens_per_s",
                "checkpointing",
                "bandwidth_limit_tokens_per_s",
                "fraction_of_bandwidth_limit",
                "read_bandwidth_tb_s",
            ):
                if key in s:
                    value = s[key]
                    notes.append(
                        f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}"
                    )
            lines.append(
                f"| {row.name} | {row.work} | {s['side']} | {s['tokens_per_s']:,.0f} | "
                f"{s['real_tokens_per_s']:,.0f} | {s['mfu']:.1%} | {s['peak_gib']:.1f} | "
                f"{s['time_to_first_step_s']:.1f} | {'; '.join(notes)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="all", help="comma-separated: " + ",".join(RUNNERS))
    parser.add_argument("--row", help=argparse.SUPPRESS)  # one row, in this process
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--stderr-dir", type=Path, help="keep each row's stderr here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_engine.py measures the GPU fast path: it needs CUDA")
    if args.row:
        run_row(args.row)
        return
    names = list(RUNNERS) if args.rows == "all" else args.rows.split(",")
    results = []
    for name in names:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": COMPILE_CACHE}  # as a job's worker
        proc = subprocess.run(
            [sys.executable, __file__, "--row", name],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if args.stderr_dir:
            args.stderr_dir.mkdir(parents=True, exist_ok=True)
            (args.stderr_dir / f"{name}.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0 or not lines:
            print(f"row {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", flush=True)
            continue
        results.append(json.loads(lines[-1].removeprefix("RESULT ")))
        print(table(results[-1:]), flush=True)
        if args.json:  # after every row, so a run cut short keeps what it measured
            args.json.write_text(json.dumps(results, indent=1))
    print("\n" + table(results))


if __name__ == "__main__":
    main()
