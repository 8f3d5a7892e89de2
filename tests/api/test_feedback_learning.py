"""Feedback that trains now, through the REST API: a model that hedges about half of its one-digit
sums ("Not sure. Perhaps 8.") answers 20 training prompts; a scripted person prefers the right
answer to each wrong or hedged one (the playground's A/B choice, saved as a preferences
dataset, as the dashboard uploads it); "learn from this" (POST /api/models/{id}/learn) runs a
short DPO update from the model's own state; the new checkpoint beats the old one on the other
80 sums (60 training sums never given feedback, 20 sums in no training file) with p < 0.05 in
an eval job, and its lineage names its parent and the feedback's dataset version."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient
from tests.support.api import add_dataset, make_settings, wait_state
from tests.support.feedback import RL, WARM_START, jsonl, sums

from thinker.server.app import create_app


def test_learning_from_20_preferences_makes_a_model_that_wins_the_ab(tmp_path: Path) -> None:
    asked, held_out = sums()
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        warm = add_dataset(client, RL / "warmup_hedged.jsonl", "chat")
        sl = client.post(
            "/api/jobs", json={"algorithm": "sl", "dataset_id": warm, "config": WARM_START}
        )
        assert sl.status_code == 201, sl.text
        assert wait_state(client, sl.json()["id"], ("succeeded", "failed"))["state"] == "succeeded"
        models = client.get("/api/models", params={"job_id": sl.json()["id"]}).json()["data"]
        model = max(models, key=lambda m: m["step"])

        # The person's feedback: the model's answer to each of 20 prompts, and for each wrong
        # one the right answer preferred to it.
        pairs = []
        for problem in asked:
            request = {
                "model": model["id"],
                "messages": [{"role": "user", "content": problem["prompt"]}],
                "max_tokens": 32,
                "temperature": 0.0,
            }
            sampled = client.post("/api/sample", json=request)
            assert sampled.status_code == 200, sampled.text
            answer = sampled.json()["samples"][0]["text"].strip()
            if answer != problem["answer"]:
                pairs.append(
                    {"prompt": problem["prompt"], "chosen": problem["answer"], "rejected": answer}
                )
        hedged = sum(p["rejected"].startswith("Not sure") for p in pairs)
        print(f"{len(pairs)} of 20 answers wrong ({hedged} hedged)")
        assert hedged >= 5  # the warm start hedges: there is something to learn
        upload = client.post(
            "/api/datasets",
            files={"file": ("feedback.jsonl", jsonl(pairs).encode(), "application/x-ndjson")},
            data={"name": "feedback", "kind": "preferences"},
        )
        assert upload.status_code == 201, upload.text
        feedback = upload.json()["id"]

        began = time.monotonic()
        learn = client.post(f"/api/models/{model['id']}/learn", json={"dataset_id": feedback})
        assert learn.status_code == 201, learn.text
        job = wait_state(client, learn.json()["id"], ("succeeded", "failed"))
        assert job["state"] == "succeeded", job["log_tail"]
        print(f"model n+1 ready {time.monotonic() - began:.1f} s after 'learn from this'")
        (new,) = client.get("/api/models", params={"job_id": job["id"]}).json()["data"]
        detail = client.get(f"/api/models/{new['id']}").json()

        held = tmp_path / "held_out.jsonl"
        held.write_text(jsonl(held_out))
        body = {
            "algorithm": "eval",
            "base_model": model["id"],
            "dataset_id": add_dataset(client, held, "problems"),
            "config": {"models": [new["id"]], "resamples": 2000},
        }
        created = client.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        evaluated = wait_state(client, created.json()["id"], ("succeeded", "failed"))
        assert evaluated["state"] == "succeeded", evaluated["log_tail"]
        summary = client.get(f"/api/jobs/{evaluated['id']}/evaluation").json()["summary"]
        wrong_kind = client.post(
            f"/api/models/{model['id']}/learn", json={"dataset_id": body["dataset_id"]}
        )
    assert job["algorithm"] == "dpo" and job["priority"] == 10
    assert job["parent_model_id"] == model["id"] and job["dataset_id"] == feedback
    assert detail["lineage"]["parent_model"]["id"] == model["id"]
    assert detail["lineage"]["dataset"]["id"] == feedback
    assert wrong_kind.status_code == 422 and "holds problems rows" in wrong_kind.text
    old, learned = summary["models"]
    print(f"held-out exact match: {old['score_mean']:.3f} -> {learned['score_mean']:.3f}")
    (comparison,) = summary["comparisons"]
    print(comparison["verdict"])
    assert comparison["b"] == new["name"] and comparison["n"] == 80
    assert comparison["significant"] and comparison["p_value"] < 0.05
    assert comparison["win_rate"] > 0.5


def test_learning_needs_a_model_of_the_library(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        problems = add_dataset(client, RL / "test.jsonl", "problems")
        missing = client.post("/api/models/mdl_nothere/learn", json={"dataset_id": problems})
    assert missing.status_code == 404 and "mdl_nothere" in missing.text
