"""One GRPO step: Thinker, synchronous and asynchronous, beside TRL's GRPOTrainer (issue 20).

8 prompts x 8 samples x 256 tokens a step on the Qwen3-0.6B shape (the engine benchmark's
random weights, saved as a checkpoint for TRL to load), LoRA rank 32 (alpha 32) on every
projection, temperature 1, learning rate 1e-5, the same reward on both sides: 1 where the
completion holds a "Q" (a random model's 256 tokens decode to random bytes, so about 60% of
completions match and most groups carry signal). Each side runs in its own process:

- `thinker-sync`: `thinker.algorithms.rl` on the local engine, `max_steps_off_policy` 0;
- `thinker-async`: the same with `max_steps_off_policy` 1 (step b's batch sampled from the
  weights after step b - 1 while step b - 1 trains);
- `trl`: `GRPOTrainer` as its documentation runs it, generation by transformers (its default,
  no vLLM), its defaults otherwise (bf16, gradient checkpointing, beta 0), with 64
  completions a step in one batch (`per_device_train_batch_size` 64, one generation a step).

A step's time is the median gap between consecutive steps' ends after the first (which
compiles or warms up). The sampler-trainer logprob gap is Thinker's `kl_sample_train` (mean
of sampler minus trainer logprob over every sampled token); TRL's transformers generation
records no sampler logprobs (it reports the gap with vLLM only), so it has none to report.

    PYTHONPATH=backend:/tmp/site python tests/perf/bench_grpo_trl.py --trl-path /tmp/trl \\
        --json out.json        # GPU machine; TRL's wheels installed in /tmp/trl

Prints one line a side and their ratios; the figures go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = "thinker/random-qwen3-0.6b"
PROMPTS = [f"Line {i}: write one line of text that holds the letter Q." for i in range(8)]
GROUP, TOKENS, RANK, LR = 8, 256, 32, 1e-5
PATTERN = "Q"
SIDES = ("thinker-sync", "thinker-async", "trl")


def _steady(ends: list[float]) -> float:
    """The median time between consecutive steps' ends, the first step left out."""
    gaps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    return statistics.median(gaps)


def _peak_gib() -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


# ---- Thinker's side ---------------------------------------------------------------------
class _Clock:
    """Logs metrics to the run directory and notes when each step's metrics arrive."""

    def __init__(self, run_dir: Path) -> None:
        from thinker.runs import RunLogger

        self.inner = RunLogger(run_dir)
        self.ends: dict[int, float] = {}
        self.metrics: dict[int, dict[str, float]] = {}

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.ends.setdefault(step, time.perf_counter())
        self.metrics.setdefault(step, {}).update(metrics)
        self.inner.log_metrics(metrics, step)

    def log_event(self, kind: str, payload: dict) -> None:
        self.inner.log_event(kind, payload)


def thinker_side(steps: int, ahead: int) -> dict:
    import thinker
    from thinker.algorithms.rl import RLConfig
    from thinker.algorithms.rl import main as rl_main
    from thinker.rewards.config import RewardConfig

    root = Path(tempfile.mkdtemp(prefix="thinker-grpo-"))
    data = root / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    config = RLConfig(
        base_model=MODEL,
        dataset=data,
        reward=RewardConfig(type="regex", pattern=PATTERN),
        group_size=GROUP,
        groups_per_batch=len(PROMPTS),
        max_tokens=TOKENS,
        temperature=1.0,
        lora_rank=RANK,
        learning_rate=LR,
        max_steps=steps,
        max_steps_off_policy=ahead,
        eval_every=0,
        save_every=0,
        log_path=root / "run",
    )
    clock = _Clock(root / "run")
    started = time.perf_counter()
    asyncio.run(rl_main(config, thinker.ServiceClient(storage_dir=root), clock))
    ends = [clock.ends[s] for s in sorted(clock.ends) if s > 0]
    trained = [clock.metrics[s] for s in sorted(clock.metrics) if s > 0]
    return {
        "s_per_step": _steady(ends),
        "first_step_s": ends[0] - started,
        "steps": len(ends),
        "reward_mean": statistics.mean(m.get("reward_mean", float("nan")) for m in trained),
        "kl_sample_train_mean": statistics.mean(abs(m["kl_sample_train"]) for m in trained),
        "kl_sample_train_max": max(abs(m["kl_sample_train"]) for m in trained),
        "peak_gib": _peak_gib(),
    }


# ---- TRL's side (its own process, TRL's wheels on the path) ------------------------------
def trl_side(steps: int, models_dir: Path) -> dict:
    import re

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from thinker.engine.local.models import load_tokenizer

    ends: list[float] = []
    rewards: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201, ARG002
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            ends.append(time.perf_counter())

    def holds_q(completions: list[str], **_: object) -> list[float]:
        scores = [1.0 if re.search(PATTERN, c) else 0.0 for c in completions]
        rewards.extend(scores)
        return scores

    out = Path(tempfile.mkdtemp(prefix="trl-grpo-"))
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=len(PROMPTS) * GROUP,
        gradient_accumulation_steps=1,
        num_generations=GROUP,
        max_completion_length=TOKENS,
        temperature=1.0,
        learning_rate=LR,
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        **({} if torch.cuda.is_available() else {"bf16": False, "use_cpu": True}),  # a CPU check
    )
    trainer = GRPOTrainer(
        model=str(models_dir / MODEL.split("/")[-1]),
        reward_funcs=holds_q,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS] * (steps + 1)),
        processing_class=load_tokenizer(MODEL),  # the random shape's byte tokenizer
        peft_config=LoraConfig(
            r=RANK, lora_alpha=RANK, lora_dropout=0.0, target_modules="all-linear"
        ),
        callbacks=[Clock()],
    )
    started = time.perf_counter()
    trainer.train()
    return {
        "s_per_step": _steady(ends),
        "first_step_s": ends[0] - started,
        "steps": len(ends),
        "reward_mean": statistics.mean(rewards),
        "peak_gib": _peak_gib(),
        "gradient_checkpointing": args.gradient_checkpointing,
        "beta": args.beta,
        "loss_type": args.loss_type,
    }


# ---- the driver --------------------------------------------------------------------------
def run_side(side: str, steps: int, models_dir: Path, trl_path: str) -> dict:
    env = dict(os.environ)
    if side == "trl":
        env["PYTHONPATH"] = os.pathsep.join([trl_path, env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, __file__, "--side", side, "--steps", str(steps)]
        + ["--models-dir", str(models_dir), "--tokens", str(TOKENS)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    found = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if not found:
        return {"side": side, "error": (proc.stderr or proc.stdout)[-3000:]}
    return {"side": side, **json.loads(found[-1].removeprefix("RESULT "))}


def main() -> None:
    global TOKENS  # noqa: PLW0603 - a shorter run (a CPU check of the script) sets it
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--trl-path", default="/tmp/trl", help="TRL's wheels, installed")
    parser.add_argument("--models-dir", type=Path, default=Path("/tmp/unsloth-models"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="completion tokens")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # one side, in its own process
    args = parser.parse_args()
    TOKENS = args.tokens
    if args.side:
        if args.side == "trl":
            result = trl_side(args.steps, args.models_dir)
        else:
            result = thinker_side(args.steps, ahead=1 if args.side == "thinker-async" else 0)
        print("RESULT " + json.dumps(result), flush=True)
        return
    sys.path.insert(0, str(HERE))
    from bench_unsloth import save_models  # the engine benchmark's random model, saved

    save_models({MODEL}, args.models_dir)
    results = []
    for side in args.sides.split(","):
        results.append(run_side(side, args.steps, args.models_dir, args.trl_path))
        print(json.dumps(results[-1]), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    timed = {r["side"]: r["s_per_step"] for r in results if "s_per_step" in r}
    for side, seconds in timed.items():
        ratios = ", ".join(f"{timed[o] / seconds:.2f}x {o}" for o in timed if o != side)
        print(f"{side}: {seconds:.2f} s a step ({ratios})")


if __name__ == "__main__":
    main()
