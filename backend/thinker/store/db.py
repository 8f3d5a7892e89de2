"""The database: an async SQLAlchemy engine on SQLite (WAL) or PostgreSQL, migrated by Alembic.

`THINKER_DATABASE_URL` picks PostgreSQL (`postgresql+asyncpg://user:pass@host/db`); without it
the database is `<data dir>/thinker.db`. Every start-up runs the migrations up to head, so a
newer server upgrades an older data directory in place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from thinker.settings import Settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def engine_for(settings: Settings) -> AsyncEngine:
    """The engine of the settings' database: `database_url`, else SQLite in `data_dir`."""
    url = settings.database_url
    return make_engine(url.get_secret_value() if url else sqlite_url(settings.data_dir))


@asynccontextmanager
async def open_database(settings: Settings) -> AsyncIterator[async_sessionmaker[Any]]:
    """The settings' database, migrated, for one command of the CLI (no server running):
    its data directory made, then a session factory; the engine is disposed of after."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = engine_for(settings)
    try:
        await migrate(engine)
        yield session_factory(engine)
    finally:
        await engine.dispose()


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{Path(data_dir) / 'thinker.db'}"


def make_engine(url: str) -> AsyncEngine:
    """An engine for `url`; on SQLite with WAL, a busy timeout and foreign keys enforced."""
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the one writer
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint; safe with WAL
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[Any]:
    return async_sessionmaker(engine, expire_on_commit=False)


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest Alembic revision."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
