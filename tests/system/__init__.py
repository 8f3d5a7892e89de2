"""Platform tests: a real server process, real workers, the tiny model; SQLite and PostgreSQL."""
