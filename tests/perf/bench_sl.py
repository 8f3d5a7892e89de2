"""SL step throughput and peak memory: Thinker's local engine vs plain transformers + PEFT.

Both sides train the same random-initialised model of a real shape (bf16, SDPA, LoRA r=16 on
all seven linear projections, AdamW) on the same random tokens, in the same process, one after
the other; each figure is the median of timed steps after warm-up steps. Usage (CUDA machine):

    PYTHONPATH=backend python tests/perf/bench_sl.py --model thinker/random-qwen3-0.6b \
        --batch 8 --seq 1024

Prints one JSON line per side and one with the ratios (thinker / baseline).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable

import torch
from peft import LoraConfig, get_peft_model
from tinker import types
from transformers import AutoModelForCausalLM

import thinker
from thinker.engine.local.models import BUILTIN_CONFIGS, BUILTIN_SEED

PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _time_steps(step: Callable[[], None], warmup: int, steps: int) -> tuple[float, float]:
    """Median seconds per step, and peak GPU memory (GiB) over the timed steps."""
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


def baseline(model_name: str, tokens_BT: torch.Tensor, rank: int, warmup: int, steps: int) -> dict:
    torch.manual_seed(BUILTIN_SEED)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(
            BUILTIN_CONFIGS[model_name](), dtype=torch.bfloat16, attn_implementation="sdpa"
        )
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=32, target_modules=PROJECTIONS))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    input_ids = tokens_BT[:, :-1].cuda()  # the same forward length as the engine's inputs

    def step() -> None:
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds, peak = _time_steps(step, warmup, steps)
    return {"side": "transformers+peft", "s_per_step": seconds, "peak_gib": peak}


def thinker_engine(
    model_name: str, tokens_BT: torch.Tensor, rank: int, warmup: int, steps: int
) -> dict:
    service = thinker.ServiceClient(backend="local", storage_dir="/tmp/thinker-bench")
    client = service.create_lora_training_client(
        model_name, rank=rank, train_unembed=False
    ).result()
    batch = [
        types.Datum(
            model_input=types.ModelInput.from_ints(row[:-1].tolist()),
            loss_fn_inputs={"target_tokens": row[1:].tolist(), "weights": [1.0] * (len(row) - 1)},
        )
        for row in tokens_BT
    ]

    def step() -> None:
        fb = client.forward_backward(batch, "cross_entropy")
        opt = client.optim_step(types.AdamParams(learning_rate=1e-4))
        fb.result()
        opt.result()

    seconds, peak = _time_steps(step, warmup, steps)
    return {"side": "thinker", "s_per_step": seconds, "peak_gib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="thinker/random-qwen3-0.6b", choices=sorted(BUILTIN_CONFIGS)
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_sl.py measures GPU training: it needs CUDA")

    vocab = BUILTIN_CONFIGS[args.model]().vocab_size
    tokens_BT = torch.randint(
        0, vocab, (args.batch, args.seq + 1), generator=torch.Generator().manual_seed(0)
    )
    tokens_per_step = args.batch * args.seq
    results = []
    for run in (baseline, thinker_engine):
        result = run(args.model, tokens_BT, args.rank, args.warmup, args.steps)
        result.update(
            model=args.model,
            batch=args.batch,
            seq=args.seq,
            tokens_per_s=tokens_per_step / result["s_per_step"],
            device=torch.cuda.get_device_name(),
        )
        print(json.dumps(result), flush=True)
        results.append(result)
        gc.collect()
        torch.cuda.empty_cache()
    base, ours = results
    print(
        json.dumps(
            {
                "ratio": "thinker/baseline",
                "model": args.model,
                "tokens_per_s": ours["tokens_per_s"] / base["tokens_per_s"],
                "peak_memory": ours["peak_gib"] / base["peak_gib"],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
