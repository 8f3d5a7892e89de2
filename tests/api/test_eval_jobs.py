"""An eval job through the REST API: a short SL job on the shipped arithmetic set makes a model;
an eval job compares it with its base model on the held-out set. The trained model wins with
p < 0.05; the job's results are served (each model's figures, the comparison, a page of the
prompts sorted and filtered, a JSONL download), the leaderboard of that eval set ranks the
trained model first by its library id, and the eval job trains nothing. What an eval job
cannot take is refused with where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state
from tests.support.judge_server import judge_server

from thinker.algorithms import significance
from thinker.runs import RunDir
from thinker.server.app import create_app

TRAIN = EXAMPLES / "arithmetic" / "train.jsonl"
TEST = EXAMPLES / "arithmetic" / "test.jsonl"


def test_an_eval_job_finds_the_trained_model_better_than_its_base(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        train, test = add_dataset(client, TRAIN, "chat"), add_dataset(client, TEST, "chat")
        sl = client.post(
            "/api/jobs", json={"algorithm": "sl", "dataset_id": train, "config": {"max_steps": 100}}
        )
        assert sl.status_code == 201, sl.text
        assert wait_state(client, sl.json()["id"], ("succeeded", "failed"))["state"] == "succeeded"
        models = client.get("/api/models", params={"job_id": sl.json()["id"]}).json()["data"]
        trained = max(models, key=lambda m: m["step"])
        not_a_judge = {"type": "reward_model", "reward_model": trained["id"]}
        refused = client.post(
            "/api/jobs",
            json={"algorithm": "eval", "dataset_id": test, "config": {"scorer": not_a_judge}},
        )
        assert refused.status_code == 422 and "is not a reward model" in refused.text
        body = {
            "algorithm": "eval",
            "dataset_id": test,
            "config": {"models": [trained["id"]], "resamples": 2000},
        }
        created = client.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        job = wait_state(client, created.json()["id"], ("succeeded", "failed"))
        assert job["state"] == "succeeded", job["log_tail"]
        url = f"/api/jobs/{job['id']}/evaluation"
        result = client.get(url).json()
        worst = client.get(url, params={"order": "score", "limit": 5}).json()
        apart = client.get(url, params={"order": "-spread", "disagree": True, "limit": 3}).json()
        of_base = client.get(url, params={"order": "-score", "model": "thinker/tiny"}).json()
        unknown = client.get(url, params={"order": "score", "model": "nobody"})
        download = client.get(f"{url}/download")
        board = client.get("/api/models/leaderboard", params={"dataset_id": test}).json()
        library = client.get("/api/models").json()["data"]
    summary = result["summary"]
    assert job["total_steps"] == job["step"] == 2  # one step a model
    base, tuned = summary["models"]
    assert (base["name"], base["id"]) == ("thinker/tiny", None)
    assert (tuned["name"], tuned["id"]) == (trained["name"], trained["id"])
    assert tuned["score_mean"] > base["score_mean"] and tuned["nll_mean"] < base["nll_mean"]
    (comparison,) = summary["comparisons"]
    print(comparison["verdict"])
    assert comparison["a"] == "thinker/tiny" and comparison["b"] == trained["name"]
    assert comparison["wins"] + comparison["ties"] + comparison["losses"] == 100
    assert comparison["significant"] and comparison["p_value"] < 0.05
    assert comparison["verdict"].startswith(f"{trained['name']} is better: ")
    low, high = comparison["interval"]
    assert 0.5 < low <= comparison["win_rate"] <= high
    assert result["total"] == 100 and len(result["data"]) == 100
    scores = [r["answers"][1]["score"] for r in worst["data"]]
    assert scores == sorted(scores) and scores[0] == min(
        r["answers"][1]["score"] for r in result["data"]
    )
    assert apart["total"] == sum(r["disagree"] for r in result["data"]) > 0
    spreads = [abs(r["answers"][1]["score"] - r["answers"][0]["score"]) for r in apart["data"]]
    assert spreads == sorted(spreads, reverse=True)
    assert of_base["data"][0]["answers"][0]["score"] == max(
        r["answers"][0]["score"] for r in result["data"]
    )
    assert unknown.status_code == 404 and "nobody" in unknown.text
    rows = [json.loads(line) for line in download.text.splitlines()]
    assert [r["index"] for r in rows] == list(range(100))
    assert board["jobs"] == [job["id"]] and board["scorer"] == "exact_match"
    assert [r["id"] for r in board["leaderboard"]] == [trained["id"], None]
    assert board["leaderboard"][0]["rating"] > board["leaderboard"][1]["rating"]
    assert not RunDir(settings.runs_dir / job["id"]).report.exists()  # nothing trained
    assert not [m for m in library if m["job_id"] == job["id"]]


def test_what_an_eval_job_cannot_take_is_refused_with_where(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        test = add_dataset(client, TEST, "chat")
        pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
        cases = [
            ({"dataset_id": pairs}, "holds preferences rows; eval answers chat or"),
            ({"dataset_id": test, "config": {"models": ["mdl_nothere"]}}, "config.models[0]: no"),
            ({"dataset_id": test, "config": {"models": ["thinker/tiny"]}}, "named twice"),
            ({"dataset_id": test, "config": {"scorer": {"type": "judge"}}}, "config.scorer.type"),
            ({"dataset_id": test, "config": {"samples": 0}}, "config.samples"),
            (
                {"dataset_id": test, "config": {"scorer": {"type": "reward_model"}}},
                "needs `reward_model`",
            ),
            (
                {
                    "dataset_id": test,
                    "config": {"scorer": {"type": "reward_model", "reward_model": "mdl_nothere"}},
                },
                "config.scorer.reward_model: no model",
            ),
            ({"dataset_id": test, "base_model": "mdl_gone"}, "base_model: no model"),
            ({"dataset_id": test, "gpus": 2}, "gpus"),
        ]
        for extra, expected in cases:
            response = client.post("/api/jobs", json={"algorithm": "eval", **extra})
            assert response.status_code == 422, (extra, response.text)
            assert expected in response.text, (extra, response.text)
        response = client.get("/api/models/leaderboard", params={"dataset_id": test})
        assert response.status_code == 404 and "no finished eval job" in response.text


def test_a_person_s_ab_choices_get_the_same_statistics(tmp_path: Path) -> None:
    """POST /api/evaluations/compare: the playground's blind A/B choices, de-randomised into
    B's outcomes, give the verdict an eval job gives (significance.compare), and the count of
    decided prompts an A/B needs at the win rate seen."""
    settings = make_settings(tmp_path / "data", None)
    outcomes = [1] * 14 + [0] * 3 + [-1] * 3
    with TestClient(create_app(settings)) as client:
        body = {"a": "before", "b": "after", "outcomes": outcomes, "resamples": 1000}
        result = client.post("/api/evaluations/compare", json=body).json()
        refused = client.post("/api/evaluations/compare", json={"outcomes": [2]})
    # 14 wins and 3 losses: 2 * sum_{k<=3} C(17, k) / 2^17
    assert result["p_value"] == pytest.approx(2 * (1 + 17 + 136 + 680) / 2**17)
    assert (result["wins"], result["ties"], result["losses"]) == (14, 3, 3)
    assert result["verdict"].startswith("after is better: 78% win rate [")
    assert result["needed"] == significance.required_samples(14.5 / 18)
    assert refused.status_code == 422


def test_an_eval_job_asks_an_external_judge_with_the_stored_key(tmp_path: Path) -> None:
    """The judge key is stored with its endpoint (never returned); a job whose judge is that
    endpoint gets it in its worker and the scripted OpenAI-compatible judge sees it on every
    request, a job whose judge is another endpoint gets none; the key is in no run file."""
    settings = make_settings(tmp_path / "data", None, max_cpu_jobs=1)
    client = TestClient(create_app(settings))
    with client, judge_server() as (url, seen), judge_server() as (elsewhere, seen_elsewhere):
        stored = client.put(
            "/api/settings/judge-key", json={"api_key": "sk-judge-123", "url": url + "/"}
        )
        assert stored.status_code == 200, stored.text
        shown = client.get("/api/settings").json()
        assert shown["judge_api_key_set"] is True and shown["judge_url"] == url + "/"
        assert "sk-judge-123" not in json.dumps(shown) + stored.text
        test = add_dataset(client, TEST, "chat")
        jobs = []
        for endpoint in (url, elsewhere):
            scorer = {"type": "llm_judge", "judge_url": endpoint, "judge_model": "grader"}
            config = {"scorer": scorer, "max_examples": 3, "max_tokens": 4, "resamples": 200}
            body = {"algorithm": "eval", "dataset_id": test, "config": config}
            created = client.post("/api/jobs", json=body)
            assert created.status_code == 201, created.text
            job = wait_state(client, created.json()["id"], ("succeeded", "failed"))
            assert job["state"] == "succeeded", job["log_tail"]
            jobs.append(job)
        result = client.get(f"/api/jobs/{jobs[0]['id']}/evaluation").json()
        summary = result["summary"]
        for row in result["data"]:  # each grade with the reply it was read from
            (answer,) = row["answers"]
            (reply,) = answer["judge_replies"]
            assert reply in ("10", "Grade: 3")
            assert answer["scores"] == [1.0 if reply == "10" else 2 / 9]
        assert client.delete("/api/settings/judge-key").json()["judge_api_key_set"] is False
    assert seen == ["Bearer sk-judge-123"] * 3
    assert seen_elsewhere == [None] * 3  # another endpoint: the key stays home
    assert summary["scorer"] == "llm_judge" and summary["models"][0]["prompts"] == 3
    runs = tmp_path / "data" / "runs"
    files = [p for job in jobs for p in (runs / job["id"]).rglob("*") if p.is_file()]
    assert files and not any("sk-judge-123" in p.read_text(errors="ignore") for p in files)
