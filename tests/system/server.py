"""A real `thinker serve` process for the platform tests: start, wait, kill -9, restart."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "data" / "examples" / "arithmetic" / "train.jsonl"


class ServerProcess:
    """`python -m thinker serve` on a free port with its own data directory."""

    def __init__(self, data_dir: Path, database_url: str | None, **env: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "THINKER_DATA_DIR": str(data_dir),
            "THINKER_PORT": str(self.port),
            "THINKER_POLL_INTERVAL_S": "0.05",
            "THINKER_REGISTER_EXAMPLES": "false",
            "THINKER_GPUS": "0",
            "HF_HUB_OFFLINE": "1",
            **env,
        }
        if database_url:
            self.env["THINKER_DATABASE_URL"] = database_url
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"server-{self.port}.log"

    def start(self, timeout: float = 90) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "thinker", "serve"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=1).status_code in (200, 401):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"server not up after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def kill9(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)


def wait_for(
    client: httpx.Client,
    job_id: str,
    states: tuple[str, ...],
    timeout: float = 600,  # a bound on a hang, not a speed (see tests/support/api.py)
    min_step: int = 0,
) -> dict[str, Any]:
    """Poll a job until it is in one of `states` (and at `min_step` or beyond)."""
    deadline = time.time() + timeout
    job: dict[str, Any] = {}
    while time.time() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in states and job["step"] >= min_step:
            return job
        if job["state"] in ("failed",) and "failed" not in states:
            raise AssertionError(f"job failed: {job['reason']}\n{job['log_tail']}")
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} still {job.get('state')} at step {job.get('step')}")


def upload(client: httpx.Client, path: Path, kind: str, name: str | None = None) -> str:
    """Upload a dataset file through the API; returns its id."""
    with open(path, "rb") as f:
        response = client.post(
            "/api/datasets",
            files={"file": (path.name, f, "application/octet-stream")},
            data={"kind": kind, **({"name": name} if name else {})},
        )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def kill_worker_group(pid: int) -> None:
    """SIGKILL a worker (and anything it started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
