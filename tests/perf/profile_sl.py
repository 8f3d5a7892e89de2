"""Where one SL step of the local engine spends its GPU time: torch.profiler's top kernels.

    PYTHONPATH=backend python tests/perf/profile_sl.py --model thinker/random-qwen3-0.6b \
        --batch 8 --seq 1024 [--rows 25]

Runs two warm-up steps, profiles the third, prints the kernels by total CUDA time and the
step's wall time. Set THINKER_FAST=0 (or one THINKER_<FEATURE>=0) to profile the plain path.
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_engine import datums, engine_client, engine_sl_step, random_rows
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="thinker/random-qwen3-0.6b")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    _, client = engine_client(args.model)
    step = engine_sl_step(client, datums(random_rows(args.model, [args.seq] * args.batch)))
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    print(f"step wall time {wall * 1000:.1f} ms")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
