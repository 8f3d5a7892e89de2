"""API-tier fixtures: the real app on a real database, SQLite and (when one is running)
PostgreSQL.

Each test that takes `settings` or `client` runs once per database. The PostgreSQL runs need
`THINKER_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"` starts a server and prints it;
`./test.sh` does this); without it they are skipped, unless `THINKER_REQUIRE_POSTGRES=1`
(CI), which turns the skip into a failure. Every PostgreSQL test gets a database of its own.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from thinker.server.app import create_app
from thinker.settings import Settings

DATABASES = ["sqlite", "postgresql"]


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (SQLite in the data directory) or the URL of a fresh PostgreSQL database."""
    with fresh_database(request.param) as url:
        yield url


@contextmanager
def fresh_database(kind: str) -> Iterator[str | None]:
    """None for SQLite; for PostgreSQL, the URL of a new database, dropped afterwards."""
    if kind == "sqlite":
        yield None
        return
    admin = os.environ.get("THINKER_TEST_POSTGRES_URL")
    if not admin:
        if os.environ.get("THINKER_REQUIRE_POSTGRES") == "1":
            pytest.fail("THINKER_REQUIRE_POSTGRES=1 but THINKER_TEST_POSTGRES_URL is not set")
        pytest.skip('no PostgreSQL server (run: eval "$(scripts/postgres.sh)")')
    name = f"thinker_test_{secrets.token_hex(4)}"
    asyncio.run(_admin(admin, f'CREATE DATABASE "{name}"'))
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(_admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(url: str, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def make_settings(data_dir: Path, database_url: str | None, **overrides: object) -> Settings:
    """Settings for a test server: its own data directory, fast polling, no examples."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "register_examples": False,
        "poll_interval_s": 0.05,
        "gpus": 0,
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path, database_url: str | None) -> Settings:
    return make_settings(tmp_path / "data", database_url)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The real app (lifespan included: migrations, job manager) behind a test client."""
    with TestClient(create_app(settings)) as test_client:
        yield test_client
