"""Jobs through the REST API, in process, on SQLite and PostgreSQL: validation before
anything is queued, Idempotency-Key, state changes of queued jobs, priorities, filters,
metrics and models of a job that ran (a real worker process on the tiny model)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.api import (
    EXAMPLES,
    add_dataset,
    job_rows,
    make_settings,
    platform_of,
    wait_state,
)

from thinker.server.app import create_app


@pytest.mark.postgresql
def test_a_bad_job_is_refused_with_every_problem_and_nothing_is_stored(held: TestClient) -> None:
    chat = add_dataset(held, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    runs = platform_of(held).settings.runs_dir
    response = held.post(
        "/api/jobs",
        json={
            "algorithm": "dpo",
            "dataset_id": chat,
            "config": {
                "beta": -1,
                "dataset": "../../etc/passwd",
                "log_path": "/tmp/x",
                "learning_rat": 1e-4,
                "api_key": "sk-secret-value",
            },
        },
    )
    assert response.status_code == 422
    body = response.json()
    problems = body["problems"]
    assert f"dataset_id: dataset {chat} holds chat rows; dpo trains on preferences" in problems
    assert any(p.startswith("config.dataset: paths are not accepted") for p in problems)
    assert any(p.startswith("config.log_path: paths are not accepted") for p in problems)
    assert "config.beta: Input should be greater than 0" in problems
    assert "config.learning_rat: Extra inputs are not permitted" in problems
    assert any(p.startswith("config.api_key: secrets are not accepted") for p in problems)
    assert "sk-secret-value" not in response.text
    assert job_rows(held) == [] and list(runs.iterdir()) == []

    unknown = held.post("/api/jobs", json={"algorithm": "sl", "dataset_id": "ds_nope"})
    assert unknown.status_code == 422
    assert unknown.json()["problems"] == ["dataset_id: no dataset with id 'ds_nope'"]
    wrong = held.post("/api/jobs", json={"algorithm": "ppo", "dataset_id": chat})
    assert wrong.status_code == 422 and "algorithm" in wrong.json()["detail"]
    assert job_rows(held) == []


@pytest.mark.postgresql
def test_rlhf_needs_a_dataset_of_the_right_kind_for_each_stage(held: TestClient) -> None:
    demos = add_dataset(held, EXAMPLES / "rlhf" / "demos.jsonl", "chat")
    pairs = add_dataset(held, EXAMPLES / "preferences" / "train.jsonl", "preferences")
    prompts = add_dataset(held, EXAMPLES / "rlhf" / "prompts.jsonl", "problems")
    missing = held.post(
        "/api/jobs",
        json={"algorithm": "rlhf", "dataset_id": demos, "config": {"rm": {"dataset_id": prompts}}},
    )
    assert missing.status_code == 422
    assert sorted(missing.json()["problems"]) == [
        "config.rl.dataset_id: required (the id of a dataset of kind problems)",
        f"config.rm.dataset_id: dataset {prompts} holds problems rows; rm trains on preferences",
    ]
    ok = held.post(
        "/api/jobs",
        json={
            "algorithm": "rlhf",
            "dataset_id": demos,
            "config": {"rm": {"dataset_id": pairs}, "rl": {"dataset_id": prompts, "max_steps": 2}},
        },
    )
    assert ok.status_code == 201, ok.text
    job_file = platform_of(held).settings.runs_dir / ok.json()["id"] / "job.json"
    assert str(platform_of(held).datasets.path(prompts)) in job_file.read_text()


@pytest.mark.postgresql
def test_rlhf_settings_given_once_reach_every_stage(held: TestClient) -> None:
    """They were dropped with the proposal (which holds the stages only), unchecked."""
    demos = add_dataset(held, EXAMPLES / "rlhf" / "demos.jsonl", "chat")
    pairs = add_dataset(held, EXAMPLES / "preferences" / "train.jsonl", "preferences")
    prompts = add_dataset(held, EXAMPLES / "rlhf" / "prompts.jsonl", "problems")
    stages = {"rm": {"dataset_id": pairs}, "rl": {"dataset_id": prompts}}
    body = {"algorithm": "rlhf", "dataset_id": demos, "config": {**stages, "lora_rank": 8}}
    created = held.post("/api/jobs", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["config"]["lora_rank"] == 8
    job_file = platform_of(held).settings.runs_dir / created.json()["id"] / "job.json"
    section = json.loads(job_file.read_text())["section"]
    assert [section[stage]["lora_rank"] for stage in ("sl", "rm", "rl")] == [8, 8, 8]
    refused = held.post("/api/jobs", json={**body, "config": {**stages, "lora_rnk": 8}})
    assert refused.status_code == 422
    assert refused.json()["problems"] == ["config.lora_rnk: Extra inputs are not permitted"]


@pytest.mark.postgresql
def test_a_tinker_job_needs_a_stored_key(held: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    chat = add_dataset(held, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    body = {
        "algorithm": "sl",
        "backend": "tinker",
        "base_model": "Qwen/Qwen3-8B",
        "dataset_id": chat,
    }
    refused = held.post("/api/jobs", json=body)
    assert refused.status_code == 422 and "needs a Tinker API key" in refused.json()["detail"]
    assert job_rows(held) == []
    key = "tml-0123456789abcdef"
    assert held.put("/api/settings/tinker-key", json={"api_key": key}).status_code == 200
    queued = held.post("/api/jobs", json=body)
    assert queued.status_code == 201 and queued.json()["resource"] == "remote"
    assert key not in queued.text


@pytest.mark.postgresql
def test_idempotency_key_makes_one_job(held: TestClient) -> None:
    chat = add_dataset(held, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    body = {"algorithm": "sl", "dataset_id": chat, "config": {"max_steps": 3}}
    first = held.post("/api/jobs", json=body, headers={"Idempotency-Key": "retry-1"})
    again = held.post("/api/jobs", json=body, headers={"Idempotency-Key": "retry-1"})
    other = held.post("/api/jobs", json=body, headers={"Idempotency-Key": "retry-2"})
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert again.json()["id"] == first.json()["id"] != other.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(job_rows(held)) == 2


@pytest.mark.postgresql
def test_queued_jobs_cancel_pause_resume_and_filters(held: TestClient) -> None:
    chat = add_dataset(held, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    ids = [
        held.post(
            "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "name": f"j{i}"}
        ).json()["id"]
        for i in range(3)
    ]
    assert held.post(f"/api/jobs/{ids[0]}/cancel").json()["state"] == "cancelled"
    assert held.post(f"/api/jobs/{ids[0]}/cancel").status_code == 409
    assert held.post(f"/api/jobs/{ids[1]}/pause").json()["state"] == "paused"
    assert held.post(f"/api/jobs/{ids[1]}/resume").json()["state"] == "queued"
    assert held.post(f"/api/jobs/{ids[2]}/resume").status_code == 409  # queued: nothing to resume
    assert held.delete(f"/api/jobs/{ids[2]}").status_code == 409  # cancel first

    listed = held.get("/api/jobs", params={"state": "queued"}).json()
    assert listed["count"] == 2 and {j["id"] for j in listed["data"]} == set(ids[1:])
    assert held.get("/api/jobs", params={"state": "cancelled"}).json()["count"] == 1
    assert held.get("/api/jobs", params={"state": "bogus"}).status_code == 422
    assert held.get("/api/jobs", params={"limit": 1}).json()["count"] == 3
    assert len(held.get("/api/jobs", params={"limit": 1}).json()["data"]) == 1

    events = held.get(f"/api/jobs/{ids[1]}/events").json()["data"]
    assert [(e["seq"], e["data"]["state"]) for e in events] == [
        (1, "queued"),
        (2, "paused"),
        (3, "queued"),
    ]
    assert held.delete(f"/api/jobs/{ids[0]}").status_code == 204
    assert held.get(f"/api/jobs/{ids[0]}").status_code == 404


@pytest.mark.postgresql
def test_priorities_order_the_queue_and_a_run_makes_models(
    tmp_path: Path, database_url: str | None
) -> None:
    settings = make_settings(tmp_path / "data", database_url, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
        config = {"max_steps": 4, "batch_size": 4, "save_every": 2, "eval_every": 2}
        first, low, high = (
            client.post(
                "/api/jobs",
                json={"algorithm": "sl", "dataset_id": chat, "config": config, "priority": p},
            ).json()["id"]
            for p in (0, 0, 5)
        )
        done = {j: wait_state(client, j, ("succeeded",)) for j in (first, low, high)}
        assert done[first]["started_at"] < done[high]["started_at"] < done[low]["started_at"]

        metrics = client.get(f"/api/jobs/{first}/metrics", params={"limit": 2}).json()
        assert metrics["count"] >= 4 and len(metrics["data"]) == 2 and metrics["next_offset"] == 2
        assert client.get(f"/api/jobs/{first}/logs").json()["lines"]
        checkpoints = client.get(f"/api/jobs/{first}/checkpoints").json()["data"]
        assert [c["step"] for c in checkpoints] == [2, 4]
        models = client.get("/api/models", params={"job_id": first}).json()
        assert sorted(m["step"] for m in models["data"]) == [2, 4]
        assert {m["sampler_path"] for m in models["data"]} == {
            c["sampler_path"] for c in checkpoints
        }


def test_one_job_per_gpu_at_a_time(tmp_path: Path, database_url: str | None) -> None:
    """With 2 GPUs scheduled, two jobs run at once, each on its own device, and the third
    waits for one to finish. (On a machine without CUDA the workers fall back to the CPU,
    but the scheduler's bookkeeping is the same.)"""
    settings = make_settings(tmp_path / "data", database_url, gpus=2)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
        config = {"max_steps": 10, "batch_size": 4, "save_every": 0, "eval_every": 0}
        ids = [
            client.post(
                "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": config}
            ).json()["id"]
            for _ in range(3)
        ]
        seen: list[list[dict[str, Any]]] = []
        while True:
            # One list call reads all three in one query: a consistent snapshot.
            listed = {j["id"]: j for j in client.get("/api/jobs").json()["data"]}
            jobs = [listed[j] for j in ids]
            seen.append(jobs)
            if all(j["state"] == "succeeded" for j in jobs):
                break
            assert not any(j["state"] == "failed" for j in jobs), jobs
            time.sleep(0.05)
        for snapshot in seen:
            devices = [j["device"] for j in snapshot if j["state"] in ("starting", "running")]
            assert len(devices) <= 2 and len(set(devices)) == len(devices)
            assert set(devices) <= {"cuda:0", "cuda:1"}
        assert {j["resource"] for j in seen[-1]} == {"gpu"}
        first, second, third = (seen[-1][i] for i in range(3))
        assert third["started_at"] >= min(first["finished_at"], second["finished_at"])
        for job_id in ids:  # each worker saw only the GPU it was given
            events = client.get(f"/api/jobs/{job_id}/events").json()["data"]
            (device,) = [
                e["data"]["device"] for e in events if e["data"].get("state") == "starting"
            ]
            log = (settings.runs_dir / job_id / "worker.log").read_text()
            assert f"(CUDA_VISIBLE_DEVICES={device.removeprefix('cuda:')})" in log


def test_an_rl_job_shows_its_rollouts(client: TestClient) -> None:
    problems = add_dataset(client, EXAMPLES / "rl" / "train.jsonl", "problems")
    config = {
        "max_steps": 2,
        "group_size": 4,
        "groups_per_batch": 2,
        "max_tokens": 4,
        "eval_every": 0,
        "save_every": 0,
        "eval_fraction": 0.0,
    }
    job = client.post(
        "/api/jobs", json={"algorithm": "rl", "dataset_id": problems, "config": config}
    ).json()
    wait_state(client, job["id"], ("succeeded",))
    latest = client.get(f"/api/jobs/{job['id']}/rollouts").json()
    assert latest["steps"] == [1, 2] and latest["step"] == 2
    assert len(latest["data"]) == 2  # one record per prompt of the step
    group = latest["data"][0]
    assert len(group["completions"]) == len(group["rewards"]) == len(group["advantages"]) == 4
    first = client.get(f"/api/jobs/{job['id']}/rollouts", params={"step": 1}).json()
    assert first["step"] == 1 and first["data"] != []
    assert client.get(f"/api/jobs/{job['id']}/rollouts", params={"step": 9}).status_code == 404
