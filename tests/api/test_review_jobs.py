"""A reward model that asks, through the REST API: an `rm` job trains a reward model on the
shipped preference pairs, saving three checkpoints; a `review` job has the three score held-out
pairs and queues the least certain; a person's answers (scripted) come back with the dataset's
label and the model's probabilities, become a new version of the dataset (a pair judged the
other way swapped, a tie dropped), and an `rm` job retrains the reviewed model on it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state

from thinker.algorithms.review import binary_entropy
from thinker.server.app import create_app

TRAIN = EXAMPLES / "preferences" / "train.jsonl"
TEST = EXAMPLES / "preferences" / "test.jsonl"
RM = {"max_steps": 6, "save_every": 2, "eval_every": 0, "batch_size": 8, "learning_rate": 1e-3}
QUEUE = 6


def _upload(client: TestClient, path: Path) -> str:
    """A dataset stored as an upload stores it (the new version is made from its file)."""
    with path.open("rb") as f:
        response = client.post(
            "/api/datasets", files={"file": (path.name, f)}, data={"kind": "preferences"}
        )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _done(client: TestClient, body: dict[str, object]) -> dict[str, object]:
    created = client.post("/api/jobs", json=body)
    assert created.status_code == 201, created.text
    job = wait_state(client, created.json()["id"], ("succeeded", "failed"))
    assert job["state"] == "succeeded", job["log_tail"]
    return job


def test_a_review_queues_the_least_certain_pairs_and_the_answers_retrain(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        train, test = add_dataset(client, TRAIN, "preferences"), _upload(client, TEST)
        rm = _done(client, {"algorithm": "rm", "dataset_id": train, "config": RM})
        models = client.get("/api/models", params={"job_id": rm["id"]}).json()["data"]
        assert sorted(m["step"] for m in models) == [2, 4, 6]
        assert {m["stage"] for m in models} == {"rm"}
        reviewed = max(models, key=lambda m: m["step"])

        config = {"committee": 3, "queue_size": QUEUE, "max_pairs": 24}
        body = {"algorithm": "review", "base_model": reviewed["id"], "dataset_id": test}
        review = _done(client, {**body, "config": config})
        assert review["parent_model_id"] == reviewed["id"]
        assert len(review["config"]["reward_models"]) == 3  # the checkpoints at steps 2, 4, 6
        url = f"/api/jobs/{review['id']}/review"
        page = client.get(url).json()
        summary, queue = page["summary"], page["data"]
        assert summary["pairs"] == 24 and summary["committee"] == 3
        assert sum(b["pairs"] for b in summary["calibration"]["bins"]) == 24
        assert len(queue) == QUEUE and page["answered"] == 0
        certainties = [item["uncertainty"] for item in queue]
        assert certainties == sorted(certainties, reverse=True)
        assert all(item["label"] is None and item["p_a"] is None for item in queue)  # blind

        # The first three: agree with the dataset, disagree, call it a tie.
        nothing = client.post(f"{url}/dataset", json={})
        assert nothing.status_code == 409, nothing.text  # nothing answered
        shown = [client.put(f"{url}/{item['pair']}", json={"choice": "a"}).json() for item in queue]
        for item in shown:  # answered: the label and the probabilities are given
            p = statistics.fmean(item["p_a"])
            assert item["p_mean"] == pytest.approx(p)
            assert item["uncertainty"] == pytest.approx(binary_entropy(p))
            assert item["disagreement"] == pytest.approx(statistics.pstdev(item["p_a"]))
        agree, disagree, tie = shown[:3]
        other = {"a": "b", "b": "a"}
        for item, choice in ((agree, agree["label"]), (disagree, other[disagree["label"]])):
            assert client.put(f"{url}/{item['pair']}", json={"choice": choice}).status_code == 200
        assert client.put(f"{url}/{tie['pair']}", json={"choice": "tie"}).status_code == 200
        for item in shown[3:]:  # the other three: as the dataset says
            client.put(f"{url}/{item['pair']}", json={"choice": item["label"]})
        assert client.get(url).json()["answered"] == QUEUE
        assert client.put(f"{url}/99", json={"choice": "a"}).status_code == 404  # not queued
        rm_url = f"/api/jobs/{rm['id']}/review"
        assert client.get(rm_url).status_code == 404  # not a review job

        version = client.post(f"{url}/dataset", json={"name": "prefs reviewed"})
        assert version.status_code == 201, version.text
        made = version.json()
        assert made["parent_id"] == test and made["num_rows"] == 99  # the tie dropped
        rows = [
            json.loads(line)
            for line in client.get(f"/api/datasets/{made['id']}/download").text.splitlines()
        ]
        original = [json.loads(line) for line in TEST.read_text().splitlines()]
        swapped = original[disagree["line"] - 1]
        assert {"chosen": swapped["rejected"], "rejected": swapped["chosen"]}.items() <= rows[
            disagree["line"] - 1 - (tie["line"] < disagree["line"])
        ].items()

        retrained = _done(
            client,
            {
                "algorithm": "rm",
                "base_model": reviewed["id"],
                "dataset_id": made["id"],
                "config": {**RM, "max_steps": 2},
            },
        )
        assert retrained["parent_model_id"] == reviewed["id"]
        again = client.get("/api/models", params={"job_id": retrained["id"]}).json()["data"]
        assert {m["stage"] for m in again} == {"rm"}
