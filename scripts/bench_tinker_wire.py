"""Benchmark: the tinker SDK over Thinker's HTTP protocol against the same engine in process.

Starts a real `thinker serve` (its own data directory, SQLite, CPU) and, on the built-in tiny
model with the same seed both ways:

- a training step (`forward_backward` + `optim_step`, each `.result()`ed, as a loop that
  reads its metrics does) on 4 datums of 64 tokens: the unmodified `tinker` SDK against the
  server, and `thinker.ServiceClient` in this process; median over `--steps` steps;
- sampling, 8 prompts x 4 samples x 64 tokens (all submitted, then read): tokens/s both ways;
- 1, 2 and 4 SDK clients training at once (threads, one training client each): the steps/s
  of all together, and the server's resident memory before and after they were created.

It prints the figures and the ratios, and the load average before and after (the machine may
be shared: read it beside the figures).

    .venv/bin/python scripts/bench_tinker_wire.py                 # 200 steps
    .venv/bin/python scripts/bench_tinker_wire.py --steps 50 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import tinker
from bench_common import free_port, stop_server
from tinker import types

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "backend"))
import thinker  # noqa: E402 - after the path

MODEL = "thinker/tiny"
KEY = "tml-bench"


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "backend"),
        "THINKER_DATA_DIR": str(data_dir),
        "THINKER_PORT": str(port),
        "THINKER_GPUS": "0",
        "HF_HUB_OFFLINE": "1",
    }
    data_dir.mkdir(parents=True)
    log = (data_dir / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "thinker", "serve"], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited; see {log.name}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/api/health").status_code == 200:
                return process, url
        time.sleep(0.3)
    raise TimeoutError("the server did not come up in 120 s")


def batch(rows: int = 4, length: int = 64) -> list[types.Datum]:
    out = []
    for r in range(rows):
        tokens = [(7 * r + 3 * i) % 250 + 3 for i in range(length + 1)]
        out.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * length},
            )
        )
    return out


def step_times(client: Any, steps: int) -> list[float]:
    data, params = batch(), types.AdamParams(learning_rate=1e-3)
    times = []
    for _ in range(steps + 5):  # the first 5 are warm-up
        started = time.perf_counter()
        client.forward_backward(data, "cross_entropy").result()
        client.optim_step(params).result()
        times.append(time.perf_counter() - started)
    return times[5:]


def sampling_tokens_per_s(client: Any) -> float:
    sampler = client.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=64, temperature=1.0, seed=1, stop=[])
    prompts = [
        types.ModelInput.from_ints([(5 * p + i) % 250 + 3 for i in range(32)]) for p in range(8)
    ]

    def run() -> int:
        futures = [sampler.sample(p, 4, params) for p in prompts]
        return sum(len(s.tokens) for f in futures for s in f.result().sequences)

    run()  # warm-up
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        tokens = run()
        best = max(best, tokens / (time.perf_counter() - started))
    return best


def concurrent_steps_per_s(url: str, server: psutil.Process, clients: int, steps: int) -> dict:
    service = tinker.ServiceClient(base_url=url, api_key=KEY)
    rss_before = server.memory_info().rss
    trainers = [
        service.create_lora_training_client(MODEL, rank=8, seed=i).result() for i in range(clients)
    ]
    rss_after = server.memory_info().rss
    for t in trainers:
        step_times(t, 1)  # warm-up
    barrier = threading.Barrier(clients + 1)

    def train(t: Any) -> None:
        barrier.wait()
        step_times(t, steps)

    threads = [threading.Thread(target=train, args=(t,)) for t in trainers]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {
        "clients": clients,
        "steps_per_s": clients * (steps + 5) / seconds,
        "server_rss_added_mib": (rss_after - rss_before) / 2**20,
    }


def clients_memory(url: str, server: psutil.Process, model: str, clients: int) -> dict:
    """The server's resident memory as `clients` training clients on `model` are created one
    after another (a step each, so gradients and optimizer state exist): what the first cost
    (the base model and its adapter) and what each later one added."""
    service = tinker.ServiceClient(base_url=url, api_key=KEY)
    added, trainers = [], []
    for i in range(clients):
        before = server.memory_info().rss
        trainers.append(service.create_lora_training_client(model, rank=8, seed=i).result())
        step_times(trainers[-1], 1)
        added.append((server.memory_info().rss - before) / 2**20)
    base, adapter = _sizes(model, rank=8)
    return {
        "model": model,
        "server_rss_added_mib_per_client": added,
        "base_model_mib": base / 2**20,
        # a client's own: the adapter, its gradient and AdamW's two moments, all fp32
        "adapter_state_mib": 16 * adapter / 2**20,
    }


def _sizes(model: str, rank: int) -> tuple[int, int]:
    """The base model's bytes (fp32, as on the CPU) and its LoRA adapter's parameter count at
    `rank` on every linear layer (the default targets), from a model on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM

    from thinker.engine.local.models import BUILTIN_CONFIGS

    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(BUILTIN_CONFIGS[model]())
    base = 4 * sum(p.numel() for p in meta.parameters())
    linears = [m for m in meta.modules() if isinstance(m, torch.nn.Linear)]
    return base, sum(rank * (m.in_features + m.out_features) for m in linears)


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--memory-model",
        default="thinker/random-qwen3-0.6b",
        help="the base model whose clients' memory is measured (big enough to see a copy)",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    results: dict[str, Any] = {"steps": args.steps}
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp) / "data")
        try:
            wire = tinker.ServiceClient(base_url=url, api_key=KEY)
            over_http = wire.create_lora_training_client(MODEL, rank=8, seed=0).result()
            local = thinker.ServiceClient(storage_dir=Path(tmp) / "local")
            in_process = local.create_lora_training_client(MODEL, rank=8, seed=0).result()
            sides: dict[str, Callable[[], list[float]]] = {
                "in process": lambda: step_times(in_process, args.steps),
                "over HTTP": lambda: step_times(over_http, args.steps),
            }
            for name, run in sides.items():
                results[f"step_ms_{name}"] = median_ms(run())
            results["added_ms_per_step"] = (
                results["step_ms_over HTTP"] - results["step_ms_in process"]
            )
            results["sample_tokens_per_s_in process"] = sampling_tokens_per_s(in_process)
            results["sample_tokens_per_s_over HTTP"] = sampling_tokens_per_s(over_http)
            server = psutil.Process(process.pid)
            results["concurrent"] = [
                concurrent_steps_per_s(url, server, n, args.steps // 4) for n in (1, 2, 4)
            ]
            results["memory"] = clients_memory(url, server, args.memory_model, 4)
        finally:
            stop_server(process)
    results["load_average_before_after"] = [load_before[0], os.getloadavg()[0]]
    print(json.dumps(results, indent=1))
    one = results["concurrent"][0]["steps_per_s"]
    for row in results["concurrent"]:
        print(
            f"{row['clients']} clients: {row['steps_per_s']:.1f} steps/s "
            f"({row['steps_per_s'] / one:.2f}x one), server +{row['server_rss_added_mib']:.0f} MiB"
        )
    memory = results["memory"]["server_rss_added_mib_per_client"]
    print(
        f"{args.memory_model}: the first client added {memory[0]:.0f} MiB, the next ones "
        + ", ".join(f"{m:.0f}" for m in memory[1:])
        + f" MiB (base model {results['memory']['base_model_mib']:.0f} MiB, a client's adapter "
        f"state {results['memory']['adapter_state_mib']:.0f} MiB)"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
