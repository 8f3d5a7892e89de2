"""A batch job through the REST API: the tiny model answers the shipped code-review examples
over a pool of one actor process (tests/integration/test_batch.py has two, one killed); the
job succeeds with its figures as metrics, trains no model and writes no report; its results
are read a page at a time (flagged or not, by confidence), with the counts and the pool's
actors, and downloaded as JSONL. What a batch job cannot take is refused with where."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state

from thinker.runs import RunDir, read_metrics
from thinker.server.app import create_app

REVIEWS = EXAMPLES / "code_review" / "test.jsonl"
CONFIG = {
    "task": "review",
    "samples": 3,
    "max_tokens": 16,
    "workers": 1,
    "shard_size": 3,
    "confidence_threshold": 0.7,
}


def test_a_batch_job_answers_every_row_and_serves_its_results(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, REVIEWS, "chat")
        body = {"algorithm": "batch", "dataset_id": chat, "config": CONFIG}
        created = client.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        job = wait_state(client, created.json()["id"], ("succeeded", "failed"))
        assert job["state"] == "succeeded", job["log_tail"]
        assert job["total_steps"] == 3 and job["step"] == 3  # 8 rows in shards of 3
        results = client.get(f"/api/jobs/{job['id']}/results").json()
        by_confidence = client.get(
            f"/api/jobs/{job['id']}/results", params={"order": "-confidence", "limit": 2}
        ).json()
        flagged = client.get(f"/api/jobs/{job['id']}/results", params={"flagged": True}).json()
        download = client.get(f"/api/jobs/{job['id']}/results/download")
        models = client.get("/api/models").json()["data"]
    assert results["total"] == 8 and [r["index"] for r in results["data"]] == list(range(8))
    assert results["counts"]["answered"] == 8 and results["counts"]["failed"] == 0
    assert all(
        r["samples"] == 3 and r["flagged"] == (r["confidence"] < 0.7) for r in results["data"]
    )
    assert results["counts"]["flagged"] == flagged["total"] == len(flagged["data"])
    assert all(r["flagged"] for r in flagged["data"])
    confidences = [r["confidence"] for r in by_confidence["data"]]
    assert len(confidences) == 2 and confidences[0] == max(r["confidence"] for r in results["data"])
    assert [(a["state"], a["shards_done"]) for a in results["actors"]] == [("stopped", 3)]
    assert download.status_code == 200
    rows = [json.loads(line) for line in download.text.splitlines()]
    assert sorted(r["index"] for r in rows) == list(range(8))
    run = RunDir(settings.runs_dir / job["id"])
    last = [r for r in read_metrics(run.metrics) if "inputs_done" in r][-1]
    assert last["inputs_done"] == 8 and last["flagged"] == results["counts"]["flagged"]
    assert not run.report.exists()  # nothing was trained, so nothing is judged
    assert not [m for m in models if m["job_id"] == job["id"]]


def test_what_a_batch_job_cannot_take_is_refused_with_where(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, REVIEWS, "chat")
        pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
        cases = [
            ({"dataset_id": pairs}, "holds preferences rows; batch answers chat or"),
            ({"dataset_id": chat, "config": {"samples": 0}}, "config.samples"),
            ({"dataset_id": chat, "config": {"learning_rate": 1e-4}}, "config.learning_rate"),
            ({"dataset_id": chat, "backend": "tinker"}, "backend"),
        ]
        for extra, expected in cases:
            response = client.post("/api/jobs", json={"algorithm": "batch", **extra})
            assert response.status_code == 422, (extra, response.text)
            assert expected in response.text, (extra, response.text)
        sl = client.post(
            "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": {"max_steps": 1}}
        )
        results = client.get(f"/api/jobs/{sl.json()['id']}/results")
        assert results.status_code == 404 and "only batch jobs have results" in results.text
