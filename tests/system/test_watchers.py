"""Socket.IO watchers against a real server process: many clients joining a training job at
once each get every event exactly once, and revoking a token disconnects its sockets and
keeps them out of rooms. On SQLite (see `database_url`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import socketio
from tests.system.server import ARITHMETIC, REPO, ServerProcess, upload, wait_for

# python-socketio waits 1 s for the namespace's connect by default: too short on a loaded
# 2-core machine ("Unexpected connection error" in CI, 50 sockets connecting at once).
CONNECT_S = 30

WATCHERS = 50
FINAL = ("succeeded", "failed", "cancelled")


class Watcher:
    """A Socket.IO client that records a job's events and whether the server dropped it."""

    def __init__(self, token: str | None = None, batch: bool = False) -> None:
        self.sio = socketio.AsyncClient(reconnection=False)
        self.token = token
        self.batch = batch  # join with `batch: true`: events come as `job_events` lists
        self.seqs: list[int] = []
        self.messages = 0
        self.longest = 0  # the most events one message carried
        self.finished = asyncio.Event()
        self.dropped = asyncio.Event()
        self.sio.on("job_events" if batch else "job_event", self._on_message)
        self.sio.on("disconnect", lambda *reason: self.dropped.set())

    async def _on_message(self, data: Any) -> None:
        self.messages += 1
        events = data if self.batch else [data]
        self.longest = max(self.longest, len(events))
        for event in events:
            await self._on_event(event)

    async def _on_event(self, event: dict[str, Any]) -> None:
        self.seqs.append(event["seq"])
        if event["type"] == "state" and event["data"]["state"] in FINAL:
            self.finished.set()

    async def connect(self, url: str) -> None:
        auth = {"token": self.token} if self.token else None
        await self.sio.connect(url, transports=["websocket"], wait_timeout=CONNECT_S, auth=auth)


def _token(server: ServerProcess, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "thinker", "token", *command],
        env=server.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _token_id(server: ServerProcess, token: str) -> str:
    with server.client(headers=_bearer(token)) as client:
        rows = client.get("/api/tokens").json()["data"]
    return str(next(r["id"] for r in rows if token.startswith(r["prefix"])))


async def _watch_concurrently(url: str, job_id: str) -> list[Watcher]:
    watchers = [Watcher(batch=i % 2 == 1) for i in range(WATCHERS)]  # half as the dashboard
    await asyncio.gather(*(w.connect(url) for w in watchers))
    joins = [{"job_id": job_id, "after_seq": 0, "batch": w.batch} for w in watchers]
    calls = (
        w.sio.call("join_job", join, timeout=120) for w, join in zip(watchers, joins, strict=True)
    )
    acks = await asyncio.gather(*calls)
    assert all(ack["ok"] for ack in acks), acks
    await asyncio.wait_for(asyncio.gather(*(w.finished.wait() for w in watchers)), 300)
    await asyncio.gather(*(w.sio.disconnect() for w in watchers))
    return watchers


def test_concurrent_joins_get_every_event_once(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url).start()
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            config = {"max_steps": 60, "save_every": 0, "eval_every": 0}
            response = client.post(
                "/api/jobs", json={"algorithm": "sl", "dataset_id": dataset_id, "config": config}
            )
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]
            wait_for(client, job_id, ("running",), min_step=1)  # joins meet a live job

            watchers = asyncio.run(_watch_concurrently(server.url, job_id))

            last_seq = client.get(f"/api/jobs/{job_id}").json()["last_seq"]
            for watcher in watchers:
                assert watcher.seqs == list(range(1, last_seq + 1))
                if not watcher.batch:
                    assert watcher.messages == last_seq
            # The replay of a running job (its state, plan and first metrics) is one list.
            assert all(w.longest >= 3 for w in watchers if w.batch)
    finally:
        server.stop()


async def _revoked_elsewhere(server: ServerProcess, token: str) -> tuple[bool, Any]:
    """Connect with `token`, revoke it with the CLI; was the socket dropped, and what did a
    join get meanwhile (an ack refusing it, or nothing because it was already dropped)?"""
    watcher = Watcher(token)
    await watcher.connect(server.url)
    assert (await watcher.sio.call("join_jobs", {}))["ok"]
    token_id = await asyncio.to_thread(_token_id, server, token)
    await asyncio.to_thread(_token, server, "revoke", token_id)
    try:
        ack: Any = await watcher.sio.call("join_jobs", {}, timeout=30)
    except (socketio.exceptions.TimeoutError, socketio.exceptions.BadNamespaceError):
        ack = None  # dropped by the sweep before it could ask
    await asyncio.wait_for(watcher.dropped.wait(), 60)
    return watcher.dropped.is_set(), ack


async def _revoked_by_api(url: str, token: str, admin: str) -> bool:
    """Connect with `token`, revoke it through the API with `admin`: is the socket dropped?"""
    watcher = Watcher(token)
    await watcher.connect(url)
    assert (await watcher.sio.call("join_jobs", {}))["ok"]
    async with httpx.AsyncClient(base_url=url, headers=_bearer(admin)) as client:
        rows = (await client.get("/api/tokens")).json()["data"]
        token_id = next(r["id"] for r in rows if token.startswith(r["prefix"]))
        assert (await client.delete(f"/api/tokens/{token_id}")).status_code == 200
    await asyncio.wait_for(watcher.dropped.wait(), 60)
    return not watcher.sio.connected


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_revoking_a_token_closes_its_sockets(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url, THINKER_REQUIRE_AUTH="1").start()
    try:
        admin = _token(server, "create", "--name", "admin")
        watched = _token(server, "create", "--name", "watcher")
        assert asyncio.run(_revoked_by_api(server.url, watched, admin))

        cli = _token(server, "create", "--name", "cli")
        dropped, ack = asyncio.run(_revoked_elsewhere(server, cli))
        assert dropped
        assert ack is None or ack == {"ok": False, "error": "the token was revoked"}

        # Reconnecting with the revoked token is refused; the other token still works.
        refused = socketio.AsyncClient(reconnection=False)
        try:
            asyncio.run(
                refused.connect(
                    server.url,
                    transports=["websocket"],
                    wait_timeout=CONNECT_S,
                    auth={"token": cli},
                )
            )
            raise AssertionError("a revoked token connected")
        except socketio.exceptions.ConnectionError:
            pass
        with server.client(headers=_bearer(admin)) as client:
            assert client.get("/api/jobs").status_code == 200
    finally:
        server.stop()
