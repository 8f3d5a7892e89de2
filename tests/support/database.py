"""The databases the storage, API and platform tests run on: SQLite and, when a server is
given, PostgreSQL, with a fresh database for each test."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DATABASES = ["sqlite", "postgresql"]


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
