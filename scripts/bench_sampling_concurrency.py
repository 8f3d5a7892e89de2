"""Benchmark: time to first token of concurrent sampling streams, batched vs one at a time.

Starts a real `thinker serve` (its own data directory, SQLite) twice: once decoding one
sequence at a time (THINKER_SAMPLE_BATCH_ROWS=1, the server's behaviour before continuous
batching) as the baseline, once with the default batch. On each, while a default SL job trains
on the shipped arithmetic example (unless `--no-job`), it streams from the built-in tiny model
(POST /api/sample/stream, 256 tokens, seeded):

- one stream at a time, `--rounds` times;
- `--streams` streams at once, `--rounds` times.

and prints time to first token (request sent -> first token event) p50/p99, and tokens/s (all
streams' tokens over the round's wall time), for both servers, with the ratios and the load
average before and after (the machine may be shared: read it beside the figures).

    .venv/bin/python scripts/bench_sampling_concurrency.py             # 10 streams, 5 rounds
    .venv/bin/python scripts/bench_sampling_concurrency.py --no-job --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench_common import free_port, start_job, stop_server

REPO = Path(__file__).resolve().parents[1]
MODEL = "thinker/tiny"


@dataclass
class Server:
    """`python -m thinker serve` with its own data directory and extra settings."""

    data_dir: Path
    settings: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO / "backend"),
            "THINKER_DATA_DIR": str(self.data_dir),
            "THINKER_PORT": str(self.port),
            "THINKER_GPUS": "0",
            "HF_HUB_OFFLINE": "1",
            **self.settings,
        }
        log = open(self.data_dir.parent / "server.log", "ab")  # noqa: SIM115 (lives with it)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "thinker", "serve"], env=env, stdout=log, stderr=log
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited; see {log.name}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/health").status_code == 200:
                    return
            time.sleep(0.3)
        raise TimeoutError("the server did not come up in 120 s")

    def stop(self) -> None:
        stop_server(self.process)


# ---- the streams --------------------------------------------------------------------------
@dataclass
class Stream:
    ttft_s: float
    tokens: int


async def one_stream(client: httpx.AsyncClient, seed: int, max_tokens: int) -> Stream:
    """Stream one completion; the time to its first token event and its token count."""
    body = {
        "model": MODEL,
        "prompt": f"User: {seed}+{seed % 7}\n\nAssistant:",
        "max_tokens": max_tokens,
        "seed": seed,
    }
    sent, first, tokens = time.perf_counter(), None, 0
    async with client.stream("POST", "/api/sample/stream", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[len("data: ") :])
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            if "token" in event:
                tokens += 1
                first = first if first is not None else time.perf_counter() - sent
    assert first is not None, "a stream without tokens"
    return Stream(first, tokens)


@dataclass
class Figures:
    ttft_p50_s: float
    ttft_p99_s: float
    tokens_per_s: float
    streams: int


async def measure(url: str, streams: int, rounds: int, max_tokens: int) -> Figures:
    """`rounds` rounds of `streams` streams at once (seeds differ per stream, not per run)."""
    ttfts: list[float] = []
    rates: list[float] = []
    limits = httpx.Limits(max_connections=streams + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        for r in range(rounds):
            started = time.perf_counter()
            done = await asyncio.gather(
                *(one_stream(client, r * streams + i, max_tokens) for i in range(streams))
            )
            rates.append(sum(s.tokens for s in done) / (time.perf_counter() - started))
            ttfts += [s.ttft_s for s in done]
    return Figures(
        _percentile(ttfts, 50), _percentile(ttfts, 99), statistics.mean(rates), len(ttfts)
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def bench_server(
    work: Path, label: str, settings: dict[str, str], args: argparse.Namespace
) -> dict[str, Figures]:
    server = Server(work / label, settings)
    server.start()
    try:
        if not args.no_job:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                start_job(client)
        asyncio.run(measure(server.url, 1, 1, 8))  # loads the model
        return {
            "alone": asyncio.run(measure(server.url, 1, args.rounds, args.max_tokens)),
            "concurrent": asyncio.run(
                measure(server.url, args.streams, args.rounds, args.max_tokens)
            ),
        }
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--no-job", action="store_true", help="no training job beside")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-sampling-"))
    try:
        results = {
            "sequential": bench_server(
                work, "sequential", {"THINKER_SAMPLE_BATCH_ROWS": "1"}, args
            ),
            "batched": bench_server(work, "batched", {}, args),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, args, load_before, os.getloadavg())


def report(
    results: dict[str, dict[str, Figures]],
    args: argparse.Namespace,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    job = "no job" if args.no_job else "one tiny SL job training"
    print(f"\n{args.streams} streams x {args.rounds} rounds, {args.max_tokens} tokens, {job}")
    print(f"{'server':<12}{'streams':>8}{'TTFT p50':>11}{'TTFT p99':>11}{'tokens/s':>10}")
    for server, by_mode in results.items():
        for mode, f in by_mode.items():
            n = 1 if mode == "alone" else args.streams
            print(
                f"{server:<12}{n:>8}{f.ttft_p50_s:>10.3f}s{f.ttft_p99_s:>10.3f}s"
                f"{f.tokens_per_s:>10.0f}"
            )
    seq, bat = results["sequential"]["concurrent"], results["batched"]["concurrent"]
    print(
        f"{args.streams} concurrent: TTFT p99 {seq.ttft_p99_s / bat.ttft_p99_s:.1f}x lower, "
        f"tokens/s {bat.tokens_per_s / seq.tokens_per_s:.1f}x higher with batching"
    )
    print(f"load average before {_load(load_before)}, after {_load(load_after)}")
    if args.json:
        figures = {s: {m: vars(f) for m, f in by.items()} for s, by in results.items()}
        args.json.write_text(json.dumps({"figures": figures, "load": [load_before, load_after]}))


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    main()
