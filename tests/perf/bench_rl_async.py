"""Benchmark: asynchronous RL (max_steps_off_policy k = 1, 2) against synchronous (k = 0), on
the shipped RL example with the local engine: wall time, and what each learned per sample.

The setup of tests/integration/test_rl_learns.py (tests/support/rl_example.py): thinker/tiny
after a 250-step SL warm start on the hedged one-digit sums, then 15 RL steps of 16 problems x 8
completions (lr 3e-4, exact match), the held-out reward on the 20 unseen sums at steps 0 / 5 /
10 / 15. Every k runs
the same number of samples, so the held-out rewards compare learning per sample. The runs are
interleaved over `--rounds` rounds (k = 0, 1, 2, then again), so that a machine whose load
changes affects each alike; each k's wall time is its median over the rounds.

Prints each run, then each k's median wall time over the synchronous one's; the figures go in
docs/benchmarks.md with the machine and the commit.

    .venv/bin/python -m tests.perf.bench_rl_async                # 2 rounds, from the repo root
    .venv/bin/python -m tests.perf.bench_rl_async --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from tests.support import rl_example

from thinker.runs import RunDir, read_metrics

KS = (0, 1, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="thinker-rl-async-"))
    state = rl_example.warm_start(root)
    runs: dict[int, list[dict[str, object]]] = {k: [] for k in KS}
    for round_ in range(args.rounds):
        for k in KS:
            run = rl(root, state, k, f"k{k}-{round_}")
            runs[k].append(run)
            print(json.dumps({"k": k, **run}), flush=True)
    sync = statistics.median(float(r["wall_s"]) for r in runs[0])  # type: ignore[arg-type]
    summary = {}
    for k in KS:
        wall = statistics.median(float(r["wall_s"]) for r in runs[k])  # type: ignore[arg-type]
        summary[k] = {"median_wall_s": wall, "over_synchronous": wall / sync}
        print(f"k={k}: median wall {wall:.1f} s, {wall / sync:.2f}x the synchronous run's")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


def rl(root: Path, state: str, k: int, name: str) -> dict[str, object]:
    config = rl_example.rl_config(root, state, name, max_steps_off_policy=k)
    started = time.monotonic()
    rl_example.run_rl(root, config)
    wall = time.monotonic() - started
    metrics = read_metrics(RunDir(root / name).metrics)
    steps = [m for m in metrics if m["step"] > 0]
    return {
        "wall_s": round(wall, 2),
        "eval_reward_mean": [
            round(m["eval_reward_mean"], 4) for m in metrics if "eval_reward_mean" in m
        ],
        "max_abs_kl_sample_train": max(abs(m["kl_sample_train"]) for m in steps),
        "batch_wait_s": round(sum(m.get("batch_wait_s", 0.0) for m in steps), 2),
        "completions_trained": sum(int(m["num_datums"]) for m in steps),
    }


if __name__ == "__main__":
    main()
