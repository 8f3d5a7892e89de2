"""Alembic environment: migrations run on the connection `thinker.store.db.migrate` passes in."""

from alembic import context

from thinker.store.tables import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run migrations through thinker.store.db.migrate (the server does at start-up)"
    )
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying
)
with context.begin_transaction():
    context.run_migrations()
