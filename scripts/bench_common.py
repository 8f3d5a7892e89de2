"""What the server benchmarks (scripts/bench_*.py) share: a training job to load the server
with, and stopping a server together with the workers it started."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time

import httpx
import psutil

# A default SL job on the shipped arithmetic example that outlasts the run; cancelled after.
JOB_CONFIG = {"max_steps": 100_000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_job(client: httpx.Client) -> str:
    """Queue a default SL job on the arithmetic example; return its id once it trains."""
    datasets = client.get("/api/datasets", params={"limit": 500}).json()["data"]
    arithmetic = next(d for d in datasets if d["name"] == "arithmetic-train")
    body = {"algorithm": "sl", "dataset_id": arithmetic["id"], "config": JOB_CONFIG}
    response = client.post("/api/jobs", json=body)
    response.raise_for_status()
    job_id = str(response.json()["id"])
    deadline = time.time() + 180
    while time.time() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] == "running" and job["step"] >= 1:
            return job_id
        if job["state"] not in ("queued", "starting", "running"):
            raise RuntimeError(f"the job is {job['state']}: {job['reason']}")
        time.sleep(0.5)
    raise TimeoutError("the job did not start training in 180 s")


def stop_server(process: subprocess.Popen[bytes] | None) -> None:
    """Stop the server, and the workers it started (they would outlive it)."""
    if process is None or process.poll() is not None:
        return
    workers = psutil.Process(process.pid).children(recursive=True)
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for worker in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()


def wait_up(client: httpx.Client, server: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    """Until the server answers /api/health (raises if it exits or takes over `timeout_s`)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError("the server exited; see its log")
        try:
            if client.get("/api/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the server did not come up in {timeout_s:g} s")
