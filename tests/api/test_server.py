"""The app as a whole: health, the OpenAPI document a client is generated from, CORS."""

from __future__ import annotations

import asyncio

import pytest
import socketio
from fastapi.testclient import TestClient

from thinker.server.platform import Platform
from thinker.settings import Settings

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too


def test_health_names_the_database(client: TestClient) -> None:
    body = client.get("/api/health").json()
    assert body["status"] == "ok" and body["database"] in ("sqlite", "postgresql")
    assert body["auth_required"] is False and body["queued_jobs"] == 0


def test_openapi_operation_ids_are_the_handler_names(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids)), "operation ids must be unique for a generated client"
    for expected in (
        "read_health",
        "create_dataset",
        "create_job",
        "read_jobs",
        "cancel_job",
        "read_models",
        "export_model",
        "create_sample",
        "create_chat_completion",
        "update_tinker_key",
        "create_token",
    ):
        assert expected in ids
    assert all(
        op.get("description") or op.get("summary")
        for p in spec["paths"].values()
        for op in p.values()
    )


def test_cors_allows_only_the_configured_origins(client: TestClient) -> None:
    headers = {"Access-Control-Request-Method": "POST"}
    allowed = client.options("/api/jobs", headers={**headers, "Origin": "http://localhost:5173"})
    assert allowed.headers.get("access-control-allow-origin") == "http://localhost:5173"
    refused = client.options("/api/jobs", headers={**headers, "Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in refused.headers


def test_the_dashboard_is_served_with_its_client_routes(tmp_path, database_url) -> None:
    from tests.support.api import make_settings

    from thinker.server.app import create_app

    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<div id=root></div>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    settings = make_settings(tmp_path / "data", database_url, static_dir=dist)
    with TestClient(create_app(settings)) as client:
        assert client.get("/").text == "<div id=root></div>"
        assert client.get("/training/job_0123").text == "<div id=root></div>"  # a client route
        assert client.get("/assets/app.js").text == "console.log(1)"
        assert client.get("/assets/missing.js").status_code == 404
        assert client.get("/api/health").json()["status"] == "ok"
        assert client.get("/api/nope").status_code == 404


def test_the_server_stops_when_a_wake_and_the_stop_coincide(settings: Settings) -> None:
    """Shutting down right as the job manager is woken (a job's event, a request): Python
    3.11's `asyncio.wait_for` loses a cancel that lands as the event it waits on is set, and
    the manager's loop then ran on with the shutdown waiting for it forever (a CI run hung
    in a test's teardown). Here both land in the same turn of the loop, every time."""

    async def start_then_stop() -> None:
        platform = await Platform.start(settings, socketio.AsyncServer(async_mode="asgi"))
        await asyncio.sleep(0.2)  # the manager's loop is waiting for a wake or its poll
        platform.jobs.wake()
        # Shielded: on the timeout the stop is not cancelled (its own await would take the
        # cancel for the loop's and return), so a hang fails the test.
        await asyncio.wait_for(asyncio.shield(platform.stop()), timeout=30)

    asyncio.run(start_then_stop())
