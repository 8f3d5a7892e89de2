"""The decode kernel's configuration: time per call and read bandwidth for each (keys a loop
iteration, warps, stages) and slice count, on the RL rows' shapes at their mean lengths,
each call replayed from a CUDA graph as the decode runs it (a launch from Python takes
longer than the smaller calls).

    PYTHONPATH=backend python tests/perf/tune_decode_kernel.py

Qwen3-0.6B's attention (16 query heads, 8 key heads, head dim 128), bf16. Shapes: 64 rows of
one 128-token prompt at 128 own tokens (the 64 x 256 row's mean), 256 rows of 8 prompts at 256
(8 x 32 x 512), and one row of a 2,048-token prompt at 512 (a playground call: slices).
"""

from __future__ import annotations

import functools
import itertools

import torch
import triton.testing

from thinker.engine.local import decode_attention

SHAPES = {
    "64 x 256": (1, 64, 128, 128),
    "8 x 32 x 512": (8, 32, 128, 256),
    "1 x 2048 + 512": (1, 1, 2048, 512),
}


def main() -> None:
    for name, shape in SHAPES.items():
        sweep(name, *shape)


def sweep(name: str, groups: int, n: int, prompt: int, own: int) -> None:
    device = torch.device("cuda")
    q_heads, kv_heads, dim = 16, 8, 128
    rows = groups * n

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, device=device, dtype=torch.bfloat16)

    def int32(value: int, count: int) -> torch.Tensor:
        return torch.full((count,), value, device=device, dtype=torch.int32)

    group_B = torch.arange(groups, device=device, dtype=torch.int32).repeat_interleave(n)
    args = (
        randn(rows, q_heads, dim),  # query, key, value of the step
        randn(rows, kv_heads, dim),
        randn(rows, kv_heads, dim),
        randn(groups, prompt, kv_heads, dim),  # prompts
        randn(groups, prompt, kv_heads, dim),
        randn(rows, kv_heads, own, dim),  # own runs
        randn(rows, kv_heads, own, dim),
        group_B,
        int32(prompt, groups),
        int32(own, rows),
        dim**-0.5,
    )
    # Bytes a call must read: each prompt once, each row's own run, the queries.
    read = 2 * 2 * kv_heads * dim * (groups * prompt + rows * own) + 2 * rows * q_heads * dim
    default = decode_attention.splits_for(rows, kv_heads, prompt + own, device)
    print(f"{name}: {rows} rows, chosen splits {default}, {read / 1e6:.1f} MB to read")
    results = []
    for config in itertools.product((32, 64, 128), (2, 4, 8), (1, 2)):
        for splits in sorted({1, default, 2 * default}):
            call = functools.partial(decode_attention.attend, *args, splits, config)
            try:
                call()  # compiled outside the graph
                ms = triton.testing.do_bench_cudagraph(call, rep=50)
            except Exception as e:  # a config the card cannot run (shared memory)
                print(f"  {config} splits {splits}: {type(e).__name__}")
                continue
            results.append((ms, config, splits))
    results.sort()
    for ms, config, splits in results[:4] + [
        min(r for r in results if r[2] == s) for s in {1, default, 2 * default}
    ]:
        print(f"  {config} splits {splits}: {ms * 1e3:.1f} us, {read / ms / 1e9:.2f} TB/s")
    for ms, config, splits in results:
        if config == decode_attention.CONFIG and splits == default:
            print(f"  current {config} splits {splits}: {ms * 1e3:.1f} us")


if __name__ == "__main__":
    main()
