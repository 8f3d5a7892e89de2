"""Platform tests: a real server process, real workers, the tiny model; SQLite and PostgreSQL."""

from tests.api.conftest import database_url  # noqa: F401 (the fixture, for both databases)
