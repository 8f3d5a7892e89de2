"""Live events over Socket.IO, with replay from the run directory.

Rooms: `job:<id>` gets every event of one job (`job_event`: `{job_id, seq, time, type,
data}`, types `state`, `plan`, `metrics`, `log`, `checkpoint`, ...); `jobs` gets each job's
state changes (`job_state`: `{job_id, seq, state, reason, step, total_steps, ...}`).

A client emits `join_job` `{"job_id": ..., "after_seq": n}` (0 the first time, else the last
number it saw) and receives, in order and without gaps, the events after n: first those
already published, read back from `events.jsonl`, then the live ones. Replay and publishing
take the same per-job lock, so no event falls between them or comes twice.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import socketio

from thinker.errors import AuthError, NotFoundError
from thinker.jobs.events import read_events

if TYPE_CHECKING:
    from fastapi import FastAPI

    from thinker.server.platform import Platform

JOBS_ROOM = "jobs"


def job_room(job_id: str) -> str:
    return f"job:{job_id}"


class EventHub:
    """Publishes what the job manager applies; replays what a (re)joining client missed."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.sio: socketio.AsyncServer = platform.sio
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._published: dict[str, int] = {}  # job id -> last seq sent to its room

    def lock(self, job_id: str) -> asyncio.Lock:
        return self._locks[job_id]

    def mark_published(self, job_id: str, seq: int) -> None:
        """Everything up to `seq` is known published (called under the job's lock)."""
        self._published[job_id] = max(seq, self._published.get(job_id, 0))

    async def publish(
        self, job_id: str, events: list[dict[str, Any]], snapshot: dict[str, Any]
    ) -> None:
        """Send `events` to the job's room, and its state changes to the jobs room (called
        under the job's lock, after they are applied to the database)."""
        for event in events:
            await self.sio.emit("job_event", {"job_id": job_id, **event}, room=job_room(job_id))
            if event["type"] == "state":
                state = {**snapshot, **event["data"], "seq": event["seq"], "time": event["time"]}
                await self.sio.emit("job_state", state, room=JOBS_ROOM)
        self.mark_published(job_id, events[-1]["seq"])

    async def join(self, sid: str, job_id: str, after_seq: int) -> int:
        """Replay the events after `after_seq` to `sid`, then add it to the job's room."""
        job = await self.platform.jobs.get(job_id)
        async with self.lock(job_id):
            upto = self._published.get(job_id, job.last_seq)
            run_dir = self.platform.jobs.run_dir(job_id)
            missed = await asyncio.to_thread(read_events, run_dir, after_seq, upto)
            for event in missed:
                await self.sio.emit("job_event", {"job_id": job_id, **event}, to=sid)
            await self.sio.enter_room(sid, job_room(job_id))
        return upto


def register_socket_handlers(sio: socketio.AsyncServer, app: FastAPI) -> None:
    """Connect (with the token check), join/leave a job's room, join the jobs room."""

    def platform() -> Platform:
        return app.state.platform  # type: ignore[no-any-return]

    @sio.event
    async def connect(sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        from thinker.server.deps import check_token

        token = auth.get("token") if isinstance(auth, dict) else None
        header = f"Bearer {token}" if token else environ.get("HTTP_AUTHORIZATION")
        try:
            await check_token(platform(), header)
        except AuthError as e:
            raise socketio.exceptions.ConnectionRefusedError(str(e)) from None

    @sio.event
    async def join_job(sid: str, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict) or not isinstance(data.get("job_id"), str):
            return {"ok": False, "error": 'expected {"job_id": str, "after_seq": int}'}
        after = data.get("after_seq", 0)
        if not isinstance(after, int) or after < 0:
            return {"ok": False, "error": "after_seq must be a non-negative integer"}
        try:
            upto = await platform().hub.join(sid, data["job_id"], after)
        except NotFoundError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True, "replayed_to": upto}

    @sio.event
    async def leave_job(sid: str, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and isinstance(data.get("job_id"), str):
            await sio.leave_room(sid, job_room(data["job_id"]))
        return {"ok": True}

    @sio.event
    async def join_jobs(sid: str, data: Any = None) -> dict[str, Any]:
        await sio.enter_room(sid, JOBS_ROOM)
        return {"ok": True}
