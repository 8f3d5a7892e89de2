"""POST /api/datasets/import and `thinker datasets import` on the real app and a real database
(SQLite and PostgreSQL), importing datasets saved in the hub's on-disk layouts inside the
server's import directory; the hub itself is out of reach (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import socketio
import uvicorn
from datasets import Dataset
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.support.api import platform_of
from tests.support.hub import QA, TEST, TRAIN, jsonl_repo, parquet_repo, saved_dict
from tests.support.net import free_port

from thinker.cli import main as cli_main
from thinker.dataprep import hf_import
from thinker.server.app import create_app
from thinker.services import imports
from thinker.settings import Settings
from thinker.store import Dataset as DatasetRow
from thinker.store.tables import Base

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

Row = dict[str, Any]
TOKEN = "hf_TOPsecretTOKEN0123456789abcdef"
LAYOUTS = {"saved": saved_dict, "parquet": parquet_repo, "jsonl": jsonl_repo}
# What each layout's card calls its second split.
SECOND_SPLIT = {"saved": "test", "parquet": "test", "jsonl": "validation"}


@pytest.fixture
def imports_root(settings: Settings) -> Path:
    root = settings.imports_dir
    root.mkdir(parents=True)
    return root


@pytest.fixture
def app_client(settings: Settings, imports_root: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def start(client: TestClient, **body: Any) -> Row:
    response = client.post("/api/datasets/import", json=body)
    assert response.status_code == 202, response.text
    started: Row = response.json()
    assert started["state"] == "running" and started["import_id"].startswith("imp")
    return started


def finished(client: TestClient, import_id: str, timeout: float = 60) -> Row:
    """Poll the import until it has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/api/datasets/imports/{import_id}")
        assert response.status_code == 200, response.text
        record: Row = response.json()
        if record["state"] != "running":
            return record
        time.sleep(0.05)
    raise TimeoutError(f"import {import_id} still running after {timeout} s")


def imported(client: TestClient, **body: Any) -> Row:
    record = finished(client, start(client, **body)["import_id"])
    assert record["state"] == "succeeded", record
    return record


def stored_rows(client: TestClient, dataset_id: str) -> list[Row]:
    response = client.get(f"/api/datasets/{dataset_id}/download")
    assert response.status_code == 200
    return [json.loads(line) for line in response.text.splitlines()]


def dataset_row(client: TestClient, dataset_id: str) -> DatasetRow:
    async def read() -> DatasetRow:
        async with platform_of(client).sessions() as session:
            row = await session.get(DatasetRow, dataset_id)
            assert row is not None
            return row

    return client.portal.call(read)  # type: ignore[union-attr,no-any-return]


def database_text(client: TestClient) -> str:
    """Every row of every table, as text: what a token kept in the database would be in."""

    async def dump() -> str:
        async with platform_of(client).engine.connect() as connection:
            parts = []
            for table in Base.metadata.sorted_tables:
                rows = (await connection.execute(select(table))).all()
                parts.extend(repr(tuple(row)) for row in rows)
            return "\n".join(parts)

    return client.portal.call(dump)  # type: ignore[union-attr,no-any-return]


def as_problems(rows: list[Row]) -> list[Row]:
    return [{"prompt": r["question"], "answer": r["answer"]} for r in rows]


# ---- importing each layout ---------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_import_each_layout_with_proposed_mapping(
    app_client: TestClient, imports_root: Path, layout: str
) -> None:
    """question/answer columns are proposed as an RL problem (prompt + answer)."""
    source = LAYOUTS[layout](imports_root).name
    record = imported(app_client, source=source, split="train")
    assert record["rows_done"] == record["rows_total"] == len(TRAIN)
    assert record["stage"] is None and record["error"] is None
    dataset = app_client.get(f"/api/datasets/{record['dataset_id']}").json()
    assert dataset["kind"] == "problems" and dataset["num_rows"] == len(TRAIN)
    assert dataset["name"] == f"{source}/train"
    assert stored_rows(app_client, record["dataset_id"]) == as_problems(TRAIN)
    assert (record["kind"], record["mapping"]) == ("problems", {"prompt": "question"})
    assert any("`answer` holds short answers" in s for s in record["suggestions"])
    row = dataset_row(app_client, record["dataset_id"])
    assert row.mapping == {"prompt": "question"}
    assert row.origin is not None and row.origin["hf"]["path"] == source
    assert row.origin["hf"]["splits"] == {"train": len(TRAIN)}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_all_splits_into_one_dataset(
    app_client: TestClient, imports_root: Path, layout: str
) -> None:
    source = LAYOUTS[layout](imports_root).name
    record = imported(app_client, source=source, split="all")
    assert stored_rows(app_client, record["dataset_id"]) == as_problems(TRAIN + TEST)
    origin = dataset_row(app_client, record["dataset_id"]).origin
    assert origin is not None
    assert origin["hf"]["splits"] == {"train": len(TRAIN), SECOND_SPLIT[layout]: len(TEST)}


def test_explicit_mapping_kind_name_and_limit(app_client: TestClient, imports_root: Path) -> None:
    source = parquet_repo(imports_root).name
    record = imported(
        app_client,
        source=source,
        limit=7,
        kind="prompt_completion",
        mapping={"prompt": "question", "completion": "answer"},
        name="sums",
    )
    assert record["rows_done"] == record["rows_total"] == 7  # Parquet knows its size
    expected = [{"prompt": r["question"], "completion": r["answer"]} for r in QA[:7]]
    assert stored_rows(app_client, record["dataset_id"]) == expected
    dataset = app_client.get(f"/api/datasets/{record['dataset_id']}").json()
    assert (dataset["kind"], dataset["name"]) == ("prompt_completion", "sums")


def test_named_config(app_client: TestClient, imports_root: Path) -> None:
    source = jsonl_repo(imports_root).name
    record = imported(
        app_client,
        source=source,
        config="instruct",
        mapping={"prompt": "instruction", "completion": "output"},
        kind="prompt_completion",
    )
    expected = [{"prompt": "hi", "completion": "hello"}]
    assert stored_rows(app_client, record["dataset_id"]) == expected


def test_rows_that_do_not_fit_the_kind_fail_with_their_lines(
    app_client: TestClient, imports_root: Path, settings: Settings
) -> None:
    source = saved_dict(imports_root).name
    record = finished(app_client, start(app_client, source=source, kind="chat")["import_id"])
    assert record["state"] == "failed" and record["dataset_id"] is None
    assert record["error_count"] == len(QA) and record["errors"][0]["line"] == 1
    assert app_client.get("/api/datasets").json()["count"] == 0
    assert [p.name for p in settings.datasets_dir.iterdir()] == []  # no temporary file left


# ---- errors ------------------------------------------------------------------------------


def test_unknown_split_and_config_list_what_exists(
    app_client: TestClient, imports_root: Path
) -> None:
    source = jsonl_repo(imports_root).name
    record = finished(app_client, start(app_client, source=source, split="dev")["import_id"])
    assert record["state"] == "failed"
    assert "no split 'dev'; available: train, validation" in record["error"]
    record = finished(app_client, start(app_client, source=source, config="chat")["import_id"])
    assert "no config 'chat'; available: default, instruct" in record["error"]


def test_offline_hub_id_fails_at_once(app_client: TestClient) -> None:
    began = time.monotonic()
    started = start(app_client, source="openai/gsm8k", config="main", split="train")
    record = finished(app_client, started["import_id"], timeout=5)
    assert time.monotonic() - began < 2
    assert record["state"] == "failed" and "offline mode is on" in record["error"]


@pytest.mark.parametrize(
    "source", ["../datasets", "/etc", "./missing", "a/b/c", "org/../../x", "outside"]
)
def test_sources_outside_the_imports_dir_are_refused(
    app_client: TestClient, imports_root: Path, source: str
) -> None:
    (imports_root / "outside").symlink_to(imports_root.parent)
    response = app_client.post("/api/datasets/import", json={"source": source})
    assert response.status_code == 422, response.text
    assert (
        "import directory" in response.json()["detail"] or "no dataset" in response.json()["detail"]
    )


def test_bad_fields_are_refused(app_client: TestClient) -> None:
    bad = [
        {"source": "org/x", "split": "train[:10]"},
        {"source": "org/x", "config": "a b"},
        {"source": "org/x", "limit": 0},
        {"source": "org/x", "unknown": 1},
        {"source": "org/x", "limit": 10**9},  # over THINKER_MAX_ROWS
    ]
    for body in bad:
        assert app_client.post("/api/datasets/import", json=body).status_code == 422, body
    assert app_client.get("/api/datasets/imports/imp_nothing").status_code == 404


def test_the_token_is_never_echoed_nor_stored(
    app_client: TestClient, imports_root: Path, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    source = parquet_repo(imports_root).name
    seen: list[str] = []
    for body in (
        {"source": source, "token": TOKEN},
        {"source": "openai/gsm8k", "config": "main", "token": TOKEN},  # fails: offline
        {"source": source, "split": "dev", "token": TOKEN},  # fails: unknown split
    ):
        response = app_client.post("/api/datasets/import", json=body)
        seen.append(response.text)
        record = finished(app_client, response.json()["import_id"])
        seen.append(app_client.get(f"/api/datasets/imports/{record['import_id']}").text)
    assert json.loads(seen[1])["state"] == "succeeded"
    seen += [app_client.get("/api/datasets").text, database_text(app_client)]
    seen += [r.getMessage() for r in caplog.records]
    assert all(TOKEN not in text for text in seen)
    for path in settings.data_dir.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path


def test_shutdown_stops_a_running_import_and_keeps_nothing(
    app_client: TestClient,
    imports_root: Path,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hf_import, "CHUNK_ROWS", 50)  # 1,000 batches: still reading when stopped
    data = [{"question": f"{i}+1", "answer": str(i + 1)} for i in range(50_000)]
    Dataset.from_list(data).save_to_disk(str(imports_root / "big"))
    import_id = start(app_client, source="big")["import_id"]
    platform = app_client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]
    app_client.portal.call(platform.imports.stop)  # type: ignore[union-attr]
    record = finished(app_client, import_id)
    assert record["state"] == "failed" and "stopped" in record["error"]
    assert app_client.get("/api/datasets").json()["count"] == 0
    assert list(settings.datasets_dir.iterdir()) == []


# ---- progress over Socket.IO -------------------------------------------------------------


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The app under uvicorn in a thread of this process."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


async def watch_import(url: str, body: Row) -> tuple[Row, list[Row]]:
    """Join the imports room, start an import, collect its events until it ends."""
    events: list[Row] = []
    ended = asyncio.Event()
    client = socketio.AsyncClient()

    @client.on("dataset_import")
    async def on_import(data: Row) -> None:
        events.append(data)
        if data["state"] != "running":
            ended.set()

    await client.connect(url)
    try:
        assert await client.call("join_imports", {}) == {"ok": True}
        async with httpx.AsyncClient(base_url=url) as http:
            response = await http.post("/api/datasets/import", json=body)
        assert response.status_code == 202, response.text
        await asyncio.wait_for(ended.wait(), 60)
    finally:
        await client.disconnect()
    return response.json(), events


def test_progress_events_over_socketio(
    settings: Settings, imports_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = 40_000
    monkeypatch.setattr(hf_import, "CHUNK_ROWS", 500)
    monkeypatch.setattr(imports, "REPORT_INTERVAL_S", 0.005)
    data = [{"question": f"{i}+1", "answer": str(i + 1)} for i in range(rows)]
    Dataset.from_list(data).save_to_disk(str(imports_root / "big"))
    with serving(create_app(settings)) as url:
        started, events = asyncio.run(watch_import(url, {"source": "big"}))
    mine = [e for e in events if e["import_id"] == started["import_id"]]
    assert mine[0]["state"] == "running" and mine[0]["rows_done"] == 0
    assert mine[-1]["state"] == "succeeded" and mine[-1]["rows_done"] == rows
    assert mine[-1]["dataset_id"] is not None
    done = [e["rows_done"] for e in mine]
    assert done == sorted(done)  # progress only goes forward
    assert any(0 < n < rows for n in done), done  # seen mid-way, not just start and end
    assert all(e["rows_total"] in (None, rows) for e in mine)


# ---- the CLI -----------------------------------------------------------------------------


def test_cli_import_prints_the_id_with_a_progress_bar(
    settings: Settings,
    imports_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if settings.database_url is not None:
        monkeypatch.setenv("THINKER_DATABASE_URL", settings.database_url.get_secret_value())
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    repo = parquet_repo(imports_root.parent / "anywhere")  # the CLI reads any local directory
    argv = [str(repo), "--split", "test", "--map", "prompt=question", "--map", "answer=answer"]
    argv += ["--kind", "problems", "--data-dir", str(settings.data_dir)]
    code = cli_main(["datasets", "import", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    dataset_id = out.strip()
    assert dataset_id.startswith("ds") and "\n" not in dataset_id
    assert "importing" in err and f"{len(TEST)}/{len(TEST)}" in err  # tqdm's bar, finished
    assert TOKEN not in out + err
    with TestClient(create_app(settings)) as client:  # the server sees what the CLI stored
        assert stored_rows(client, dataset_id) == as_problems(TEST)


def test_cli_errors_exit_2_with_the_reason(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if settings.database_url is not None:
        monkeypatch.setenv("THINKER_DATABASE_URL", settings.database_url.get_secret_value())
    data_dir = ["--data-dir", str(settings.data_dir)]
    assert cli_main(["datasets", "import", "openai/gsm8k", "--config", "main", *data_dir]) == 2
    assert "offline mode is on" in capsys.readouterr().err
    assert cli_main(["datasets", "import", "not a source", *data_dir]) == 2
    assert "neither a directory nor a hub id" in capsys.readouterr().err
    both_splits = ["org/x", "--split", "a", "--all-splits"]
    assert cli_main(["datasets", "import", *both_splits]) == 2  # argparse refuses
