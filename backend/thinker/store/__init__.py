"""Storage: SQLAlchemy tables and Alembic migrations (SQLite by default, PostgreSQL by URL)."""

from thinker.store.db import (
    engine_for,
    make_engine,
    migrate,
    open_database,
    session_factory,
    sqlite_url,
)
from thinker.store.tables import (
    ApiToken,
    Base,
    Dataset,
    Deployment,
    Job,
    Model,
    ReviewAnswer,
    Setting,
    new_id,
    now,
)

__all__ = [
    "ApiToken",
    "Base",
    "Dataset",
    "Deployment",
    "Job",
    "Model",
    "ReviewAnswer",
    "Setting",
    "engine_for",
    "make_engine",
    "migrate",
    "new_id",
    "now",
    "open_database",
    "session_factory",
    "sqlite_url",
]
