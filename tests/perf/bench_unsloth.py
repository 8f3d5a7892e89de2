"""Unsloth beside Thinker's engine rows: SL steps and long sequences on one GPU (issue 17).

Unsloth pins transformers <= 5.17 and Thinker runs 5.24, so Unsloth's side runs in its own
process on the GPU machine's own transformers (5.17), with Unsloth's wheels on PYTHONPATH
and nothing of Thinker's; the driver, in Thinker's environment, first saves the random
models the engine benchmark builds (same config, same seed) as checkpoints for it to load,
then runs each row's engine-benchmark sides (bench_engine.py) and Unsloth's, on the same
card in the same run. Usage (GPU machine; the wheels as docs/benchmarks.md says):

    PYTHONPATH=backend:/tmp/site python tests/perf/bench_unsloth.py \
        --unsloth-path /tmp/unsloth --rows sl-qwen3,long-32k-llama8b --json out.json

Unsloth's side is what its notebooks do: `FastLanguageModel.from_pretrained` (bf16, not
4-bit), `get_peft_model` with r=16 on the seven projections and its own gradient
checkpointing ("unsloth"), then steps of its patched forward with labels (its fused
cross-entropy), backward and torch AdamW. The tokens are the engine benchmark's (same
generator, same seed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
QWEN, LLAMA = "thinker/random-qwen3-0.6b", "thinker/random-llama3.1-8b"
# Each row: the model, the batch of (rows, tokens), and the lengths tried for the longest.
ROWS: dict[str, tuple[str, int, int]] = {
    "sl-qwen3": (QWEN, 8, 1024),
    "sl-llama8b": (LLAMA, 2, 2048),
    "long-32k-llama8b": (LLAMA, 1, 32_768),
}
LONGEST: dict[str, tuple[str, list[int]]] = {
    "long-qwen3": (QWEN, [65_536, 131_072, 262_144, 393_216]),
    "long-llama8b": (LLAMA, [16_384, 32_768, 65_536, 131_072, 196_608]),
}


# ---- Unsloth's side (its own process) --------------------------------------------------
def unsloth_row(name: str, models_dir: Path, only: list[int] | None = None) -> dict:
    import torch
    import unsloth  # noqa: F401 - before transformers, which it patches
    from unsloth import FastLanguageModel

    model_name, lengths = LONGEST[name] if name in LONGEST else (ROWS[name][0], [])
    lengths = only or lengths
    path = models_dir / model_name.split("/")[-1]
    longest = max(lengths) if lengths else ROWS[name][2]
    started = time.perf_counter()
    model, _ = FastLanguageModel.from_pretrained(
        model_name=str(path), max_seq_length=longest + 1, dtype=torch.bfloat16, load_in_4bit=False
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=16,
        lora_alpha=32,
        lora_dropout=0,
        bias="none",
        target_modules=PROJECTIONS,
        use_gradient_checkpointing="unsloth",
        random_state=0,
    )
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    vocab = json.loads((path / "config.json").read_text())["vocab_size"]

    def step_of(ids):  # noqa: ANN001, ANN202
        def step() -> float:
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return float(out.loss)

        return step

    if not lengths:
        batch, seq = ROWS[name][1], ROWS[name][2]
        ids = torch.tensor(_random_rows(vocab, [seq] * batch), device="cuda")[:, :-1]
        step = step_of(ids)
        step()
        torch.cuda.synchronize()
        ttfs = time.perf_counter() - started
        sys.path.insert(0, str(HERE))  # bench_engine imports only torch at module level
        from bench_engine import time_steps

        seconds, peak = time_steps(step, 1, 2)
        return {"seconds": seconds, "peak_gib": peak, "ttfs": ttfs, "tokens": batch * seq}
    trained = []
    for n in lengths:
        ids = torch.tensor(_random_rows(vocab, [n]), device="cuda")[:, :-1]
        torch.cuda.reset_peak_memory_stats()
        began = time.perf_counter()
        try:
            step_of(ids)()
            torch.cuda.synchronize()
        except torch.OutOfMemoryError as e:
            trained.append({"tokens": n, "error": str(e)[:300]})
            break
        trained.append(
            {
                "tokens": n,
                "seconds": time.perf_counter() - began,
                "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
            }
        )
        del ids
        torch.cuda.empty_cache()
    return {"lengths": trained}


def _random_rows(vocab: int, lengths: list[int], seed: int = 0) -> list[list[int]]:
    """bench_engine.random_rows without Thinker's imports: the same tokens."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n + 1,), generator=g).tolist() for n in lengths]


# ---- the driver (Thinker's environment) -----------------------------------------------
def save_models(models: set[str], models_dir: Path) -> None:
    """The engine benchmark's random models (its config and seed) as checkpoints, with the
    built-in tokenizer, for Unsloth to load from disk (no hub here)."""
    import torch
    from transformers import AutoModelForCausalLM

    from thinker.engine.local.models import BUILTIN_CONFIGS, BUILTIN_SEED, load_tokenizer

    for model in models:
        path = models_dir / model.split("/")[-1]
        if (path / "config.json").exists():
            continue
        torch.manual_seed(BUILTIN_SEED)
        with torch.device("cuda"):
            plain = AutoModelForCausalLM.from_config(BUILTIN_CONFIGS[model](), dtype=torch.bfloat16)
        plain.save_pretrained(path)
        load_tokenizer(model).save_pretrained(path)
        del plain
        torch.cuda.empty_cache()


def run(
    name: str,
    unsloth_path: str,
    models_dir: Path,
    lengths: list[int] | None = None,
    with_engine: bool = True,
) -> dict:
    """A row: the engine's sides (unless `with_engine` is off) and Unsloth's; a longest
    row tries `lengths` instead of its own on Unsloth's side."""
    sys.path.insert(0, str(HERE))
    import bench_engine

    result: dict = {"row": name, "device": "?", "sides": []}
    if with_engine:
        engine = subprocess.run(
            [sys.executable, str(HERE / "bench_engine.py"), "--row", name],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": bench_engine.COMPILE_CACHE},
        )
        lines = [x for x in engine.stdout.splitlines() if x.startswith("RESULT ")]
        result = (
            json.loads(lines[-1].removeprefix("RESULT "))
            if lines
            else {**result, "sides": [{"side": "engine row", "error": engine.stderr[-2000:]}]}
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = unsloth_path
    env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, "--unsloth-row", name, "--models-dir", str(models_dir)]
        + (["--lengths", ",".join(map(str, lengths))] if lengths else []),
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    found = [x for x in proc.stdout.splitlines() if x.startswith("UNSLOTH ")]
    if not found:
        result["sides"].append({"side": "unsloth", "error": (proc.stderr or proc.stdout)[-3000:]})
        return result
    raw = json.loads(found[-1].removeprefix("UNSLOTH "))
    model = (LONGEST[name] if name in LONGEST else ROWS[name])[0]
    if "lengths" in raw:
        for entry in raw["lengths"]:
            n = entry["tokens"]
            if "error" in entry:
                result["sides"].append({"side": f"unsloth, {n:,} tokens", "error": entry["error"]})
                continue
            s = entry["seconds"]
            result["sides"].append(
                bench_engine.side(
                    f"unsloth, {n:,} tokens", s, entry["peak_gib"], s, n, n, model, (n + 1) / 2
                )
            )
        return result
    seq = ROWS[name][2]
    result["sides"].append(
        bench_engine.side(
            "unsloth",
            raw["seconds"],
            raw["peak_gib"],
            raw["ttfs"],
            raw["tokens"],
            raw["tokens"],
            model,
            (seq + 1) / 2,
        )
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join([*ROWS, *LONGEST]))
    parser.add_argument(
        "--unsloth-path", default="/tmp/unsloth", help="Unsloth's wheels, installed"
    )
    parser.add_argument("--models-dir", type=Path, default=Path("/tmp/unsloth-models"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--lengths", help="a longest row's lengths for Unsloth, e.g. 131072")
    parser.add_argument(
        "--unsloth-only", action="store_true", help="Unsloth's side alone (Thinker's measured)"
    )
    parser.add_argument("--unsloth-row", help=argparse.SUPPRESS)  # Unsloth's side, in its env
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")] if args.lengths else None
    if args.unsloth_row:
        result = unsloth_row(args.unsloth_row, args.models_dir, lengths)
        print("UNSLOTH " + json.dumps(result), flush=True)
        return
    sys.path.insert(0, str(HERE))
    import bench_engine

    names = args.rows.split(",")
    save_models({(LONGEST[n] if n in LONGEST else ROWS[n])[0] for n in names}, args.models_dir)
    results = []
    for name in names:
        results.append(
            run(name, args.unsloth_path, args.models_dir, lengths, not args.unsloth_only)
        )
        print(bench_engine.table(results[-1:]), flush=True)
        for s in results[-1]["sides"]:
            if "error" in s:
                print(f"{name} {s['side']}: {s['error']}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    print("\n" + bench_engine.table(results))


if __name__ == "__main__":
    main()
