"""The platform: what one server process owns, started and stopped with the app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from thinker.server.settings import Settings
from thinker.store import make_engine, migrate, session_factory, sqlite_url

if TYPE_CHECKING:
    import socketio

    from thinker.jobs.manager import JobManager
    from thinker.server.events import EventHub
    from thinker.server.pool import ModelPool


@dataclass
class Platform:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[Any]
    sio: socketio.AsyncServer
    hub: EventHub = field(init=False)
    jobs: JobManager = field(init=False)
    pool: ModelPool = field(init=False)

    @classmethod
    async def start(cls, settings: Settings, sio: socketio.AsyncServer) -> Platform:
        """Create the data directory, migrate the database, then start the job machinery."""
        from thinker.jobs.manager import JobManager
        from thinker.server.datasets import register_examples
        from thinker.server.events import EventHub
        from thinker.server.pool import ModelPool

        for directory in (settings.data_dir, settings.runs_dir, settings.datasets_dir):
            directory.mkdir(parents=True, exist_ok=True)
        url = settings.database_url
        engine = make_engine(url.get_secret_value() if url else sqlite_url(settings.data_dir))
        await migrate(engine)
        platform = cls(settings, engine, session_factory(engine), sio)
        if settings.register_examples:
            await register_examples(platform)
        platform.hub = EventHub(platform)
        platform.hub.start()
        platform.pool = ModelPool(platform)
        platform.jobs = JobManager(platform)
        await platform.jobs.start()
        return platform

    async def stop(self) -> None:
        """Stop watching workers (they keep running: a restart reattaches) and close up."""
        await self.jobs.stop()
        await self.hub.stop()
        await self.pool.close()
        await self.engine.dispose()
