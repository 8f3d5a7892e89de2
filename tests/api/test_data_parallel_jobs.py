"""A job of `gpus: 2` on a server without GPUs: two CPU processes (torchrun, gloo) train it
data-parallel. Its losses step for step are those of the same job in
one process (the batch is shared out, the gradients summed), rank 0 alone writes the run's
records (one metrics row a step, one final state), and what cannot run that way is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state

from thinker.runs import RunDir, read_metrics
from thinker.server.app import create_app

ARITHMETIC = EXAMPLES / "arithmetic" / "train.jsonl"
CONFIG = {"max_steps": 6, "batch_size": 6, "eval_every": 0, "save_every": 3, "seed": 5}


def _losses(run: RunDir) -> list[float]:
    rows = [r for r in read_metrics(run.metrics) if "train_mean_nll" in r]
    assert [r["step"] for r in rows] == list(range(1, CONFIG["max_steps"] + 1))  # once each
    return [r["train_mean_nll"] for r in rows]


@pytest.mark.parametrize("sharding", ["auto", "fsdp"])
def test_a_two_process_job_trains_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharding: str
) -> None:
    # SQLite only: the server's side is test_jobs.py's; what is new here is the workers'.
    # "auto" keeps the tiny model whole on each rank; "fsdp" shards its layers (FSDP2).
    monkeypatch.setenv("THINKER_SHARDING", sharding)
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        ids = {}
        for gpus in (2, 1):
            body = {"algorithm": "sl", "dataset_id": chat, "config": CONFIG, "gpus": gpus}
            created = client.post("/api/jobs", json=body)
            assert created.status_code == 201, created.text
            ids[gpus] = created.json()["id"]
        jobs = {g: wait_state(client, i, ("succeeded", "failed")) for g, i in ids.items()}
        assert jobs[2]["state"] == "succeeded", jobs[2]["log_tail"]
        assert jobs[2]["gpus"] == 2 and jobs[2]["placement"]["processes"] == 2
        events = client.get(f"/api/jobs/{ids[2]}/events", params={"limit": 10000}).json()
    runs = {g: RunDir(tmp_path / "data" / "runs" / i) for g, i in ids.items()}
    two, one = _losses(runs[2]), _losses(runs[1])
    assert two == pytest.approx(one, rel=1e-4)
    states = [e["data"]["state"] for e in events["data"] if e["type"] == "state"]
    assert states.count("running") == 1 and states[-1] == "succeeded"  # rank 0's alone
    log = runs[2].log.read_text()
    for rank in (0, 1):  # both ranks joined, and each engine trained its share
        assert f"rank {rank} of 2 joined" in log
        assert f"data-parallel: rank {rank} of 2 runs 1/2 of each batch's datums" in log
    assert ("sharded (FSDP2) over 2 ranks" in log) == (sharding == "fsdp")
    checkpoints = [c.step for c in runs[2].checkpoint_records()]
    assert checkpoints == [3, 6]  # written once each


def test_what_cannot_train_data_parallel_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        problems = add_dataset(client, EXAMPLES / "rl" / "train.jsonl", "problems")
        body = {"algorithm": "rlhf", "dataset_id": problems, "gpus": 2}
        refused = client.post("/api/jobs", json=body)
        assert refused.status_code == 422, refused.text
        assert "gpus: 2 trains a local sl, dpo or rl job data-parallel" in refused.text
        body = {
            "algorithm": "rl",
            "dataset_id": problems,
            "gpus": 2,
            "config": {"max_steps_off_policy": 1},
        }
        refused = client.post("/api/jobs", json=body)
        assert refused.status_code == 422, refused.text
        assert "asynchronous RL runs as one process" in refused.text
        chat = add_dataset(client, ARITHMETIC, "chat")
        body = {"algorithm": "sl", "dataset_id": chat, "gpus": 9}
        assert client.post("/api/jobs", json=body).status_code == 422  # 8 at most


@pytest.mark.parametrize("sharding", ["auto", "fsdp"])
def test_a_two_process_rl_job_shares_out_its_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharding: str
) -> None:
    """An RL job of gpus: 2: each rank samples half of a step's groups and gets the others'
    (data_parallel.SampleSharing), so every step's rollouts hold every group, written once.
    Sharded ("fsdp": each rank holds half of each layer), the ranks sample in lockstep."""
    monkeypatch.setenv("THINKER_SHARDING", sharding)
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    config = {"max_steps": 3, "groups_per_batch": 4, "group_size": 2, "max_tokens": 8}
    with TestClient(create_app(settings)) as client:
        problems = add_dataset(client, EXAMPLES / "rl" / "train.jsonl", "problems")
        body = {"algorithm": "rl", "dataset_id": problems, "config": config, "gpus": 2}
        created = client.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        done = wait_state(client, created.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["log_tail"]
    run = RunDir(tmp_path / "data" / "runs" / done["id"])
    rows = [r for r in read_metrics(run.metrics) if "reward_mean" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for step in (1, 2, 3):
        groups = run.rollout_file(step).read_text().splitlines()
        assert len(groups) == 4  # every group, though each rank sampled two
    log = run.log.read_text()
    assert "data-parallel: rank 1 of 2" in log
    assert ("sharded (FSDP2) over 2 ranks" in log) == (sharding == "fsdp")


def test_a_sharded_dpo_job_trains_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DPO on a model sharded over two ranks: the reference's scores (the base, the adapter
    off) are shared out and computed in lockstep; the losses are those of one process."""
    monkeypatch.setenv("THINKER_SHARDING", "fsdp")
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    config = {"max_steps": 3, "batch_size": 4, "eval_every": 0, "save_every": 0, "seed": 5}
    with TestClient(create_app(settings)) as client:
        pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
        ids = {}
        for gpus in (2, 1):
            body = {"algorithm": "dpo", "dataset_id": pairs, "config": config, "gpus": gpus}
            created = client.post("/api/jobs", json=body)
            assert created.status_code == 201, created.text
            ids[gpus] = created.json()["id"]
        jobs = {g: wait_state(client, i, ("succeeded", "failed")) for g, i in ids.items()}
    for gpus in (2, 1):
        assert jobs[gpus]["state"] == "succeeded", jobs[gpus]["log_tail"]
    runs = {g: RunDir(tmp_path / "data" / "runs" / i) for g, i in ids.items()}
    losses = {
        g: [r["dpo_loss"] for r in read_metrics(run.metrics) if "dpo_loss" in r]
        for g, run in runs.items()
    }
    assert len(losses[2]) == 3
    assert losses[2] == pytest.approx(losses[1], rel=1e-4)
    assert "sharded (FSDP2) over 2 ranks" in runs[2].log.read_text()
