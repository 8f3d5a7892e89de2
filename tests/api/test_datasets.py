"""/api/datasets on the real app and a real database (SQLite and PostgreSQL): uploads in every
format, reading, deleting, and bad uploads that must leave nothing behind."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from tests.support.api import make_settings, platform_of

from thinker.errors import NotFoundError
from thinker.server.app import create_app
from thinker.services import datasets as dataset_service
from thinker.settings import Settings
from thinker.store import Job, new_id

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

Row = dict[str, object]
CHAT_ROWS: list[Row] = [
    {"messages": [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]},
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "2+2"},
            {"role": "assistant", "content": "4"},
        ]
    },
]
PREFERENCE_ROWS: list[Row] = [
    {"prompt": "3+4", "chosen": "7", "rejected": "I am not sure, maybe 8."},
    {"prompt": "reverse: abc", "chosen": "cba", "rejected": "Perhaps bca?"},
]
PROBLEM_ROWS: list[Row] = [
    {"prompt": "1+2", "answer": "3"},
    {"prompt": "2+5", "answer": "7"},
    {"prompt": "4+4", "answer": "8"},
]
ROWS_BY_KIND = {"chat": CHAT_ROWS, "preferences": PREFERENCE_ROWS, "problems": PROBLEM_ROWS}


# ---- writing rows in each format ---------------------------------------------------------


def as_jsonl(rows: list[Row]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def as_json_array(rows: list[Row]) -> bytes:
    return json.dumps(rows, indent=2).encode()


def as_json_columns(rows: list[Row]) -> bytes:
    return json.dumps({k: [r[k] for r in rows] for k in rows[0]}).encode()


def as_csv(rows: list[Row]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: v if isinstance(v, str) else json.dumps(v) for k, v in row.items()})
    return out.getvalue().encode()


def as_parquet(rows: list[Row]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


WRITERS: dict[str, tuple[str, Callable[[list[Row]], bytes]]] = {
    "jsonl": ("jsonl", as_jsonl),
    "json-array": ("json", as_json_array),
    "json-columns": ("json", as_json_columns),
    "csv": ("csv", as_csv),
    "parquet": ("parquet", as_parquet),
}
EXTENSIONS = {"jsonl": ".jsonl", "json": ".json", "csv": ".csv", "parquet": ".parquet"}


# ---- helpers -----------------------------------------------------------------------------


def upload(client: TestClient, content: bytes, filename: str, **form: str) -> Response:
    return client.post("/api/datasets", files={"file": (filename, content)}, data=form)


def stored_files(settings: Settings) -> list[str]:
    """Every entry of the datasets directory: temporary files would show up here."""
    return sorted(p.name for p in settings.datasets_dir.iterdir())


def add_job(client: TestClient, dataset_id: str | None, state: str, config: Row) -> str:
    """Insert a job row directly, as the job manager would have."""
    job_id = new_id("job")

    async def insert() -> None:
        async with platform_of(client).sessions() as session:
            session.add(
                Job(
                    id=job_id,
                    name="uses-it",
                    algorithm="sl",
                    backend="local",
                    base_model="tiny",
                    dataset_id=dataset_id,
                    config=config,
                    state=state,
                    resource="cpu",
                )
            )
            await session.commit()

    client.portal.call(insert)  # type: ignore[union-attr]
    return job_id


def set_job_state(client: TestClient, job_id: str, state: str) -> None:
    async def update() -> None:
        async with platform_of(client).sessions() as session:
            job = await session.get(Job, job_id)
            assert job is not None
            job.state = state
            await session.commit()

    client.portal.call(update)  # type: ignore[union-attr]


def job_dataset_id(client: TestClient, job_id: str) -> str | None:
    async def read() -> str | None:
        async with platform_of(client).sessions() as session:
            job = await session.get(Job, job_id)
            assert job is not None
            return job.dataset_id

    return client.portal.call(read)  # type: ignore[union-attr]


@pytest.fixture
def limited_client(tmp_path: Path, database_url: str | None) -> Iterator[TestClient]:
    """A server that takes uploads of at most 1 MiB, lines of 200 bytes and 5 rows."""
    settings = make_settings(
        tmp_path / "limited", database_url, max_upload_mb=1, max_line_bytes=200, max_rows=5
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


# ---- uploads that succeed ----------------------------------------------------------------


@pytest.mark.parametrize("writer", list(WRITERS))
def test_upload_each_format_and_kind(client: TestClient, settings: Settings, writer: str) -> None:
    source_format, write = WRITERS[writer]
    for kind, rows in ROWS_BY_KIND.items():
        filename = f"my {kind}{EXTENSIONS[source_format]}"
        response = upload(client, write(rows), filename)  # no kind: told by the first row
        assert response.status_code == 201, response.text
        body = response.json()
        expected = as_jsonl_normalised(rows)
        assert body["kind"] == kind
        assert body["source_format"] == source_format
        assert (body["name"], body["filename"]) == (f"my {kind}", filename)
        assert (body["num_rows"], body["size_bytes"]) == (len(rows), len(expected))
        assert body["sha256"] == hashlib.sha256(expected).hexdigest()
        assert body["builtin"] is False
        assert client.get(f"/api/datasets/{body['id']}/download").content == expected
        assert (settings.datasets_dir / f"{body['id']}.jsonl").read_bytes() == expected
    assert len(stored_files(settings)) == len(ROWS_BY_KIND)


def as_jsonl_normalised(rows: list[Row]) -> bytes:
    """The canonical form: compact JSON, keys in their order, text as UTF-8."""
    compact = (json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows)
    return "".join(line + "\n" for line in compact).encode()


def test_kind_given_and_format_from_content(client: TestClient) -> None:
    rows: list[Row] = [{"prompt": "abc", "completion": "cba", "system": "Reverse it."}]
    response = upload(client, as_csv(rows), "reversal", kind="prompt_completion", name="rev")
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["kind"], body["source_format"], body["name"]) == (
        "prompt_completion",
        "csv",
        "rev",
    )
    preview = client.get(f"/api/datasets/{body['id']}/preview").json()
    assert preview["rows"] == rows


def test_list_read_preview_download_delete(client: TestClient, settings: Settings) -> None:
    before = datetime.now(UTC).timestamp()
    problems = upload(client, as_jsonl(PROBLEM_ROWS), "problems.jsonl").json()
    chat = upload(client, as_jsonl(CHAT_ROWS), "chat.jsonl").json()
    listed = client.get("/api/datasets").json()
    assert listed["count"] == 2
    assert [d["id"] for d in listed["data"]] == [chat["id"], problems["id"]]  # newest first
    only_chat = client.get("/api/datasets", params={"kind": "chat"}).json()
    assert (only_chat["count"], [d["id"] for d in only_chat["data"]]) == (1, [chat["id"]])
    page = client.get("/api/datasets", params={"offset": 1, "limit": 1}).json()
    assert (page["count"], [d["id"] for d in page["data"]]) == (2, [problems["id"]])

    read = client.get(f"/api/datasets/{problems['id']}").json()
    version = {k: problems[k] for k in ("id", "num_rows", "sha256", "created_at")}
    assert read == {**problems, "jobs": [], "models": [], "versions": [{**version, "version": 1}]}
    created = datetime.fromisoformat(read["created_at"])
    assert created.utcoffset() is not None and created.utcoffset().total_seconds() == 0
    assert before - 1 <= created.timestamp() <= datetime.now(UTC).timestamp() + 1

    preview = client.get(f"/api/datasets/{problems['id']}/preview?offset=1&limit=5").json()
    assert {k: preview[k] for k in ("id", "offset", "limit", "total", "rows")} == {
        "id": problems["id"],
        "offset": 1,
        "limit": 5,
        "total": 3,
        "rows": PROBLEM_ROWS[1:],
    }
    download = client.get(f"/api/datasets/{problems['id']}/download")
    assert download.status_code == 200
    assert download.content == as_jsonl_normalised(PROBLEM_ROWS)
    assert 'filename="problems.jsonl"' in download.headers["content-disposition"]

    assert client.delete(f"/api/datasets/{problems['id']}").status_code == 204
    assert stored_files(settings) == [f"{chat['id']}.jsonl"]
    assert client.get("/api/datasets").json()["count"] == 1
    for path in ("", "/preview", "/download"):
        response = client.get(f"/api/datasets/{problems['id']}{path}")
        assert response.status_code == 404, path
        assert problems["id"] in response.json()["detail"]
    assert client.delete(f"/api/datasets/{problems['id']}").status_code == 404


def test_operation_ids(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    ids = {
        op["operationId"]
        for p in paths
        if p.startswith("/api/datasets")
        for op in paths[p].values()
    }
    assert {
        "create_dataset",
        "detect_dataset",
        "read_datasets",
        "read_dataset",
        "read_dataset_preview",
        "download_dataset",
        "delete_dataset",
    } <= ids  # the import and statistics routes live in other modules


# ---- uploads that are rejected -----------------------------------------------------------


def assert_nothing_stored(client: TestClient, settings: Settings) -> None:
    assert stored_files(settings) == []
    assert client.get("/api/datasets").json()["count"] == 0


def test_bad_rows_are_reported_by_line_and_nothing_is_stored(
    client: TestClient, settings: Settings
) -> None:
    good, other = json.dumps(CHAT_ROWS[0]), json.dumps(CHAT_ROWS[1])
    empty = json.dumps(
        {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": ""}]}
    )
    text = f'{good}\n{other}\n{{"messages": [\n{{"msgs": []}}\n\n{empty}\n'
    response = upload(client, text.encode(), "chat.jsonl", kind="chat")
    assert response.status_code == 422
    body = response.json()
    assert [(e["line"], e["field"]) for e in body["errors"]] == [
        (3, None),
        (4, "messages"),
        (6, "messages[1].content"),
    ]
    assert body["errors"][0]["message"].startswith("malformed JSON")
    assert body["errors"][1]["message"] == "missing (a chat row needs 'messages')"
    assert body["errors"][2]["message"] == "is empty"
    assert body["error_count"] == 3
    assert body["error_counts"] == {"malformed_json": 1, "missing": 1, "empty": 1}
    assert body["detail"].startswith("upload rejected: 3 problem(s)")
    assert_nothing_stored(client, settings)


def test_shipped_broken_examples_are_rejected(client: TestClient, settings: Settings) -> None:
    broken = Path(__file__).parents[2] / "data" / "examples" / "broken"
    expected = {
        "bad_json.jsonl": [(2, None), (3, None)],  # line 3 repeats line 1
        "missing_field.jsonl": [(3, "completion")],
        "empty_content.jsonl": [(2, "messages[1].content")],
    }
    for name, errors in expected.items():
        response = upload(client, (broken / name).read_bytes(), name)
        assert response.status_code == 422, name
        assert [(e["line"], e["field"]) for e in response.json()["errors"]] == errors
    assert_nothing_stored(client, settings)


def test_bad_rows_in_csv_and_parquet_name_their_line_and_row(
    client: TestClient, settings: Settings
) -> None:
    text = "prompt,chosen,rejected\n3+4,7,8\n2+2,4,\n1+1,2,2\n"
    response = upload(client, text.encode(), "prefs.csv")
    assert response.status_code == 422
    errors = [(e["line"], e["field"], e["message"]) for e in response.json()["errors"]]
    assert errors == [
        (3, "rejected", "missing"),
        (4, "rejected", "is identical to chosen: the pair carries no preference"),
    ]
    rows: list[Row] = [{**r, "tests": None} for r in PROBLEM_ROWS]  # every row every column
    rows.append({"prompt": "9+9", "answer": None, "tests": ["assert True"]})
    rows.append({"prompt": None, "answer": "1", "tests": None})
    response = upload(client, as_parquet(rows), "problems.parquet", kind="problems")
    assert response.status_code == 422
    assert [(e["line"], e["field"]) for e in response.json()["errors"]] == [(5, "prompt")]
    assert_nothing_stored(client, settings)


def test_first_fifty_errors_in_full_and_the_count_of_all(
    client: TestClient, settings: Settings
) -> None:
    text = "".join(f'{{"prompt": "a{i}", "completion": ""}}\n' for i in range(70))
    response = upload(client, text.encode(), "pc.jsonl", kind="prompt_completion")
    assert response.status_code == 422
    body = response.json()
    assert (len(body["errors"]), body["error_count"]) == (50, 70)
    assert [e["line"] for e in body["errors"]] == list(range(1, 51))
    assert_nothing_stored(client, settings)


@pytest.mark.parametrize(
    ("content", "filename", "needle"),
    [
        (b'{"question": "3+4", "reply": "7"}\n', "x.jsonl", 'fields ("question", "reply")'),
        (b"", "x.jsonl", "file has no rows"),
        (b"\n\n", "x.csv", "CSV file has no header line"),
        (b'{"a": [1], "b": [1, 2]}', "x.json", "arrays of equal length"),
        (b"PAR1 not parquet", "x.parquet", "unreadable Parquet"),
    ],
)
def test_unusable_files_are_rejected(
    client: TestClient, settings: Settings, content: bytes, filename: str, needle: str
) -> None:
    response = upload(client, content, filename)
    assert response.status_code == 422
    body = response.json()
    assert needle in body["detail"] and needle in body["errors"][0]["message"]
    assert_nothing_stored(client, settings)


PNG_START = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"  # an image: NUL at byte 8


@pytest.mark.parametrize(
    ("filename", "form"),
    [("file.bin", {}), ("file.jsonl", {}), ("file.csv", {"kind": "chat"})],
)
def test_a_binary_file_is_refused_as_not_text(
    client: TestClient, settings: Settings, filename: str, form: dict[str, str]
) -> None:
    """Whatever its name or given kind: not "invalid UTF-8", but what the file is."""
    message = (
        f"{filename} is not a text file (it looks binary: NUL byte at byte 8); "
        "upload JSONL, JSON, CSV or Parquet"
    )
    content = PNG_START + bytes(range(256)) * 16
    for path in ("/api/datasets", "/api/datasets/detect"):
        response = client.post(path, files={"file": (filename, content)}, data=form)
        assert response.status_code == 422, path
        body = response.json()
        assert body["detail"] == message
        assert body["errors"] == [
            {"line": 0, "field": None, "message": message, "kind": "not_text"}
        ]
        assert (body["error_count"], body["error_counts"]) == (1, {"not_text": 1})
    assert_nothing_stored(client, settings)


def test_parquet_is_binary_and_still_read_whatever_its_name(client: TestClient) -> None:
    response = upload(client, as_parquet(PROBLEM_ROWS), "problems.bin")
    assert response.status_code == 201, response.text
    assert (response.json()["source_format"], response.json()["num_rows"]) == ("parquet", 3)


def test_unknown_kind_and_overlong_name_are_refused(client: TestClient, settings: Settings) -> None:
    response = upload(client, as_jsonl(CHAT_ROWS), "c.jsonl", kind="poetry")
    assert response.status_code == 422 and "kind" in response.json()["detail"]
    response = upload(client, as_jsonl(CHAT_ROWS), "c.jsonl", name="n" * 201)
    assert response.status_code == 422 and "name" in response.json()["detail"]
    assert_nothing_stored(client, settings)


def test_limits_on_lines_and_rows(limited_client: TestClient, tmp_path: Path) -> None:
    settings = platform_of(limited_client).settings
    long_row = {"messages": [{"role": "user", "content": "x" * 300}, CHAT_ROWS[0]["messages"][1]]}  # type: ignore[index]
    for rows, filename, needle in [
        ([CHAT_ROWS[0], long_row], "long.jsonl", "longer than 200 bytes"),
        ([CHAT_ROWS[0], long_row], "long.parquet", "bytes as JSON, over the limit of 200"),
        ([{"prompt": f"{i}+0", "answer": str(i)} for i in range(6)], "many.jsonl", "more than 5"),
    ]:
        write = as_parquet if filename.endswith("parquet") else as_jsonl
        response = limited_client.post("/api/datasets", files={"file": (filename, write(rows))})
        assert response.status_code == 422, filename
        error = response.json()["errors"][0]
        assert error["line"] == (2 if "long" in filename else 6) and needle in error["message"]
    assert stored_files(settings) == []


def test_oversized_uploads_get_413_and_store_nothing(limited_client: TestClient) -> None:
    settings = platform_of(limited_client).settings
    big = b'{"prompt": "a", "answer": "b"}\n' * 100_000  # 3 MB: refused by Content-Length
    slightly = b"x" * (1024 * 1024 + 10)  # within the form's slack: refused while copied
    for content in (big, slightly):
        response = upload(limited_client, content, "big.jsonl")
        assert response.status_code == 413
        assert response.json()["detail"] == (
            "upload too large: the limit is 1 MiB per file (THINKER_MAX_UPLOAD_MB)"
        )
    boundary = "thinkerboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield head
        yield from (big[i : i + 65536] for i in range(0, len(big), 65536))
        yield f"\r\n--{boundary}--\r\n".encode()

    response = limited_client.post(
        "/api/datasets",
        content=chunks(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert response.status_code == 413 and "1 MiB" in response.json()["detail"]
    assert stored_files(settings) == []
    assert limited_client.get("/api/datasets").json()["count"] == 0


def test_path_like_names_are_labels(client: TestClient, settings: Settings, tmp_path: Path) -> None:
    named = upload(client, as_jsonl(CHAT_ROWS), "../../etc/passwd", name="../../etc/passwd")
    unnamed = upload(client, as_jsonl(CHAT_ROWS), "../../../tmp/evil.jsonl")
    assert (named.status_code, unnamed.status_code) == (201, 201)
    assert (named.json()["name"], named.json()["filename"]) == ("../../etc/passwd",) * 2
    assert unnamed.json()["name"] == "evil"  # the stem, as a label
    ids = sorted(r.json()["id"] for r in (named, unnamed))
    assert stored_files(settings) == [f"{i}.jsonl" for i in ids]
    outside = [p for p in tmp_path.rglob("*") if settings.data_dir not in (p, *p.parents)]
    assert outside == []
    download = client.get(f"/api/datasets/{named.json()['id']}/download")
    assert 'filename="etc_passwd.jsonl"' in download.headers["content-disposition"]


# ---- deleting while jobs use a dataset ---------------------------------------------------


def test_delete_refused_while_an_unfinished_job_uses_it(
    client: TestClient, settings: Settings
) -> None:
    dataset = upload(client, as_jsonl(CHAT_ROWS), "chat.jsonl").json()
    # Paused: unfinished, and no worker for the job manager to find lost (a `running` row
    # without one is reaped as interrupted at the manager's next tick).
    job_id = add_job(client, dataset["id"], "paused", {})
    jobs = client.get(f"/api/datasets/{dataset['id']}").json()["jobs"]
    assert [(j["id"], j["name"]) for j in jobs] == [(job_id, "uses-it")]
    response = client.delete(f"/api/datasets/{dataset['id']}")
    assert response.status_code == 409 and job_id in response.json()["detail"]
    assert stored_files(settings) == [f"{dataset['id']}.jsonl"]

    set_job_state(client, job_id, "succeeded")
    assert client.delete(f"/api/datasets/{dataset['id']}").status_code == 204
    assert stored_files(settings) == []
    assert job_dataset_id(client, job_id) is None  # the finished job stays, unlinked


def test_delete_refused_while_a_job_config_names_it(client: TestClient) -> None:
    main = upload(client, as_jsonl(PROBLEM_ROWS), "rl.jsonl").json()
    demos = upload(client, as_jsonl(CHAT_ROWS), "demos.jsonl").json()
    job_id = add_job(client, main["id"], "paused", {"sl": {"dataset_id": demos["id"]}})
    response = client.delete(f"/api/datasets/{demos['id']}")
    assert response.status_code == 409 and job_id in response.json()["detail"]
    set_job_state(client, job_id, "cancelled")
    assert client.delete(f"/api/datasets/{demos['id']}").status_code == 204
    assert job_dataset_id(client, job_id) == main["id"]  # its own dataset is untouched


# ---- the shipped examples ----------------------------------------------------------------


def test_register_examples_once(tmp_path: Path, database_url: str | None) -> None:
    settings = make_settings(tmp_path / "data", database_url, register_examples=True)
    expected = {name: kind for name, _, kind in dataset_service.EXAMPLES}
    with TestClient(create_app(settings)) as client:
        listed = client.get("/api/datasets", params={"limit": 1000}).json()
        assert {d["name"]: d["kind"] for d in listed["data"]} == expected
        assert all(d["builtin"] for d in listed["data"])
        by_name = {d["name"]: d for d in listed["data"]}
        assert by_name["arithmetic-train"]["num_rows"] == 100
        client.portal.call(platform_of(client).datasets.register_examples)  # type: ignore[union-attr]
        assert client.get("/api/datasets").json()["count"] == len(expected)
    with TestClient(create_app(settings)) as client:  # a restart registers nothing new
        assert client.get("/api/datasets").json()["count"] == len(expected)
    assert len(stored_files(settings)) == len(expected)


def test_register_examples_without_the_directory_does_nothing(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dataset_service, "EXAMPLES_DIR", tmp_path / "absent")
    client.portal.call(platform_of(client).datasets.register_examples)  # type: ignore[union-attr]
    assert client.get("/api/datasets").json()["count"] == 0


# ---- detection and field mappings --------------------------------------------------------

QUESTION_ROWS: list[Row] = [
    {"id": 1, "question": "Why is the sky blue?", "answer": "Rayleigh scattering of sunlight."},
    {"id": 2, "question": "Why is grass green?", "answer": "Chlorophyll reflects green light."},
]


def test_upload_with_a_mapping_stores_canonical_rows_and_the_mapping(
    client: TestClient, settings: Settings
) -> None:
    mapping = {"prompt": "question", "completion": "answer"}
    response = upload(client, as_csv(QUESTION_ROWS), "qa.csv", mapping=json.dumps(mapping))
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["kind"], body["mapping"], body["version"], body["root_id"]) == (
        "prompt_completion",
        mapping,
        1,
        None,
    )
    expected = [
        {"prompt": r["question"], "completion": r["answer"], "id": str(r["id"])}
        for r in QUESTION_ROWS
    ]
    assert client.get(f"/api/datasets/{body['id']}/download").content == as_jsonl_normalised(
        expected  # type: ignore[arg-type]
    )
    assert client.get(f"/api/datasets/{body['id']}").json()["mapping"] == mapping


def test_a_known_layout_is_mapped_without_asking(client: TestClient) -> None:
    sharegpt = [
        {"conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}
        for q, a in (("3+4", "7"), ("2+2", "4"))
    ]
    response = upload(client, as_jsonl(sharegpt), "sharegpt.jsonl")
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["kind"], body["mapping"]) == ("chat", {"messages": "sharegpt:conversations"})
    stored = client.get(f"/api/datasets/{body['id']}/download").text.splitlines()
    assert json.loads(stored[0]) == {
        "messages": [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]
    }


def test_a_guessed_mapping_is_a_422_with_the_detection_until_confirmed(
    client: TestClient, settings: Settings
) -> None:
    rows: list[Row] = [{"prompt": "abc", "response": "cba"}, {"prompt": "xyz", "response": "zyx"}]
    response = upload(client, as_jsonl(rows), "pr.jsonl")
    assert response.status_code == 422
    body = response.json()
    detection = body["detection"]
    assert (detection["format"], detection["kind"], detection["mapping"]) == (
        "jsonl",
        "prompt_completion",
        {"completion": "response"},
    )
    assert detection["suggestions"] == ["field `response` looks like the completion: map it?"]
    assert (detection["fields"], detection["sample"]) == (["prompt", "response"], rows)
    assert body["detail"].startswith("upload rejected: the fields")
    assert (body["error_count"], body["error_counts"]) == (1, {"missing": 1})
    assert_nothing_stored(client, settings)

    confirmed = upload(client, as_jsonl(rows), "pr.jsonl", mapping=json.dumps(detection["mapping"]))
    assert confirmed.status_code == 201, confirmed.text
    assert confirmed.json()["kind"] == "prompt_completion"


def test_raw_text_is_a_422_that_says_why(client: TestClient, settings: Settings) -> None:
    response = upload(client, as_jsonl([{"text": "Once upon a time."}]), "t.jsonl")
    assert response.status_code == 422
    body = response.json()
    assert body["detection"]["kind"] is None
    assert "raw text (`text`)" in body["detection"]["suggestions"][0]
    assert "cannot tell the dataset kind" in body["detail"]
    assert_nothing_stored(client, settings)


@pytest.mark.parametrize(
    ("mapping", "needle"),
    [
        ("{not json", "mapping is not JSON"),
        ('["prompt"]', "mapping must be a JSON object"),
        ('{"messages": "chatml:text"}', "unknown operation 'chatml'"),
    ],
)
def test_a_malformed_mapping_is_refused(
    client: TestClient, settings: Settings, mapping: str, needle: str
) -> None:
    for path in ("/api/datasets", "/api/datasets/detect"):
        files = {"file": ("c.jsonl", as_jsonl(CHAT_ROWS))}
        response = client.post(path, files=files, data={"mapping": mapping})
        assert response.status_code == 422 and needle in response.json()["detail"], path
    assert_nothing_stored(client, settings)


def test_detect_validates_the_whole_file_and_stores_nothing(
    client: TestClient, settings: Settings
) -> None:
    rows = [
        {"question": f"{i}+1", "reply": f"answer {i + 1}, which is long enough"} for i in range(6)
    ]
    text = as_jsonl(rows) + b'{"question": "x"\n' + as_jsonl(rows[:1])
    response = client.post("/api/datasets/detect", files={"file": ("qa.jsonl", text)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["format"], body["kind"]) == ("jsonl", "prompt_completion")
    assert body["mapping"] == {"prompt": "question", "completion": "reply"}
    assert len(body["suggestions"]) == 2 and body["sample"] == rows[:5]
    assert body["validation"] == {
        "kind": "prompt_completion",
        "mapping": body["mapping"],
        "rows": 8,
        "error_count": 2,
        "error_counts": {"malformed_json": 1, "duplicate": 1},
        "errors": [
            {
                "line": 7,
                "field": None,
                "message": body["validation"]["errors"][0]["message"],
                "kind": "malformed_json",
            },
            {
                "line": 8,
                "field": None,
                "message": "duplicate of line 1 (the same row, byte for byte once normalised)",
                "kind": "duplicate",
            },
        ],
    }
    given = client.post(
        "/api/datasets/detect",
        files={"file": ("qa.jsonl", as_jsonl(rows))},
        data={"kind": "prompt_completion", "mapping": '{"prompt": "question"}'},
    ).json()["validation"]
    assert (given["error_count"], given["error_counts"]) == (6, {"missing": 6})
    assert given["errors"][0]["field"] == "completion"
    assert_nothing_stored(client, settings)


def test_store_file_makes_versions_of_a_lineage(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    platform = platform_of(client)
    first = upload(client, as_jsonl(PROBLEM_ROWS), "rl.jsonl").json()
    source = tmp_path / "v.jsonl"
    source.write_bytes(as_jsonl([{"question": "9+9", "solution": "18"}]))

    async def new_version(parent_id: str) -> str:
        dataset = await platform.datasets.store_file(
            source,
            filename="v.jsonl",
            name=None,
            kind="problems",
            mapping={"prompt": "question", "answer": "solution"},
            origin={"edited_from": parent_id},
            parent_id=parent_id,
        )
        return dataset.id

    def read(dataset_id: str) -> Row:
        return client.get(f"/api/datasets/{dataset_id}").json()  # type: ignore[no-any-return]

    second = read(client.portal.call(new_version, first["id"]))  # type: ignore[union-attr]
    third = read(client.portal.call(new_version, second["id"]))  # type: ignore[union-attr,arg-type]
    assert [(d["version"], d["root_id"], d["parent_id"]) for d in (second, third)] == [
        (2, first["id"], first["id"]),
        (3, first["id"], second["id"]),
    ]
    assert third["origin"] == {"edited_from": second["id"]}
    assert third["mapping"] == {"prompt": "question", "answer": "solution"}
    assert source.exists()  # the caller's file is the caller's
    with pytest.raises(NotFoundError):
        client.portal.call(new_version, "ds_000000000000")  # type: ignore[union-attr]
    assert len(stored_files(settings)) == 3
