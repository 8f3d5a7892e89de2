"""Benchmark: how long a job waits between being queued and its first training step, under the
local executor and under the Ray executor (`THINKER_EXECUTOR=ray`).

For each executor it starts a real `thinker serve` (its own data directory, SQLite, the shipped
examples registered) and, for Ray, a one-node cluster on this machine (`ray start --head`,
stopped after). It then runs `--jobs` tiny-model SL jobs one after another (default settings,
`max_steps` 1, no evaluation or checkpoint), each once the one before has ended, and takes
for each the time from its creation (the job's `created_at`) to its first metrics row (the
row's `time`, written by the worker after step 1). Both clocks are this machine's.

Prints each executor's times, their median, and Ray's median over the local one's; the
figures go in docs/benchmarks.md with the machine and the commit.

    .venv/bin/python scripts/bench_scheduling.py              # 10 jobs each
    .venv/bin/python scripts/bench_scheduling.py --jobs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
from bench_common import free_port, stop_server, wait_up

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"max_steps": 1, "eval_every": 0, "save_every": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results = {}
    for executor in ("local", "ray"):
        seconds = run(executor, args.jobs)
        results[executor] = {"seconds": seconds, "median_s": statistics.median(seconds)}
        shown = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"{executor}: median {results[executor]['median_s']:.2f} s ({shown})", flush=True)
    ratio = results["ray"]["median_s"] / results["local"]["median_s"]
    print(f"ray / local, queued to first step (median of {args.jobs}): {ratio:.2f}x")
    if args.json:
        summary = {"jobs": args.jobs, "ray_over_local": ratio, **results}
        args.json.write_text(json.dumps(summary, indent=1))


def run(executor: str, jobs: int) -> list[float]:
    """Queued-to-first-step seconds of `jobs` jobs run one after another."""
    work = Path(tempfile.mkdtemp(prefix=f"thinker-sched-{executor}-"))
    env = {
        **os.environ,
        "THINKER_DATA_DIR": str(work / "data"),
        "THINKER_PORT": str(free_port()),
        "THINKER_EXECUTOR": executor,
        "THINKER_REGISTER_EXAMPLES": "true",
        "THINKER_GPUS": "0",
        "HF_HUB_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    ray = str(Path(sys.executable).parent / "ray")
    server = None
    try:
        if executor == "ray":
            port = free_port()
            head = [ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--num-gpus=0"]
            head += ["--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={work}/r"]
            subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
            env["THINKER_RAY_ADDRESS"] = f"127.0.0.1:{port}"
        with open(work / "server.log", "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "thinker", "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        url = f"http://127.0.0.1:{env['THINKER_PORT']}"
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_up(client, server)
            datasets = client.get("/api/datasets", params={"limit": 500}).json()["data"]
            chat = next(d["id"] for d in datasets if d["name"] == "arithmetic-train")
            return [_one_job(client, work / "data", chat) for _ in range(jobs)]
    finally:
        stop_server(server)
        if executor == "ray":
            subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)


def _one_job(client: httpx.Client, data_dir: Path, dataset_id: str) -> float:
    body = {"algorithm": "sl", "dataset_id": dataset_id, "config": CONFIG}
    created = client.post("/api/jobs", json=body)
    created.raise_for_status()
    job = created.json()
    deadline = time.time() + 300
    while job["state"] not in ("succeeded", "failed", "cancelled", "interrupted"):
        if time.time() > deadline:
            raise TimeoutError(f"job {job['id']} still {job['state']} after 300 s")
        time.sleep(0.2)
        job = client.get(f"/api/jobs/{job['id']}").json()
    if job["state"] != "succeeded":
        raise RuntimeError(f"job {job['id']} {job['state']}: {job['reason']}")
    metrics = data_dir / "runs" / job["id"] / "metrics.jsonl"
    first = json.loads(metrics.read_text().splitlines()[0])
    return float(first["time"]) - datetime.fromisoformat(job["created_at"]).timestamp()


if __name__ == "__main__":
    main()
