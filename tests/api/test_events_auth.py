"""The token check under load: a token's last_used_at is written at most once a minute (not
once a request), and a revoked token is refused from its next request on."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from tests.support.api import make_settings

from thinker.cli import main as cli_main
from thinker.server.app import create_app
from thinker.server.platform import Platform
from thinker.services.tokens import TOKEN_TOUCH_S
from thinker.store import ApiToken

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too


def _call(client: TestClient, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
    """Run `fn(platform, *args)` on the app's event loop (its engine is bound to that loop)."""
    platform = client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]
    return client.portal.call(fn, platform, *args)  # type: ignore[union-attr]


async def _last_used(platform: Platform) -> float | None:
    async with platform.sessions() as session:
        return await session.scalar(select(ApiToken.last_used_at))


async def _set_last_used(platform: Platform, at: float) -> None:
    async with platform.sessions() as session:
        await session.execute(update(ApiToken).values(last_used_at=at))
        await session.commit()


def test_last_used_at_is_written_once_a_minute_and_revocation_is_immediate(
    tmp_path: Path,
    database_url: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data_dir = tmp_path / "data"
    if database_url is not None:  # how `thinker token` finds the server's PostgreSQL
        monkeypatch.setenv("THINKER_DATABASE_URL", database_url)
    settings = make_settings(data_dir, database_url, require_auth=True)
    with TestClient(create_app(settings)) as client:
        assert cli_main(["token", "create", "--name", "ci", "--data-dir", str(data_dir)]) == 0
        auth = {"Authorization": f"Bearer {capsys.readouterr().out.strip()}"}
        assert _call(client, _last_used) is None

        assert client.get("/api/health", headers=auth).status_code == 200
        first = _call(client, _last_used)
        assert first is not None
        for _ in range(5):  # within the minute: read, not written
            assert client.get("/api/jobs", headers=auth).status_code == 200
        assert _call(client, _last_used) == first

        stale = first - TOKEN_TOUCH_S - 1
        _call(client, _set_last_used, stale)
        assert client.get("/api/jobs", headers=auth).status_code == 200
        assert _call(client, _last_used) > stale  # a minute on: written again

        token_id = client.get("/api/tokens", headers=auth).json()["data"][0]["id"]
        assert cli_main(["token", "revoke", token_id, "--data-dir", str(data_dir)]) == 0
        refused = client.get("/api/jobs", headers=auth)
        assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
