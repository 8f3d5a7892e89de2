"""Dataset versions and lineage: a stored dataset never changes; editing, re-mapping or
uploading with a parent makes the next version; a dataset lists the jobs and models that
used it and its other versions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.api import platform_of, wait_state

from thinker.settings import Settings

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

CHAT = [
    {
        "messages": [
            {"role": "user", "content": f"{i}+1"},
            {"role": "assistant", "content": str(i + 1)},
        ]
    }
    for i in range(4)
]


def _upload(client: TestClient, rows: list[dict[str, Any]], **form: str) -> Any:
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    response = client.post(
        "/api/datasets", files={"file": ("rows.jsonl", text)}, data={"kind": "chat", **form}
    )
    assert response.status_code == 201, response.text
    return response.json()


def _rows(client: TestClient, dataset_id: str) -> list[dict[str, Any]]:
    text = client.get(f"/api/datasets/{dataset_id}/download").text
    return [json.loads(line) for line in text.splitlines()]


def test_edits_make_new_versions_and_leave_the_parent_alone(
    client: TestClient, settings: Settings
) -> None:
    v1 = _upload(client, CHAT, name="sums")
    before = (settings.datasets_dir / f"{v1['id']}.jsonl").read_bytes()
    fixed = {
        "messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]
    }
    extra = {
        "messages": [{"role": "user", "content": "9+1"}, {"role": "assistant", "content": "10"}]
    }
    response = client.post(
        f"/api/datasets/{v1['id']}/versions",
        json={"delete": [4], "replace": {"2": fixed}, "append": [extra]},
    )
    assert response.status_code == 201, response.text
    v2 = response.json()
    assert (v2["version"], v2["root_id"], v2["parent_id"]) == (2, v1["id"], v1["id"])
    assert (v2["name"], v2["kind"], v2["num_rows"]) == ("sums", "chat", 4)
    assert _rows(client, v2["id"]) == [CHAT[0], fixed, CHAT[2], extra]
    assert (settings.datasets_dir / f"{v1['id']}.jsonl").read_bytes() == before
    assert _rows(client, v1["id"]) == CHAT

    v3 = _upload(client, CHAT[:2], parent_id=v2["id"], name="sums-small")
    assert (v3["version"], v3["root_id"], v3["parent_id"]) == (3, v1["id"], v2["id"])
    detail = client.get(f"/api/datasets/{v2['id']}").json()
    assert [(v["id"], v["version"]) for v in detail["versions"]] == [
        (v1["id"], 1),
        (v2["id"], 2),
        (v3["id"], 3),
    ]


def test_a_remapped_version_records_its_mapping(client: TestClient) -> None:
    rows = [{"prompt": f"{i}+1", "completion": str(i + 1)} for i in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in rows).encode()
    v1 = client.post(
        "/api/datasets", files={"file": ("qa.jsonl", text)}, data={"kind": "prompt_completion"}
    ).json()
    # The same rows as RL problems: the completion becomes the reference answer.
    response = client.post(
        f"/api/datasets/{v1['id']}/versions",
        json={"kind": "problems", "mapping": {"answer": "completion"}},
    )
    assert response.status_code == 201, response.text
    v2 = response.json()
    assert (v2["kind"], v2["mapping"], v2["version"]) == ("problems", {"answer": "completion"}, 2)
    assert _rows(client, v2["id"])[0]["answer"] == "1"


def test_bad_edits_are_refused_and_store_nothing(client: TestClient, settings: Settings) -> None:
    v1 = _upload(client, CHAT)
    stored = sorted(p.name for p in settings.datasets_dir.iterdir())
    cases = [
        ({}, 409, "no change"),
        ({"delete": [9]}, 422, "not in dataset"),
        ({"replace": {"1": {"messages": []}}}, 422, "upload rejected"),
        ({"append": [{"prompt": "x"}]}, 422, "upload rejected"),
        ({"mapping": {"messages": "weird:x"}}, 422, "unknown operation"),
        ({"rows": []}, 422, "rows"),
    ]
    for body, status, words in cases:
        response = client.post(f"/api/datasets/{v1['id']}/versions", json=body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["detail"]
    assert client.post("/api/datasets/ds_nope/versions", json={"delete": [1]}).status_code == 404
    assert sorted(p.name for p in settings.datasets_dir.iterdir()) == stored
    assert client.get("/api/datasets").json()["count"] == 1


def test_a_dataset_lists_the_jobs_and_models_that_used_it(client: TestClient) -> None:
    sums = [
        {
            "messages": [
                {"role": "user", "content": f"{i}+2"},
                {"role": "assistant", "content": str(i + 2)},
            ]
        }
        for i in range(16)
    ]
    v1 = _upload(client, sums)
    config = {
        "max_steps": 2,
        "batch_size": 4,
        "save_every": 2,
        "eval_every": 0,
        "eval_dataset_id": v1["id"],
    }
    job = client.post(
        "/api/jobs", json={"algorithm": "sl", "dataset_id": v1["id"], "config": config}
    ).json()
    wait_state(client, job["id"], ("succeeded",))
    detail = client.get(f"/api/datasets/{v1['id']}").json()
    assert [j["id"] for j in detail["jobs"]] == [job["id"]]
    assert [m["job_id"] for m in detail["models"]] == [job["id"]]
    metadata = json.loads(
        (platform_of(client).settings.runs_dir / job["id"] / "metadata.json").read_text()
    )
    assert metadata["datasets"]["config.dataset"] == {"id": v1["id"], "sha256": v1["sha256"]}
