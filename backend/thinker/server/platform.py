"""The platform: what one server process owns, started and stopped with the app.

It is where the server's parts are put together: the database, the dataset service, the
Socket.IO hub, the model pool, the imports, the job manager and the deployments' production
loop, each given what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import socketio
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from thinker.jobs.executor import Executor, LocalExecutor
from thinker.jobs.manager import JobManager
from thinker.server.events import IMPORT_EVENT, IMPORTS_ROOM, EventHub
from thinker.server.pool import ModelPool
from thinker.services.datasets import DatasetService
from thinker.services.deployments import Deployments
from thinker.services.imports import Imports
from thinker.services.sdk_runs import SdkRuns
from thinker.services.tinker_wire import TinkerWire
from thinker.settings import Settings
from thinker.store import engine_for, migrate, session_factory


@dataclass
class Platform:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[Any]
    sio: socketio.AsyncServer
    datasets: DatasetService
    hub: EventHub
    pool: ModelPool
    imports: Imports
    jobs: JobManager
    wire: TinkerWire  # the Tinker SDK's clients (routes/tinker_api.py)
    deployments: Deployments  # served names and their production loop
    _loop: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, settings: Settings, sio: socketio.AsyncServer) -> Platform:
        """Create the data directory, migrate the database, then start the job machinery."""
        for directory in (settings.data_dir, settings.runs_dir, settings.datasets_dir):
            directory.mkdir(parents=True, exist_ok=True)
        engine = engine_for(settings)
        await migrate(engine)
        sessions = session_factory(engine)
        datasets = DatasetService(settings, sessions)
        if settings.register_examples:
            await datasets.register_examples()
        hub = EventHub(sio, sessions, settings.runs_dir)
        hub.start()
        pool = ModelPool(settings, sessions)

        async def emit_import(record: dict[str, Any]) -> None:
            await sio.emit(IMPORT_EVENT, record, room=IMPORTS_ROOM)

        jobs = JobManager(
            settings,
            sessions,
            sink=hub,
            executor=_executor(settings),
            dataset_path=datasets.path,
            forget_models=pool.forget_all,
        )
        imports = Imports(datasets, emit_import)
        storage = settings.data_dir / "tinker"
        runs = SdkRuns(jobs, asyncio.get_running_loop(), storage)
        wire = TinkerWire(storage, runs=runs)
        deployments = Deployments(settings.data_dir / "deployments", sessions, jobs, datasets)
        platform = cls(
            settings, engine, sessions, sio, datasets, hub, pool, imports, jobs, wire, deployments
        )
        await jobs.start()
        platform._loop = asyncio.create_task(
            deployments.run(settings.deployment_poll_s), name="thinker-deployments"
        )
        return platform

    async def stop(self) -> None:
        """Stop the imports (a running one stops at its next batch, keeping nothing) and the
        watch on workers (they keep running: a restart reattaches), then close up."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        await self.imports.stop()
        await self.jobs.stop()
        await self.hub.stop()
        await self.pool.close()
        self.wire.close()
        await self.engine.dispose()


def _executor(settings: Settings) -> Executor:
    """Where job workers run (settings.executor)."""
    if settings.executor == "ray":
        from thinker.jobs.ray_executor import RayExecutor  # noqa: PLC0415 - optional extra

        return RayExecutor(settings.ray_address, settings.ray_resources)
    return LocalExecutor(settings.worker_nice, settings.max_cpu_jobs, settings.warm_workers)
