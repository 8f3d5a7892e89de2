"""Storage: SQLAlchemy tables and Alembic migrations (SQLite by default, PostgreSQL by URL)."""

from thinker.store.db import make_engine, migrate, session_factory, sqlite_url
from thinker.store.tables import ApiToken, Base, Dataset, Job, Model, Setting, new_id, now

__all__ = [
    "ApiToken",
    "Base",
    "Dataset",
    "Job",
    "Model",
    "Setting",
    "make_engine",
    "migrate",
    "new_id",
    "now",
    "session_factory",
    "sqlite_url",
]
