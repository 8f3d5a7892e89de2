"""Inputs at the edge of what the server holds, on SQLite and PostgreSQL: bounds checked before
any handler runs (server/limits.py), names, ids, unknown paths and 405s, dataset files gone
from disk, and a full disk (a small tmpfs as the data directory)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from tests.disk import tmpfs
from tests.support.api import make_settings
from tests.support.database import DATABASES, fresh_database

from thinker.server.app import create_app
from thinker.server.limits import INT64_MAX, MAX_DEPTH
from thinker.settings import Settings

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

PAIRS = b'{"prompt": "3+4", "completion": "7"}\n{"prompt": "2+2", "completion": "4"}\n'
NOT_AN_ID = "ds_000000000000"  # well formed, names nothing


def upload(client: TestClient, data: bytes = PAIRS, filename: str = "pairs.jsonl", **form: str):
    return client.post("/api/datasets", files={"file": (filename, data)}, data=form)


def problems(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    return response.json()["problems"]


# ---- bounds on bodies, queries and ids ---------------------------------------------------


def test_a_body_nested_too_deep_is_a_422_naming_the_place(client: TestClient) -> None:
    """500 levels (a RecursionError in validation before) and 100,000 (past Python's parser)."""
    config = "1"
    for _ in range(500):
        config = '{"a": ' + config + "}"
    body = '{"name": "deep", "algorithm": "sl", "config": ' + config + "}"
    found = problems(client.post("/api/jobs", content=body, headers=JSON))
    assert found == [
        "body.config" + ".a" * (MAX_DEPTH - 1) + ": nested deeper than 32 levels (the limit)"
    ]
    very = '{"config": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = client.post("/api/jobs", content=very, headers=JSON)
    assert problems(response) == ["body: nested deeper than 32 levels (the limit)"]


JSON = {"content-type": "application/json"}


def test_numbers_past_64_bits_or_not_finite_are_422s(client: TestClient) -> None:
    dataset = upload(client).json()["id"]
    append = {"append": [{"prompt": "x", "completion": "y", "n": 2**70}]}
    found = problems(client.post(f"/api/datasets/{dataset}/versions", json=append))
    assert found == [
        "body.append.0.n: 1180591620717411303424 is outside the signed 64-bit range "
        f"({-(2**63)} to {INT64_MAX})"
    ]
    body = '{"name": "x", "algorithm": "sl", "config": {"learning_rate": Infinity, "seed": NaN}}'
    found = problems(client.post("/api/jobs", content=body, headers=JSON))
    assert found == [
        "body.config.learning_rate: inf is not a finite number",
        "body.config.seed: nan is not a finite number",
    ]
    huge = '{"append": [{"n": ' + "9" * 5000 + "}]}"  # past Python's 4,300 digits
    response = client.post(f"/api/datasets/{dataset}/versions", content=huge, headers=JSON)
    assert "outside the signed 64-bit range" in problems(response)[0]


@pytest.mark.parametrize(
    "path",
    [
        "/api/datasets?offset=9223372036854775808",
        "/api/jobs?offset=9223372036854775808",
        "/api/models?offset=9223372036854775808",
        f"/api/datasets/{NOT_AN_ID}/preview?offset=99999999999999999999",
        "/api/jobs/job_000000000000/events?after_seq=9223372036854775808",
        "/api/jobs?offset=9223372036854775808.0",  # what pydantic reads as an integer
    ],
)
def test_integer_queries_past_64_bits_are_422s(client: TestClient, path: str) -> None:
    name = path.split("?")[1].split("=")[0]
    [problem] = problems(client.get(path))
    assert problem.startswith(f"query.{name}: ") and "signed 64-bit range" in problem


def test_the_largest_offset_reads_an_empty_page(client: TestClient) -> None:
    for resource in ("datasets", "jobs", "models"):
        response = client.get(f"/api/{resource}?offset={INT64_MAX}")
        assert response.status_code == 200 and response.json()["data"] == [], response.text


def test_nul_and_control_characters_never_reach_the_database(client: TestClient) -> None:
    """PostgreSQL refuses NUL anywhere (a 500 before); SQLite stored it."""
    dataset = upload(client).json()["id"]
    found = problems(client.get("/api/models?job_id=job_%00"))
    assert found == [
        "query.job_id: holds U+0000 (a control character) at position 4 (tab, "
        "newline and carriage return are allowed)"
    ]
    body = {"name": "x", "algorithm": "sl", "config": {"system_prompt": "bell\x07"}}
    assert problems(client.post("/api/jobs", json=body))[0].startswith(
        "body.config.system_prompt: holds U+0007"
    )
    assert problems(client.post("/api/sample", json={"model": "m\x00", "prompt": "hi"}))[0] == (
        "body.model: holds U+0000 (a control character) at position 1"
    )
    surrogate = client.post("/api/tokens", content='{"name": "a\\ud800"}', headers=JSON)
    assert problems(surrogate)[0].startswith("body.name: holds U+D800 (a lone surrogate)")
    # Dataset rows never reach the database: any control but NUL is text there, as in a file.
    escape = {"append": [{"prompt": "colour \x1b[31mred\x1b[0m", "completion": "ok\x0c"}]}
    assert client.post(f"/api/datasets/{dataset}/versions", json=escape).status_code == 201
    nul = {"append": [{"prompt": "a\x00", "completion": "b"}]}
    found = problems(client.post(f"/api/datasets/{dataset}/versions", json=nul))
    assert found == ["body.append.0.prompt: holds U+0000 (a control character) at position 1"]


@pytest.mark.parametrize("name", ["evil\u202egnp.exe", "two\nlines", "nul\x00", "tab\there"])
def test_names_refuse_control_and_bidi_characters(client: TestClient, name: str) -> None:
    """As token names did already; names were stored with NUL and U+202E on SQLite."""
    dataset = upload(client).json()["id"]
    attempts = [
        upload(client, name=name),
        client.post(f"/api/datasets/{dataset}/versions", json={"name": name, "delete": [1]}),
        client.post("/api/tokens", json={"name": name}),
        client.post("/api/datasets/import", json={"source": "org/name", "name": name}),
        client.post("/api/jobs", json={"algorithm": "dpo", "dataset_id": dataset, "name": name}),
    ]
    if "\u202e" in name:  # a multipart file name holds no control character
        attempts.append(upload(client, filename=name + ".jsonl"))
    for response in attempts:
        assert response.status_code == 422, response.text
        assert f"U+{ord(name[[c.isprintable() for c in name].index(False)]):04X}" in response.text
    names = [d["name"] for d in client.get("/api/datasets").json()["data"]]
    assert names == ["pairs"]  # nothing stored
    assert client.get("/api/jobs").json()["count"] == 0
    assert upload(client, name="Ünïcödé name, 名前 ✓").json()["name"] == "Ünïcödé name, 名前 ✓"


def test_ids_that_cannot_be_ids_are_404s_without_a_query(client: TestClient) -> None:
    platform = client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]
    sent: list[str] = []  # every parameter of every statement (the job manager polls too)
    listener = lambda *args: sent.extend(map(str, args[3] or ()))  # noqa: E731
    event.listen(platform.engine.sync_engine, "before_cursor_execute", listener)
    try:
        for path in (
            "/api/datasets/ds_%00abc",
            "/api/datasets/ds_x%00/preview",
            "/api/jobs/job_%E2%80%AE",
            "/api/models/mdl_0123456789ab%00",
            "/api/models/job_0123456789ab",  # a job id is no model id
            "/api/datasets/imports/imp_nothing",
        ):
            response = client.get(path)
            assert response.status_code == 404, (path, response.text)
            assert response.json()["detail"].startswith("no ")
        assert client.delete("/api/tokens/tok_%00").status_code == 404
    finally:
        event.remove(platform.engine.sync_engine, "before_cursor_execute", listener)
    assert not [p for p in sent if "\x00" in p or "\u202e" in p or p.startswith(("ds_x", "job_0"))]
    assert client.get(f"/api/datasets/{NOT_AN_ID}").status_code == 404  # well formed: looked up


# ---- CSV and JSONL bounds ----------------------------------------------------------------


def test_100k_columns_are_refused_naming_the_limit(client: TestClient) -> None:
    """The header check was quadratic (100k columns: over 600 s); the width is refused first."""
    header = ",".join(f"c{i}" for i in range(100_000))
    data = (header + "\n" + ",".join("v" for _ in range(100_000)) + "\n").encode()
    response = upload(client, data, "wide.csv")
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0] == {
        "line": 1,
        "field": None,
        "message": "CSV header has 100000 columns, over the limit of 1000",
        "kind": "too_many_columns",
    }
    detected = client.post("/api/datasets/detect", files={"file": ("wide.csv", data)})
    assert detected.status_code == 200
    assert detected.json()["validation"]["errors"][0]["kind"] == "too_many_columns"


def test_an_uploaded_integer_past_64_bits_is_refused_with_line_and_field(
    client: TestClient,
) -> None:
    """orjson reads it as a float: it was stored as another number, silently."""
    data = PAIRS + b'{"prompt": "1", "completion": "2", "id": 123456789012345678901234}\n'
    response = upload(client, data)
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert (error["line"], error["field"], error["kind"]) == (3, "id", "out_of_range")
    assert "write it as a string" in error["message"]
    deep = b'{"prompt": "1", "completion": "2", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    response = upload(client, PAIRS + deep)
    assert response.status_code == 422
    assert [(e["line"], e["kind"]) for e in response.json()["errors"]] == [(3, "too_deep")]


# ---- unknown paths and methods -----------------------------------------------------------


def dashboard_settings(tmp_path: Path, database_url: str | None) -> Settings:
    """Settings with a built dashboard: a directory with an index.html."""
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "index.html").write_text("<div id=root></div>")
    return make_settings(tmp_path / "data", database_url, static_dir=tmp_path / "dist")


@pytest.fixture(
    scope="module",
    params=[(app, db) for app in ("plain", "dashboard") for db in DATABASES],
    ids="-".join,
)
def app_client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """The app without and with the dashboard mounted at /, on each database: one of each
    for the module's 404s and 405s, which change nothing (an app each took 1-2 s, most of it
    building the OpenAPI document that the first 404 or 405 reads)."""
    app, database = request.param
    tmp_path = tmp_path_factory.mktemp(app)
    with fresh_database(database) as database_url:
        if app == "dashboard":
            settings = dashboard_settings(tmp_path, database_url)
        else:
            settings = make_settings(tmp_path / "data", database_url)
        with TestClient(create_app(settings)) as client:
            yield client


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/nope"),
        ("GET", "/api/datasets/..%2f..%2fetc%2fpasswd"),
        ("GET", "/api/datasets/..%2F..%2F..%2Findex.html"),
        ("GET", "/assets/..%2f..%2fapi%2fnope"),
        ("GET", "/v1/nope"),
        ("GET", "/api"),
        ("POST", "/api/nope"),
        ("DELETE", "/v1/models/x/y"),
    ],
)
def test_unknown_api_paths_are_json_404s(app_client: TestClient, method: str, path: str) -> None:
    response = app_client.request(method, path)
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": f"Not Found: no operation {method} {path} (see /docs)"}


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/api/datasets", "GET, POST"),
        ("DELETE", "/api/jobs", "GET, POST"),
        ("PATCH", f"/api/datasets/{NOT_AN_ID}", "GET, DELETE"),
        ("POST", "/api/settings", "GET"),
        ("GET", "/api/settings/tinker-key", "PUT, DELETE"),
        ("GET", "/v1/chat/completions", "POST"),
    ],
)
def test_405_lists_every_method_the_path_serves(
    app_client: TestClient, method: str, path: str, allowed: str
) -> None:
    response = app_client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allowed
    assert response.json() == {"detail": "Method Not Allowed"}


def test_the_dashboard_still_serves_its_client_routes(
    tmp_path: Path, database_url: str | None
) -> None:
    with TestClient(create_app(dashboard_settings(tmp_path, database_url))) as client:
        assert client.get("/training/job_0123456789ab").text == "<div id=root></div>"
        refused = client.put("/training/job_0123456789ab")
        assert (refused.status_code, refused.headers["allow"]) == (405, "GET, HEAD")


# ---- a dataset file gone from disk -------------------------------------------------------


def test_a_missing_dataset_file_is_a_503_naming_it(client: TestClient, settings: Settings) -> None:
    """Preview, download and versions were 500s, and statistics reported 0 rows."""
    dataset = upload(client).json()["id"]
    assert client.get(f"/api/datasets/{dataset}/stats").json()["rows"] == 2
    (settings.datasets_dir / f"{dataset}.jsonl").unlink()
    expected = (
        f"dataset {dataset}: its file datasets/{dataset}.jsonl is missing on disk (removed "
        "outside Thinker); restore the file, or upload the data again as a new dataset"
    )
    for response in (
        client.get(f"/api/datasets/{dataset}/preview"),
        client.get(f"/api/datasets/{dataset}/stats"),  # cached: it must not answer from there
        client.get(f"/api/datasets/{dataset}/download"),
        client.post(f"/api/datasets/{dataset}/versions", json={"delete": [1]}),
    ):
        assert response.status_code == 503, response.text
        assert response.json() == {"detail": expected}
    assert client.get(f"/api/datasets/{dataset}").json()["num_rows"] == 2  # the record stays
    assert client.delete(f"/api/datasets/{dataset}").status_code == 204


def test_a_dataset_file_of_another_size_is_a_503(client: TestClient, settings: Settings) -> None:
    dataset = upload(client).json()["id"]
    path = settings.datasets_dir / f"{dataset}.jsonl"
    path.write_bytes(path.read_bytes()[:10])  # truncated outside Thinker
    response = client.get(f"/api/datasets/{dataset}/preview")
    assert response.status_code == 503
    assert "is 10 bytes on disk, not the" in response.json()["detail"]


# ---- a full disk -------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs: the data directory, database included on SQLite."""
    with tmpfs(tmp_path / "disk", "4m") as mount:
        yield mount


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill `disk` to the last block, then free `leave` bytes; the filler file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 10):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * chunk):
                    pass
        f.truncate(max(0, f.tell() - leave))
    return filler


def test_a_full_disk_is_a_507_and_leaves_nothing(
    small_disk: Path, database_url: str | None
) -> None:
    settings = make_settings(small_disk / "data", database_url)
    big = b"".join(
        json.dumps({"prompt": f"question {i} " + "x" * 200, "completion": "y"}).encode() + b"\n"
        for i in range(5000)
    )  # ~1.1 MB
    with TestClient(create_app(settings)) as client:
        kept = upload(client).json()["id"]
        filler = fill(small_disk, leave=256 * 1024)
        for response in (
            upload(client, big),  # the copy of the upload fills the disk
            client.post("/api/datasets/detect", files={"file": ("big.jsonl", big)}),
        ):
            assert response.status_code == 507, response.text
            assert response.json()["detail"].startswith("no space left on device: ")
        filler.unlink()
        fill(small_disk, leave=len(big) + 64 * 1024)  # room for the upload, not its JSONL
        response = upload(client, big)
        assert response.status_code == 507, response.text
        filler.unlink()
        fill(small_disk)
        response = client.put("/api/settings/tinker-key", json={"api_key": "tml-" + "k" * 40})
        assert response.status_code == 507
        assert "the Tinker API key was not stored" in response.json()["detail"]
        if database_url is None:  # the database is on the full disk too
            response = client.post("/api/tokens", json={"name": "laptop"})
            assert response.status_code == 507, response.text
            assert response.json()["detail"].startswith("no space left on device")
        filler.unlink()
    leftovers = [p.name for p in settings.datasets_dir.iterdir()]
    assert leftovers == [f"{kept}.jsonl"], leftovers  # no temporary file, no partial dataset
    assert not settings.secrets_dir.exists() or not any(settings.secrets_dir.iterdir())
    with TestClient(create_app(settings)) as client:  # a restart shows only what was whole
        assert [d["id"] for d in client.get("/api/datasets").json()["data"]] == [kept]
        assert client.get("/api/tokens").json()["count"] == 0
        assert client.get("/api/settings").json()["tinker_api_key_set"] is False
        assert upload(client, big).status_code == 201  # with room again, the same upload works


def test_statistics_are_answered_when_their_cache_cannot_be_written(
    small_disk: Path, database_url: str | None
) -> None:
    settings = make_settings(small_disk / "data", database_url)
    with TestClient(create_app(settings)) as client:
        dataset = upload(client).json()["id"]
        filler = fill(small_disk)
        response = client.get(f"/api/datasets/{dataset}/stats")
        filler.unlink()
    assert response.status_code == 200 and response.json()["rows"] == 2
    assert not list(settings.datasets_dir.glob(".tmp-*"))
