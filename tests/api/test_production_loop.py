"""Learning from production, through the REST API and /v1: a deployment serves a model that
hedges about half of its one-digit sums; it logs its traffic (opt-in, e-mail addresses
redacted); an application sends thumbs up, or down with the right answer, on 20 answers;
when the one-minute schedule comes round (the loop's clock moved a minute on, not waited for)
the feedback becomes a dataset version, a learn job trains a candidate, and the promotion gate
(an eval job on 80 held-out sums) finds it better and serves it. A deliberately worse model
(the same warm start after 25 of its 250 steps) is refused by the same gate, and the served
model stays. Logged lines past the retention are deleted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, platform_of
from tests.support.feedback import RL, WARM_START, jsonl, sums

from thinker.server.app import create_app
from thinker.services import deployments as service


def _wait(client: TestClient, name: str, event: str, seen: int, timeout: float = 600) -> dict:
    """The deployment once its history has an `event` after its first `seen` entries.
    `timeout` bounds a hang, not a speed."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        deployment = client.get(f"/api/deployments/{name}").json()
        events = [h["event"] for h in deployment["history"][seen:]]
        if event in events or "failed" in events:
            return deployment
        time.sleep(0.2)
    raise TimeoutError(f"{name}: {deployment['history']}")


def _job_state(client: TestClient, job_id: str) -> str:
    deadline = time.time() + 600
    while (state := client.get(f"/api/jobs/{job_id}").json()["state"]) not in (
        "succeeded",
        "failed",
    ):
        assert time.time() < deadline
        time.sleep(0.1)
    return state


def test_the_production_loop_promotes_a_better_model_and_refuses_a_worse(tmp_path: Path) -> None:
    asked, held_out = sums()
    held = tmp_path / "held_out.jsonl"
    held.write_text(jsonl(held_out))
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1, deployment_poll_s=0.2)
    now = [time.time()]
    with TestClient(create_app(settings)) as client:
        loop = platform_of(client).deployments
        loop.clock = lambda: now[0]
        warm = add_dataset(client, RL / "warmup_hedged.jsonl", "chat")
        sl = client.post(
            "/api/jobs",
            json={
                "algorithm": "sl",
                "dataset_id": warm,
                "config": {**WARM_START, "save_every": 25},
            },
        )
        assert sl.status_code == 201, sl.text
        assert _job_state(client, sl.json()["id"]) == "succeeded"
        models = client.get("/api/models", params={"job_id": sl.json()["id"]}).json()["data"]
        served = max(models, key=lambda m: m["step"])
        worse = min(models, key=lambda m: m["step"])
        body: dict[str, Any] = {
            "name": "assistant",
            "model_id": served["id"],
            "log_traffic": True,
            "redact": "pii",
            "retention_days": 7,
            "schedule": "* * * * *",
            "min_feedback": 10,
            "eval_dataset_id": add_dataset(client, held, "problems"),
        }
        created = client.post("/api/deployments", json=body)
        assert created.status_code == 201, created.text

        # Traffic through /v1 under the deployment's name, and an application's feedback.
        for problem in asked:
            request = {
                "model": "assistant",
                "messages": [{"role": "user", "content": problem["prompt"]}],
                "max_tokens": 32,
                "temperature": 0,
            }
            completion = client.post("/v1/chat/completions", json=request).json()
            answer = completion["choices"][0]["message"]["content"].strip()
            feedback = {"completion_id": completion["id"], "rating": "up"}
            if answer != problem["answer"]:
                feedback = {**feedback, "rating": "down", "correction": problem["answer"]}
            sent = client.post("/api/deployments/assistant/feedback", json=feedback)
            assert sent.status_code == 201, sent.text
        private = {"role": "user", "content": "mail me at ann@example.com: 2+2"}
        client.post("/v1/chat/completions", json={"model": "assistant", "messages": [private]})
        unknown = client.post(
            "/api/deployments/assistant/feedback",
            json={"completion_id": "chatcmpl-none", "rating": "up"},
        )
        before = client.get("/api/deployments/assistant").json()
        logged = client.get("/api/deployments/assistant/traffic", params={"limit": 2}).json()

        now[0] += 61  # the schedule's next minute
        promoted = _wait(client, "assistant", "promoted", 0)
        cycle = [h for h in promoted["history"] if h["event"] in ("learning", "promoted")]
        feedback_set = client.get(f"/api/datasets/{promoted['feedback_dataset_id']}").json()
        candidate = client.get(f"/api/models/{promoted['model_id']}").json()
        client.post(
            "/v1/chat/completions",
            json={"model": "assistant", "messages": [{"role": "user", "content": "1+2"}]},
        )

        seen = len(promoted["history"])
        gate = client.post("/api/deployments/assistant/promote", json={"model_id": worse["id"]})
        assert gate.status_code == 200, gate.text
        refused = _wait(client, "assistant", "refused", seen)

        traffic = (loop.directory("assistant") / service.TRAFFIC).read_text().splitlines()
        now[0] += 8 * 86_400  # past the 7 days' retention
        deadline = time.time() + 60
        while client.get("/api/deployments/assistant").json()["traffic"] and time.time() < deadline:
            time.sleep(0.2)
        purged = client.get("/api/deployments/assistant").json()

    wrong = sum(1 for line in traffic[:20] if "Not sure" in line)
    print(f"{before['feedback']} feedback lines on 20 answers ({wrong} hedged)")
    assert before["traffic"] == 21 and before["feedback"] == 20 == before["feedback_new"]
    assert unknown.status_code == 404 and "chatcmpl-none" in unknown.text
    # The listing: newest first, redacted, each with its feedback (the private one has none).
    assert logged["total"] == 21 and len(logged["data"]) == 2
    newest, second = logged["data"]
    assert "[email]" in newest["messages"][0]["content"] and newest["rating"] is None
    first_rated = json.loads(traffic[19])
    assert second["id"] == first_rated["id"] and second["rating"] in ("up", "down")
    assert (second["correction"] is not None) == (second["rating"] == "down")
    assert "ann@example.com" not in "".join(traffic) and "[email]" in traffic[20]
    # the cycle: corrections became preference pairs, a dataset version, a DPO job from served
    print(cycle)
    assert feedback_set["kind"] == "preferences" and feedback_set["num_rows"] >= 10
    assert candidate["lineage"]["parent_model"]["id"] == served["id"]
    assert candidate["lineage"]["dataset"]["id"] == feedback_set["id"]
    verdict = cycle[-1]["detail"]
    print("promoted:", verdict)
    assert cycle[-1]["candidate"] == candidate["id"] == promoted["model_id"]
    assert verdict.startswith(f"{candidate['name']} is better")
    assert promoted["feedback_new"] == 0
    assert json.loads(traffic[-1])["model_id"] == candidate["id"]  # now served under the name
    last = refused["history"][-1]
    print("refused:", last["detail"])
    assert last["event"] == "refused" and last["candidate"] == worse["id"]
    assert refused["model_id"] == candidate["id"]  # the served model stayed
    assert purged["traffic"] == 0 and purged["feedback"] == 0


def test_a_deployment_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None)
    with TestClient(create_app(settings)) as client:
        pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
        cases = [
            ({"model_id": "mdl_nothere"}, "model_id: no model"),
            ({"schedule": "every minute"}, "not a cron expression"),
            ({"redact": "no_such_module:f"}, "redact: cannot import"),
            ({"eval_dataset_id": pairs}, "holds preferences rows"),
            ({"name": "has space"}, "name"),
        ]
        for extra, expected in cases:
            body = {"name": "assistant", "model_id": "mdl_nothere", **extra}
            if "model_id" not in extra:
                body["model_id"] = "mdl_nothere"
            response = client.post("/api/deployments", json=body)
            assert response.status_code == 422, (extra, response.text)
            assert expected in response.text, (extra, response.text)
        assert client.get("/api/deployments/nobody").status_code == 404
