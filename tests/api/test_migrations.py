"""Migrations upgrade a database that already holds data, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection

from thinker.store import make_engine, migrate, sqlite_url
from thinker.store.db import alembic_config

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too


def _to(revision: str) -> object:
    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    return run


async def _upgrade_with_a_dataset(url: str) -> list[tuple[object, ...]]:
    engine = make_engine(url)
    async with engine.begin() as connection:
        await connection.run_sync(_to("0001"))
        await connection.execute(
            text(
                "INSERT INTO datasets (id, name, kind, source_format, filename, num_rows, "
                "size_bytes, sha256, builtin, created_at) VALUES ('ds_000000000001', 'old', "
                "'chat', 'jsonl', 'old.jsonl', 3, 10, 'abc', false, 1.0)"
            )
        )
    await migrate(engine)  # to head
    async with engine.connect() as connection:
        rows = (
            await connection.execute(text("SELECT id, version, root_id, parent_id FROM datasets"))
        ).all()
    await engine.dispose()
    return [tuple(r) for r in rows]


def test_existing_datasets_become_version_1(tmp_path: Path, database_url: str | None) -> None:
    url = database_url or sqlite_url(tmp_path)
    assert asyncio.run(_upgrade_with_a_dataset(url)) == [("ds_000000000001", 1, None, None)]
