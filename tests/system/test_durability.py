"""Jobs survive what happens to processes: a server killed with SIGKILL mid-job (its worker
reattached, or marked interrupted and resumed from its last checkpoint), pause / resume and
cancel of a running job. Nothing stored is lost: the dataset, every metric line, every
checkpoint record."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from tests.system.server import ARITHMETIC, ServerProcess, kill_worker_group, upload, wait_for

from thinker.jobs.procs import is_alive

LONG = {"max_steps": 300, "batch_size": 4, "save_every": 10, "eval_every": 50}
# Killed once past step 25 (a tenth of a second after it is seen), resumed, and run to the end.
RESUMED = {**LONG, "max_steps": 80}
# More steps than any machine runs while the test watches: the job is cancelled through the
# restarted server, so the test's length does not depend on the machine's speed.
ENDLESS = {"max_steps": 100_000, "batch_size": 4, "save_every": 10, "eval_every": 0}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _start_long_job(client: httpx.Client, dataset_id: str, config: dict = LONG) -> str:
    """auto_resume 0: a job whose worker is lost waits for a person (test_auto_resume.py)."""
    body = {"algorithm": "sl", "dataset_id": dataset_id, "config": config, "auto_resume": 0}
    response = client.post("/api/jobs", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_server_killed_mid_job_reattaches_to_the_live_worker(
    tmp_path: Path, database_url: str | None
) -> None:
    """The restarted server follows the worker that kept training (its new steps, its
    checkpoints as models) and controls it: a cancel reaches it."""
    data_dir = tmp_path / "data"
    server = ServerProcess(data_dir, database_url).start()
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            job_id = _start_long_job(client, dataset_id, ENDLESS)
            job = wait_for(client, job_id, ("running",), min_step=15)
        server.kill9()
        run_dir = data_dir / "runs" / job_id
        before = _lines(run_dir / "metrics.jsonl")
        pid = _worker_pid(run_dir)
        server = ServerProcess(data_dir, database_url).start()
        with server.client() as client:
            assert is_alive(pid, None), "the worker should outlive the server (and still run)"
            following = client.get(f"/api/jobs/{job_id}").json()
            assert following["state"] == "running", following
            last_before = max(m["step"] for m in before)
            wait_for(client, job_id, ("running",), min_step=last_before + 10)
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            done = wait_for(client, job_id, ("cancelled",))
            assert done["attempts"] == job["attempts"] == 1
            _wait_exit(pid)  # the worker records its state, then exits
            states = [
                e["data"]["state"] for e in _lines(run_dir / "events.jsonl") if e["type"] == "state"
            ]
            assert states == ["queued", "starting", "running", "cancelled"]  # never interrupted
            metrics = _lines(run_dir / "metrics.jsonl")
            assert metrics[: len(before)] == before
            trained = [m["step"] for m in metrics if "train_mean_nll" in m]
            assert trained == list(range(1, trained[-1] + 1)) and trained[-1] >= last_before + 10
            events = client.get(f"/api/jobs/{job_id}/events", params={"limit": 10000}).json()
            seqs = [e["seq"] for e in events["data"]]
            assert seqs == list(range(1, len(seqs) + 1))
            saved = [c["step"] for c in _lines(run_dir / "checkpoints.jsonl")]
            assert saved and saved[-1] > last_before  # some written after the restart
            models = client.get("/api/models", params={"job_id": job_id}).json()
            assert sorted(m["step"] for m in models["data"]) == saved
    finally:
        server.stop()


def test_server_and_worker_killed_then_resumed_from_last_checkpoint(
    tmp_path: Path, database_url: str | None
) -> None:
    data_dir = tmp_path / "data"
    server = ServerProcess(data_dir, database_url).start()
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            stored = client.get(f"/api/datasets/{dataset_id}").json()
            job_id = _start_long_job(client, dataset_id, RESUMED)
            wait_for(client, job_id, ("running",), min_step=25)
            pid = _worker_pid(data_dir / "runs" / job_id)
        server.kill9()
        kill_worker_group(pid)
        run_dir = data_dir / "runs" / job_id
        checkpoints_before = _lines(run_dir / "checkpoints.jsonl")
        metrics_before = _lines(run_dir / "metrics.jsonl")
        assert checkpoints_before, "the job should have checkpointed before being killed"

        server = ServerProcess(data_dir, database_url).start()
        with server.client() as client:
            job = client.get(f"/api/jobs/{job_id}").json()
            assert job["state"] == "interrupted", job
            assert "no longer running" in job["reason"]
            again = client.get(f"/api/datasets/{dataset_id}").json()
            assert again["sha256"] == stored["sha256"] and again["num_rows"] == stored["num_rows"]

            resumed = client.post(f"/api/jobs/{job_id}/resume")
            # queued; or already taken by the scheduler when the job was read back (CI saw
            # "starting" once, on PostgreSQL)
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["state"] in ("queued", "starting", "running"), resumed.text
            done = wait_for(client, job_id, ("succeeded",))
            assert done["step"] == RESUMED["max_steps"] and done["attempts"] == 2
        checkpoints = _lines(run_dir / "checkpoints.jsonl")
        assert checkpoints[: len(checkpoints_before)] == checkpoints_before
        resumed_at = checkpoints_before[-1]["step"]
        assert [c["step"] for c in checkpoints] == list(range(10, RESUMED["max_steps"] + 1, 10))
        metrics = _lines(run_dir / "metrics.jsonl")
        assert metrics[: len(metrics_before)] == metrics_before  # nothing rewritten or lost
        plan = [e for e in _lines(run_dir / "events.jsonl") if e["type"] == "plan"]
        assert plan[-1]["data"]["start_step"] == resumed_at  # from the last checkpoint
        after = [m["step"] for m in metrics[len(metrics_before) :] if "train_mean_nll" in m]
        assert after == list(range(resumed_at + 1, RESUMED["max_steps"] + 1))
    finally:
        server.stop()


def test_pause_resume_and_cancel_a_running_job(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url).start()
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            job_id = _start_long_job(client, dataset_id)
            running = wait_for(client, job_id, ("running",), min_step=15)
            assert running["heartbeat_at"] is not None  # the worker's heartbeat is seen
            assert client.post(f"/api/jobs/{job_id}/pause").status_code == 200
            paused = wait_for(client, job_id, ("paused",))
            assert paused["reason"] == "stopped by request"
            assert client.post(f"/api/jobs/{job_id}/pause").status_code == 409

            assert client.post(f"/api/jobs/{job_id}/resume").status_code == 200
            wait_for(client, job_id, ("running",), min_step=paused["step"] + 5)
            starts = [
                e["data"]["start_step"]
                for e in client.get(f"/api/jobs/{job_id}/events").json()["data"]
                if e["type"] == "plan"
            ]
            assert starts[0] == 0 and starts[-1] >= 10  # the second run began at a checkpoint

            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            cancelled = wait_for(client, job_id, ("cancelled",))
            assert cancelled["step"] < 300
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 409
            assert client.post(f"/api/jobs/{job_id}/resume").status_code == 409
            assert client.delete(f"/api/jobs/{job_id}").status_code == 204
            assert client.get(f"/api/jobs/{job_id}").status_code == 404
            assert not (tmp_path / "data" / "runs" / job_id).exists()
    finally:
        server.stop()


def _wait_exit(pid: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout  # a bound on a hang, not a speed
    while is_alive(pid, None):
        assert time.time() < deadline, f"the worker (pid {pid}) is still running"
        time.sleep(0.1)


def _worker_pid(run_dir: Path) -> int:
    running = [e for e in _lines(run_dir / "events.jsonl") if e["data"].get("state") == "running"]
    return int(running[-1]["data"]["pid"])
