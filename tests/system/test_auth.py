"""With auth on, a real server refuses REST calls and Socket.IO handshakes without a valid
token, and accepts a token made by `thinker token create` on its data directory."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import socketio
from tests.system.server import REPO, ServerProcess

# python-socketio waits 1 s for the namespace's connect by default: too short on a loaded
# 2-core machine ("Unexpected connection error" in CI, 50 sockets connecting at once).
CONNECT_S = 30

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too


async def _connect(url: str, token: str | None) -> bool:
    sio = socketio.AsyncClient()
    try:
        await sio.connect(
            url,
            transports=["websocket"],
            wait_timeout=CONNECT_S,
            auth={"token": token} if token else None,
        )
    except socketio.exceptions.ConnectionError:
        return False
    ok = (await sio.call("join_jobs", {}))["ok"]
    await sio.disconnect()
    return bool(ok)


def test_tokens_guard_rest_and_socketio(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url, THINKER_REQUIRE_AUTH="1").start()
    try:
        created = subprocess.run(
            [sys.executable, "-m", "thinker", "token", "create", "--name", "ci"],
            env=server.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        token = created.stdout.strip()
        assert token.startswith("thk_")
        with server.client() as client:
            refused = client.get("/api/jobs")
            assert refused.status_code == 401 and "missing token" in refused.json()["detail"]
            assert client.get("/v1/models").status_code == 401
            bad = client.get("/api/jobs", headers={"Authorization": "Bearer thk_wrong"})
            assert bad.status_code == 401
            ok = client.get("/api/jobs", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
        assert asyncio.run(_connect(server.url, None)) is False
        assert asyncio.run(_connect(server.url, "thk_wrong")) is False
        assert asyncio.run(_connect(server.url, token)) is True
    finally:
        server.stop()


def test_binding_beyond_loopback_requires_tokens(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url, THINKER_HOST="0.0.0.0").start()
    try:
        with server.client() as client:
            assert client.get("/api/health").status_code == 401
    finally:
        server.stop()
