"""The report a job ends with, through the REST API, with a real worker on the tiny model: a
job trained for a handful of steps says honestly that it did not learn, and a job that fails
on its data says that resuming will not help."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, platform_of, wait_state


def test_a_short_sl_job_reports_that_it_did_not_learn(client: TestClient) -> None:
    chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    config = {"max_steps": 5, "batch_size": 4, "eval_every": 0, "save_every": 0}
    job = client.post("/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": config})
    assert job.status_code == 201, job.text
    done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["reason"]

    report = done["report"]
    assert report["metric"]["name"] == "exact_match"
    assert report["metric"]["label"] == "held-out exact match"
    assert report["metric"]["higher_is_better"] is True
    held_out, base = report["held_out"], report["base"]
    assert held_out["num_samples"] == base["num_samples"] == 10  # 10% of 100 rows held out
    for figures in (held_out, base):
        for key in ("exact_match", "mean_nll", "empty_rate", "repeat_rate"):
            assert isinstance(figures[key], float), key
    assert report["metric"]["base"] == base["exact_match"]
    # Five steps of a from-scratch model answer nothing useful.
    assert report["verdict"] == "not_learned"
    codes = {w["code"] for w in report["warnings"]}
    assert codes & {"empty_answers", "no_better_than_base"}
    for warning in report["warnings"]:
        assert all(warning[k] for k in ("message", "cause", "fix"))
    assert 1 <= len(report["samples"]) <= 5
    assert set(report["samples"][0]) == {"prompt", "reference", "answer", "base_answer"}

    run_dir = platform_of(client).settings.runs_dir / done["id"]
    assert json.loads((run_dir / "report.json").read_text()) == report
    events = client.get(f"/api/jobs/{done['id']}/events").json()["data"]
    kinds = [e["type"] if e["type"] != "state" else e["data"]["state"] for e in events]
    assert kinds.index("report") < kinds.index("succeeded")


def test_a_job_that_fails_on_its_data_is_not_retryable(client: TestClient) -> None:
    broken = add_dataset(client, EXAMPLES / "broken" / "bad_json.jsonl", "chat")
    config = {"max_steps": 2, "batch_size": 1}
    job = client.post("/api/jobs", json={"algorithm": "sl", "dataset_id": broken, "config": config})
    assert job.status_code == 201, job.text
    done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "failed"
    assert done["retryable"] is False
    assert done["report"] is None
    events = client.get(f"/api/jobs/{done['id']}/events").json()["data"]
    (failed,) = [e["data"] for e in events if e["data"].get("state") == "failed"]
    assert failed["retryable"] is False
