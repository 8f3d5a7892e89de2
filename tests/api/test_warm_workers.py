"""CPU jobs' workers forked by the warm starter (jobs/forkserver.py) are workers like any:
they train to the end, the server follows and stops them by pid, a lost one's exit code is
reported, and a changed server environment gets a starter of its own. (Every other test's
CPU jobs run this way too; GPU and multi-process jobs start afresh.)"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, platform_of, wait_state

from thinker.jobs import executor
from thinker.server.app import create_app

FORKED = "[thinker] worker forked from the warm starter"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """The real app on SQLite (the starter does not touch the database)."""
    with TestClient(create_app(make_settings(tmp_path / "data", None))) as test_client:
        yield test_client


def _job(client: TestClient, dataset: str, steps: int) -> str:
    body = {
        "algorithm": "sl",
        "dataset_id": dataset,
        "config": {"max_steps": steps, "eval_every": 0, "save_every": 0},
        "auto_resume": 0,
    }
    created = client.post("/api/jobs", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def _log(client: TestClient, job_id: str) -> str:
    return (platform_of(client).settings.runs_dir / job_id / "worker.log").read_text()


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def test_a_forked_worker_trains_is_followed_and_its_exit_code_reported(
    client: TestClient, tmp_path: Path
) -> None:
    sums = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    done = wait_state(client, _job(client, sums, 3), ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["log_tail"]
    assert done["step"] == 3
    starter = executor._warm
    assert starter is not None and starter.served
    assert _log(client, done["id"]).startswith(FORKED)

    long = _job(client, sums, 100_000)
    wait_state(client, long, ("running",))
    events = client.get(f"/api/jobs/{long}/events").json()["data"]
    (pid,) = [e["data"]["pid"] for e in events if e["data"].get("state") == "running"]
    assert _parent(pid) == starter._process.pid != os.getpid()  # the starter's child
    assert os.getsid(pid) == pid  # in a session of its own, as a started worker
    os.kill(pid, signal.SIGKILL)
    lost = wait_state(client, long, ("interrupted",))
    assert f"the worker (pid {pid}) exited with code -9" in lost["reason"], lost["reason"]


def test_a_changed_environment_gets_a_starter_of_its_own(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sums = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    first = wait_state(client, _job(client, sums, 1), ("succeeded", "failed"))
    assert first["state"] == "succeeded", first["log_tail"]
    before = executor._warm
    assert before is not None
    monkeypatch.setenv("THINKER_TEST_MARK", "changed")  # as a library might read at import
    second = wait_state(client, _job(client, sums, 1), ("succeeded", "failed"))
    assert second["state"] == "succeeded", second["log_tail"]
    after = executor._warm
    assert after is not None and after is not before
    assert after.env["THINKER_TEST_MARK"] == "changed"
    assert before._process.poll() is not None  # the old one ended (its workers would not)
    assert _log(client, second["id"]).startswith(FORKED)
