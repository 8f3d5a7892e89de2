"""A job whose worker is lost resumes by itself from its last checkpoint while its
`auto_resume` retries last, with real workers on the tiny model:
each attempt is in the job's events (interrupted with the reason, queued again saying after
what, where it ran), no metric step is lost or logged twice, and a job out of retries stays
interrupted until a person resumes it. (The same on a Ray cluster, a node lost, on SQLite and
PostgreSQL: tests/system/test_ray.py; here SQLite only.)"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, job_pid, make_settings, wait_state

from thinker.runs import RunDir, read_metrics
from thinker.server.app import create_app

ARITHMETIC = EXAMPLES / "arithmetic" / "train.jsonl"
CONFIG = {"batch_size": 4, "eval_every": 0, "save_every": 10, "max_steps": 160}


def _wait(
    client: TestClient, job_id: str, ok: Callable[[dict[str, Any]], bool], timeout: float = 600
) -> dict[str, Any]:
    """The job once `ok`; `timeout` bounds a hang, not a speed (tests/support/api.py)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if ok(job):
            return job
        assert job["state"] not in ("succeeded", "failed", "cancelled"), job
        time.sleep(0.05)
    raise TimeoutError(f"{job_id}: {job}")


def _lose_worker(client: TestClient, job_id: str, attempt: int, past_step: int) -> int:
    """SIGKILL the worker of `attempt` (its whole session) once it has trained past
    `past_step`: no final event, as when a machine goes. Returns its pid."""
    _wait(client, job_id, lambda j: j["attempts"] == attempt and j["step"] >= past_step)
    pid = job_pid(client, job_id)
    os.killpg(pid, signal.SIGKILL)
    return pid


def test_a_lost_worker_resumes_by_itself_until_its_retries_are_spent(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        body = {"algorithm": "sl", "dataset_id": chat, "config": CONFIG, "auto_resume": 1}
        created = client.post("/api/jobs", json=body).json()
        assert created["auto_resume"] == 1 and created["auto_resumes"] == 0
        job_id = created["id"]
        first = _lose_worker(client, job_id, attempt=1, past_step=22)
        # Resumed without being asked: a second attempt, from the checkpoint before the loss.
        again = _wait(client, job_id, lambda j: j["attempts"] == 2 and j["state"] == "running")
        assert again["auto_resumes"] == 1
        second = _lose_worker(client, job_id, attempt=2, past_step=again["step"] + 12)
        assert second != first
        stuck = wait_state(client, job_id, ("interrupted",))
        time.sleep(2)  # several of the manager's ticks: it stays interrupted, out of retries
        stuck = client.get(f"/api/jobs/{job_id}").json()
        assert stuck["state"] == "interrupted" and stuck["attempts"] == 2, stuck
        assert f"the worker (pid {second})" in stuck["reason"] and stuck["retryable"] is True
        assert client.post(f"/api/jobs/{job_id}/resume").status_code == 200
        done = wait_state(client, job_id, ("succeeded", "failed"))
        assert done["state"] == "succeeded" and done["attempts"] == 3, done
        assert done["placement"]["executor"] == "local" and done["placement"]["gpus"] == []
        events = client.get(f"/api/jobs/{job_id}/events", params={"limit": 10000}).json()["data"]
    states = [e["data"] for e in events if e["type"] == "state"]
    lost = [s for s in states if s["state"] == "interrupted"]
    assert len(lost) == 2
    for state, pid in zip(lost, (first, second), strict=True):
        assert f"the worker (pid {pid})" in state["reason"]
    requeued = [s for s in states if s["state"] == "queued" and s.get("resumed")]
    assert [s.get("auto") for s in requeued] == [
        {"retry": 1, "of": 1, "after": lost[0]["reason"]},
        None,  # the person's resume
    ]
    where = [e["data"] for e in events if e["type"] == "placement"]
    assert [p["attempt"] for p in where] == [1, 2, 3]
    plans = [e["data"]["start_step"] for e in events if e["type"] == "plan"]
    assert plans[0] == 0 and 20 <= plans[1] < plans[2] and plans[1] % 10 == plans[2] % 10 == 0
    run = RunDir(tmp_path / "data" / "runs" / job_id)
    steps = [row["step"] for row in read_metrics(run.metrics) if "train_mean_nll" in row]
    assert steps == list(range(1, CONFIG["max_steps"] + 1))  # none lost, none twice
    assert "without being asked (auto_resume: retry 1 of 1)" in run.log.read_text()
