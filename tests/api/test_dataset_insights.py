"""/api/datasets/{id}/preview and /stats on the real app and a real database (SQLite and
PostgreSQL): rows rendered with trained tokens marked, statistics cached beside the dataset,
and the 422s for a renderer or base model the server does not allow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from thinker.server.platform import Platform
from thinker.settings import Settings
from thinker.store import Job, new_id

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

Row = dict[str, object]
CHAT_ROWS: list[Row] = [
    {"messages": [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]},
    {
        "messages": [
            {"role": "user", "content": "1+1"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "and 3+4?"},  # ends with the user: trains nothing
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "1+1"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "3+4"},
            {"role": "assistant", "content": "7"},
        ]
    },
]


def upload(client: TestClient, rows: list[Row], kind: str) -> str:
    content = "".join(json.dumps(r) + "\n" for r in rows).encode()
    response = client.post(
        "/api/datasets", files={"file": ("rows.jsonl", content)}, data={"kind": kind}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def add_job(client: TestClient, base_model: str) -> None:
    """A finished job on `base_model`, inserted as the job manager would have."""
    platform: Platform = client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]

    async def insert() -> None:
        async with platform.sessions() as session:
            job = Job(
                id=new_id("job"),
                name="on-a-hub-model",
                algorithm="sl",
                backend="local",
                base_model=base_model,
                config={},
                state="succeeded",
                resource="cpu",
            )
            session.add(job)
            await session.commit()

    client.portal.call(insert)  # type: ignore[union-attr]


def trained(rendered: Row, sequence: int = 0) -> list[str]:
    segments = rendered["sequences"][sequence]["segments"]  # type: ignore[index]
    return [s["text"] for s in segments if s["trained"]]


def stats_files(settings: Settings, dataset_id: str) -> list[Path]:
    return sorted(settings.datasets_dir.glob(f"{dataset_id}.stats.*.json"))


def test_preview_keeps_the_stored_rows_and_adds_them_rendered(client: TestClient) -> None:
    dataset_id = upload(client, CHAT_ROWS, "chat")
    response = client.get(f"/api/datasets/{dataset_id}/preview", params={"offset": 1, "limit": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total"], body["offset"], body["limit"]) == (3, 1, 2)
    assert body["rows"] == CHAT_ROWS[1:]
    assert (body["base_model"], body["renderer"]) == ("thinker/tiny", "role_colon")
    assert body["train_on_what"] == "last_assistant_message" and body["max_length"] == 1024
    first, second = body["rendered"]
    assert (first["line"], second["line"]) == (2, 3)
    assert trained(first) == [] and first["num_trained_tokens"] == 0
    assert trained(second) == [" 7\n\nUser:"]
    text = "".join(s["text"] for s in second["sequences"][0]["segments"])
    assert text == "User: 1+1\n\nAssistant: 2\n\nUser: 3+4\n\nAssistant: 7\n\nUser:"


def test_preview_follows_train_on_what_and_max_length(client: TestClient) -> None:
    dataset_id = upload(client, CHAT_ROWS, "chat")
    params = {"offset": 2, "limit": 1, "train_on_what": "all_assistant_messages"}
    row = client.get(f"/api/datasets/{dataset_id}/preview", params=params).json()["rendered"][0]
    assert trained(row) == [" 2\n\n", " 7\n\nUser:"]
    params |= {"max_length": 30}
    row = client.get(f"/api/datasets/{dataset_id}/preview", params=params).json()["rendered"][0]
    assert row["truncated"] and trained(row) == [" 2\n\n"]
    cut = [s["text"] for s in row["sequences"][0]["segments"] if s["truncated"]]
    assert "".join(cut) == " 3+4\n\nAssistant: 7\n\nUser:"  # all past the 30th token


def test_preview_of_preference_pairs_has_both_sides(client: TestClient) -> None:
    rows: list[Row] = [{"prompt": "3+4", "chosen": "7", "rejected": "maybe 8"}]
    dataset_id = upload(client, rows, "preferences")
    row = client.get(f"/api/datasets/{dataset_id}/preview").json()["rendered"][0]
    assert [s["name"] for s in row["sequences"]] == ["chosen", "rejected"]
    assert trained(row, 0) == [" 7\n\nUser:"] and trained(row, 1) == [" maybe 8\n\nUser:"]


def test_stats_report_zero_trained_rows_and_are_cached_once(
    client: TestClient, settings: Settings
) -> None:
    dataset_id = upload(client, CHAT_ROWS, "chat")
    response = client.get(f"/api/datasets/{dataset_id}/stats")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rows"] == 3 and sum(b["count"] for b in body["histogram"]) == 3
    assert body["zero_trained"] == {"count": 1, "lines": [2]}
    assert body["errors"][0]["line"] == 2 and not body["trainable"]
    assert body["roles"] == {"user": 5, "assistant": 4}
    assert body["turns"] == {"2": 1, "3": 1, "4": 1}
    (cache,) = stats_files(settings, dataset_id)
    # Datasets never change, so a second call reads the file: an edit to it shows.
    cache.write_text(json.dumps(json.loads(cache.read_text()) | {"rows": 12345}))
    again = client.get(f"/api/datasets/{dataset_id}/stats").json()
    assert again["rows"] == 12345 and stats_files(settings, dataset_id) == [cache]
    # Other options are other statistics, in a file of their own.
    other = client.get(
        f"/api/datasets/{dataset_id}/stats", params={"train_on_what": "all_assistant_messages"}
    ).json()
    assert other["rows"] == 3 and other["trainable"] and other["zero_trained"]["count"] == 0
    assert len(stats_files(settings, dataset_id)) == 2


def test_stats_count_truncation_and_problem_answers(client: TestClient) -> None:
    chat_id = upload(client, CHAT_ROWS, "chat")
    body = client.get(f"/api/datasets/{chat_id}/stats", params={"max_length": 30}).json()
    assert body["max_length"] == 30
    # Rows of 30, 41 and 55 tokens; row 2 loses no trained token (it has none).
    assert body["truncated"]["lines"] == [2, 3]
    assert body["truncated_losing_trained"]["lines"] == [3]
    rows: list[Row] = [{"prompt": "1+2", "answer": "3"}, {"prompt": "f", "tests": ["assert 1"]}]
    problems_id = upload(client, rows, "problems")
    body = client.get(f"/api/datasets/{problems_id}/stats").json()
    assert (body["with_answer"], body["with_tests"], body["trainable"]) == (1, 1, True)


def test_unknown_renderer_base_model_or_dataset_is_refused(client: TestClient) -> None:
    dataset_id = upload(client, CHAT_ROWS, "chat")
    for route in ("preview", "stats"):
        url = f"/api/datasets/{dataset_id}/{route}"
        response = client.get(url, params={"renderer": "nope"})
        assert response.status_code == 422
        assert "role_colon" in response.json()["detail"]  # the valid renderers are named
        response = client.get(url, params={"base_model": "/etc/passwd"})
        assert response.status_code == 422
        assert "thinker/tiny" in response.json()["detail"]
        response = client.get(url, params={"train_on_what": "everything"})
        assert response.status_code == 422 and "last_assistant_message" in response.text
        assert client.get(f"/api/datasets/ds_missing/{route}").status_code == 404


def test_a_jobs_base_model_is_allowed_and_nothing_else_is(client: TestClient) -> None:
    dataset_id = upload(client, CHAT_ROWS, "chat")
    add_job(client, "acme/chat-7b")
    url = f"/api/datasets/{dataset_id}/stats"
    response = client.get(url, params={"base_model": "acme/other-7b"})
    assert response.status_code == 422
    assert "acme/chat-7b" in response.json()["detail"]  # the allowed ones are named
    # Allowed, so the server tries its tokenizer; offline, that fails as unavailable (503).
    response = client.get(url, params={"base_model": "acme/chat-7b"})
    assert response.status_code == 503 and "tokenizer" in response.json()["detail"]
