"""Settings, the stored Tinker key (never returned) and API tokens (hashed, revocable)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.support.api import make_settings

from thinker.cli import main as cli_main
from thinker.errors import ConfigError
from thinker.secrets import delete_secret, read_secret, write_secret
from thinker.server.app import create_app
from thinker.server.platform import Platform
from thinker.services.tokens import hash_token
from thinker.settings import Settings
from thinker.store import ApiToken

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

KEY = "tml-Zq8SECRETkey0123456789abcdef"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _call(client: TestClient, fn: Callable[[Platform], Coroutine[Any, Any, Any]]) -> Any:
    """Run `fn(platform)` on the app's event loop (its engine is bound to that loop)."""
    platform = client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]
    return client.portal.call(fn, platform)  # type: ignore[union-attr]


# ---- secrets -----------------------------------------------------------------------------
def test_secret_files_are_private_and_replaced_whole(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None)
    old_umask = os.umask(0o000)  # even a permissive umask must not loosen the modes
    try:
        write_secret(settings, "tinker_api_key", "first")
        write_secret(settings, "tinker_api_key", KEY)
    finally:
        os.umask(old_umask)
    path = settings.secrets_dir / "tinker_api_key"
    assert _mode(path) == 0o600 and _mode(settings.secrets_dir) == 0o700
    assert read_secret(settings, "tinker_api_key") == KEY
    assert os.listdir(settings.secrets_dir) == ["tinker_api_key"]  # no temp file left
    assert delete_secret(settings, "tinker_api_key") is True
    assert read_secret(settings, "tinker_api_key") is None
    assert delete_secret(settings, "tinker_api_key") is False
    for name in ("openai_key", "../thinker.db", "tinker_api_key/x"):
        with pytest.raises(ConfigError, match="unknown secret"):
            write_secret(settings, name, "x")


# ---- settings and the Tinker key ---------------------------------------------------------
def test_read_settings(client: TestClient, settings: Settings, database_url: str | None) -> None:
    body = client.get("/api/settings").json()
    assert body["database"] == ("sqlite" if database_url is None else "postgresql")
    assert body["tinker_api_key_set"] is False and body["auth_required"] is False
    assert body["host"] == "127.0.0.1" and body["port"] == 8000
    assert Path(body["data_dir"]) == settings.data_dir
    assert body["model_pool_size"] == settings.model_pool_size


def test_tinker_key_is_stored_never_returned(
    client: TestClient, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        put = client.put("/api/settings/tinker-key", json={"api_key": KEY})
    assert put.status_code == 200 and put.json() == {"tinker_api_key_set": True}
    read = client.get("/api/settings")
    assert read.json()["tinker_api_key_set"] is True
    for text in (put.text, read.text, caplog.text):
        assert "SECRET" not in text
    assert read_secret(settings, "tinker_api_key") == KEY  # what Tinker jobs will use
    assert _mode(settings.secrets_dir / "tinker_api_key") == 0o600
    deleted = client.delete("/api/settings/tinker-key")
    assert deleted.json() == {"tinker_api_key_set": False}
    assert client.get("/api/settings").json()["tinker_api_key_set"] is False
    assert not (settings.secrets_dir / "tinker_api_key").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"api_key": "tml-SECRET part"},  # whitespace: a bad paste
        {"api_key": "tml-SECRET\x00part"},
        {"api_key": "tml-SECRET" + "x" * 600},
        {"api_key": ""},
        {"apikey": KEY},  # misnamed field: the key must not come back as "unknown field"
        {"api_key": KEY, "extra": KEY},
    ],
)
def test_bad_tinker_keys_are_refused_without_echo(
    client: TestClient, settings: Settings, body: dict[str, str]
) -> None:
    response = client.put("/api/settings/tinker-key", json=body)
    assert response.status_code == 422
    assert "api_key" in response.json()["detail"] or "extra" in response.json()["detail"]
    assert "SECRET" not in response.text
    assert read_secret(settings, "tinker_api_key") is None  # nothing stored


# ---- API tokens --------------------------------------------------------------------------
def test_token_routes_validate(client: TestClient) -> None:
    assert client.post("/api/tokens", json={"name": ""}).status_code == 422
    assert client.post("/api/tokens", json={"name": "x", "scope": "all"}).status_code == 422
    missing = client.delete("/api/tokens/tok_ffffffffffff")
    assert missing.status_code == 404 and "tok_ffffffffffff" in missing.json()["detail"]


def test_tokens_guard_every_call(
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
        _refuses_without_a_good_header(client)

        # A token from the command line, against the same data directory, is accepted.
        assert cli_main(["token", "create", "--name", "ci", "--data-dir", str(data_dir)]) == 0
        out = capsys.readouterr()
        cli_token = out.out.strip()
        assert cli_token.startswith("thk_") and "cannot be shown again" in out.err
        cli_auth = {"Authorization": f"Bearer {cli_token}"}
        assert client.get("/api/health", headers=cli_auth).json()["auth_required"] is True

        created = client.post("/api/tokens", json={"name": "dashboard"}, headers=cli_auth)
        assert created.status_code == 201
        api_token, api_id = created.json()["token"], created.json()["id"]
        api_auth = {"Authorization": f"Bearer {api_token}"}
        listed = client.get("/api/tokens", headers=api_auth)
        assert listed.json()["count"] == 2
        assert cli_token not in listed.text and api_token not in listed.text
        assert {t["prefix"] for t in listed.json()["data"]} == {cli_token[:12], api_token[:12]}
        assert all("token_hash" not in t and "token" not in t for t in listed.json()["data"])

        async def stored(platform: Platform) -> list[tuple[str, str, str]]:
            async with platform.sessions() as session:
                rows = await session.scalars(select(ApiToken))
                return [(r.token_hash, r.prefix, r.name) for r in rows]

        rows = _call(client, stored)
        assert sorted(h for h, _, _ in rows) == sorted(map(hash_token, (cli_token, api_token)))
        assert not [r for r in rows if cli_token in str(r) or api_token in str(r)]

        revoked = client.delete(f"/api/tokens/{api_id}", headers=cli_auth)
        assert revoked.status_code == 200 and revoked.json()["revoked"] is True
        refused = client.get("/api/models", headers=api_auth)
        assert refused.status_code == 401 and "revoked" in refused.json()["detail"]

        cli_id = next(t["id"] for t in listed.json()["data"] if t["name"] == "ci")
        assert cli_main(["token", "list", "--data-dir", str(data_dir)]) == 0
        table = capsys.readouterr().out
        assert cli_id in table and api_id in table and "revoked" in table
        assert cli_token not in table
        assert cli_main(["token", "revoke", cli_id, "--data-dir", str(data_dir)]) == 0
        assert client.get("/api/health", headers=cli_auth).status_code == 401


def _refuses_without_a_good_header(client: TestClient) -> None:
    missing = client.get("/api/health")
    assert missing.status_code == 401 and "missing token" in missing.json()["detail"]
    assert missing.headers["www-authenticate"] == "Bearer"
    for header in ("Token abc", "Bearer", "Bearer   ", "thk_abc"):
        response = client.get("/api/models", headers={"Authorization": header})
        assert response.status_code == 401, header
        assert "malformed" in response.json()["detail"]
    unknown = client.get("/api/settings", headers={"Authorization": "Bearer thk_nope"})
    assert unknown.status_code == 401 and "unknown" in unknown.json()["detail"]
    assert client.post("/api/tokens", json={"name": "sneaky"}).status_code == 401


def test_exposed_host_requires_a_token(tmp_path: Path, database_url: str | None) -> None:
    settings = make_settings(tmp_path / "data", database_url, host="0.0.0.0")
    with TestClient(create_app(settings)) as client:
        response = client.get("/api/settings")
        assert response.status_code == 401 and "thinker token create" in response.json()["detail"]
        assert client.put("/api/settings/tinker-key", json={"api_key": KEY}).status_code == 401
        assert read_secret(settings, "tinker_api_key") is None


def test_token_cli_refuses_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("THINKER_DATABASE_URL", raising=False)
    data_dir = str(tmp_path / "data")
    assert cli_main(["token"]) == 2
    assert cli_main(["token", "create", "--data-dir", data_dir]) == 2  # no --name
    assert cli_main(["token", "create", "--name", "  ", "--data-dir", data_dir]) == 2
    assert cli_main(["token", "revoke", "tok_ffffffffffff", "--data-dir", data_dir]) == 2
    err = capsys.readouterr().err
    assert "token name" in err and "no API token 'tok_ffffffffffff'" in err
    assert cli_main(["token", "list", "--data-dir", data_dir]) == 0
    assert "no API tokens" in capsys.readouterr().err
