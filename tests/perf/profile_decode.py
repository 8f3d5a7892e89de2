"""Where an RL sampling call's decode steps spend their time: kernels per step, card vs host.

    PYTHONPATH=backend python tests/perf/profile_decode.py [--groups 1 --n 64 --tokens 256]

Samples `groups` prompts of 128 tokens, `n` completions each, with a trainer's LoRA (as the
benchmark's RL rows do); warms up with one call, then profiles one. Prints the wall time per
decode step, the card's kernel time per step (the rest is the card waiting for the host),
and the kernels by time per step. Set THINKER_FLASH_DECODE=0 (or another THINKER_<FEATURE>=0)
to profile without a fast-path feature.
"""

from __future__ import annotations

import argparse
import collections
import time

import torch
from bench_engine import QWEN, engine_client, random_rows
from tinker import types
from torch.profiler import ProfilerActivity, profile

from thinker.engine.local import prefix
from thinker.engine.local.fused_decode import FusedDecode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rows", type=int, default=20, help="kernels to list")
    parser.add_argument(
        "--copies",
        action="store_true",
        help="also list where the step's copies and casts come from (Python stacks of an "
        "eager call, THINKER_CUDA_GRAPHS=0)",
    )
    args = parser.parse_args()
    _, client = engine_client(QWEN)
    sampler = client.save_weights_and_get_sampling_client().result()
    prompts = random_rows(QWEN, [127] * args.groups, seed=1)
    params = types.SamplingParams(max_tokens=args.tokens, temperature=1.0, stop=[])

    def sample() -> None:
        futures = [sampler.sample(types.ModelInput.from_ints(p), args.n, params) for p in prompts]
        for future in futures:
            future.result()

    sample()  # captures the graphs
    torch.cuda.synchronize()
    start = time.perf_counter()
    sample()
    torch.cuda.synchronize()
    plain_wall = time.perf_counter() - start
    short = types.SamplingParams(max_tokens=1, temperature=1.0, stop=[])
    fixed = []
    parts: dict[str, list[float]] = collections.defaultdict(list)
    timed = [
        (prefix.MergedAdapter, "refresh"),
        (FusedDecode, "refresh"),
        (prefix.PrefixDecoder, "_prefill"),
    ]
    originals = [getattr(owner, name) for owner, name in timed]
    for (owner, name), original in zip(timed, originals, strict=True):
        setattr(owner, name, _timer(original, parts[f"{owner.__name__}.{name}"]))
    for _ in range(3):  # prefill, adapter refresh, answer: a call's cost besides its steps
        start = time.perf_counter()
        for future in [
            sampler.sample(types.ModelInput.from_ints(p), args.n, short) for p in prompts
        ]:
            future.result()
        torch.cuda.synchronize()
        fixed.append(time.perf_counter() - start)
    for (owner, name), original in zip(timed, originals, strict=True):
        setattr(owner, name, original)
    sample()  # the full-length shape again before profiling
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        sample()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = collections.defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name].append(event.device_time)
    steps = args.tokens
    card_ms = sum(sum(times) for times in kernels.values()) / 1000 / steps
    tokens = args.groups * args.n * args.tokens
    print(
        f"{args.groups} x {args.n} x {args.tokens}: {tokens / plain_wall:,.0f} tokens/s "
        "unprofiled, "
        f"{plain_wall * 1000 / steps:.2f} ms a step; card busy {card_ms:.2f} ms a step; "
        f"{sum(len(t) for t in kernels.values()) / steps:.0f} kernels a step; a 1-token call "
        f"{min(fixed) * 1000:.1f} ms ("
        + ", ".join(f"{name} {min(times) * 1000:.1f} ms" for name, times in parts.items() if times)
        + ")"
    )
    ranked = sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[: args.rows]
    for name, times in ranked:
        print(
            f"{sum(times) / steps:9.1f} us/step {len(times) / steps:7.1f}/step "
            f"{sum(times) / len(times):7.2f} us each  {name[:110]}"
        )

    if args.copies:
        copies(sampler, prompts, args.n)


def _timer(fn, times: list[float]):  # noqa: ANN001, ANN202
    """`fn`, its calls' wall times (the card's work included) appended to `times`."""

    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)

    return timed


def copies(sampler, prompts: list[list[int]], n: int) -> None:  # noqa: ANN001
    """Which Python lines launch the copies and casts of eager decode steps."""
    import os

    os.environ["THINKER_CUDA_GRAPHS"] = "0"
    params = types.SamplingParams(max_tokens=4, temperature=1.0, stop=[])
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for future in [sampler.sample(types.ModelInput.from_ints(p), n, params) for p in prompts]:
            future.result()
    table = prof.key_averages(group_by_stack_n=6)
    ops = ("aten::copy_", "aten::contiguous", "aten::clone", "aten::_to_copy")
    shown = sorted((e for e in table if e.key in ops), key=lambda e: -e.count)[:8]
    for event in shown:
        print(f"{event.count:6d} x {event.key}")
        for frame in event.stack[:6]:
            print(f"           {frame}")


if __name__ == "__main__":
    main()
