"""Data-parallel LoRA step time on the CPU: one process against two ranks (gloo), the same
global batch, the local engine's real step (forward_backward on the batch, then optim_step).

    PYTHONPATH=backend python tests/perf/bench_data_parallel.py [--datums 32 --tokens 256]

Sides, each the median of `--steps` timed steps after one warm-up step: one process on one
thread, one process on two threads, two ranks of one thread each. Prints each side's step
time and tokens/s, and two ranks' speed over each one-process side. On a GPU machine each rank
would have its own card; here the ranks share the machine's cores, so this measures the
method's overhead (sharding, gathering logprobs, one all-reduce of the adapter's gradients a
step), not multi-GPU scaling (docs/benchmarks.md has the machine the figures came from).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tinker import types

import thinker

MODEL = "thinker/tiny"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batch(datums: int, tokens: int) -> list[types.Datum]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(datums):
        ids = torch.randint(3, 259, (tokens + 1,), generator=gen)
        out.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(ids[:-1].tolist()),
                loss_fn_inputs={"target_tokens": ids[1:], "weights": torch.ones(tokens)},
            )
        )
    return out


def _side(rank: int, world: int, threads: int, port: int, args: argparse.Namespace, out: str):  # noqa: ANN201, PLR0913
    os.environ["THINKER_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    if world > 1:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
    try:
        with tempfile.TemporaryDirectory() as store:
            service = thinker.ServiceClient(storage_dir=store, device="cpu")
            client = service.create_lora_training_client(MODEL, rank=16, seed=0).result()
            data = _batch(args.datums, args.tokens)
            times = []
            for _ in range(args.steps + 1):
                if world > 1:
                    dist.barrier()
                start = time.perf_counter()
                client.forward_backward(data, "cross_entropy").result()
                client.optim_step(types.AdamParams(learning_rate=1e-4)).result()
                times.append(time.perf_counter() - start)
            if rank == 0:
                Path(out).write_text(json.dumps(times[1:]))
    finally:
        if world > 1:
            dist.destroy_process_group()


def run(world: int, threads: int, args: argparse.Namespace) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        side_args = (world, threads, _free_port(), args, out.name)
        if world == 1:
            _side(0, *side_args)
        else:
            mp.spawn(_side, args=side_args, nprocs=world, join=True)
        return statistics.median(json.loads(Path(out.name).read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datums", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tokens = args.datums * args.tokens
    sides = {
        "1 process, 1 thread": run(1, 1, args),
        "1 process, 2 threads": run(1, 2, args),
        "2 ranks, 1 thread each": run(2, 1, args),
    }
    two = sides["2 ranks, 1 thread each"]
    for name, seconds in sides.items():
        print(f"{name}: {seconds * 1e3:.0f} ms a step, {tokens / seconds:,.0f} tokens/s")
    for name in ("1 process, 1 thread", "1 process, 2 threads"):
        print(f"2 ranks vs {name}: {sides[name] / two:.2f}x the speed")
    if args.json:
        figures = {"datums": args.datums, "tokens": args.tokens, "step_s": sides}
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
