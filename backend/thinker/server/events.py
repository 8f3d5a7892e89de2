"""Live events over Socket.IO, with replay from the run directory.

Rooms: `job:<id>` gets every event of one job (`job_event`: `{job_id, seq, time, type,
data}`, types `state`, `plan`, `metrics`, `log`, `checkpoint`, ...); `jobs` gets each job's
state changes (`job_state`: `{job_id, seq, state, reason, step, total_steps, ...}`).

A client emits `join_job` `{"job_id": ..., "after_seq": n}` (0 the first time, else the last
number it saw) and receives, in order and without gaps, the events after n: first those
already published, read back from `events.jsonl`, then the live ones. Replay and publishing
take the same per-job lock, so no event falls between them or comes twice.

With `"batch": true` in `join_job` (the dashboard does this) the client gets `job_events`
messages instead, each a list of such events in order: the replay in lists of up to
`REPLAY_BATCH`, then one list per manager tick.

Imports: a client emits `join_imports` and then receives `dataset_import` (the same object as
`GET /api/datasets/imports/{id}`) in the room `imports`, from `thinker.services.imports`.

A socket is tied to the token it connected with: revoking the token disconnects it (at once
through `EventHub.disconnect_token`, else within `TOKEN_SWEEP_S`), and a socket whose token
is revoked joins no room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, defaultdict
from typing import TYPE_CHECKING, Any

import socketio
from engineio import packet as eio_packet
from socketio import packet as sio_packet

from thinker.errors import AuthError, NotFoundError
from thinker.jobs.events import read_events
from thinker.runs import RunDir
from thinker.services.tokens import authorize, revoked_tokens
from thinker.store import Job

if TYPE_CHECKING:
    from pathlib import Path

    from fastapi import FastAPI
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

log = logging.getLogger("thinker.events")

JOBS_ROOM = "jobs"
IMPORTS_ROOM = "imports"
IMPORT_EVENT = "dataset_import"
REPLAY_JOBS = 8  # jobs whose encoded events are kept in memory for replays (least recent go)
REPLAY_BATCH = 500  # events per `job_events` message of a batched replay
TOKEN_SWEEP_S = 5.0  # how often sockets are checked against tokens revoked by another process


def job_room(job_id: str) -> str:
    return f"job:{job_id}"


def batched_room(job_id: str) -> str:
    """The room of the clients that joined with `batch: true` (the dashboard)."""
    return f"job:{job_id}:batched"


class Gone(Exception):
    """The client disconnected before its request was done."""


class EventHub:
    """Publishes what the job manager applies; replays what a (re)joining client missed.

    Each event is encoded once and queued on each client's socket directly:
    `AsyncServer.emit` encodes once too but starts a task per client and waits for them all,
    which at 1,000 watchers made every event 1,000 tasks. Replays come from a per-job list of
    the encoded events, read from `events.jsonl` on a job's first join and extended as events
    are published, so that a thousand joins do not read and encode the file a thousand times.
    """

    def __init__(
        self,
        sio: socketio.AsyncServer,
        sessions: async_sessionmaker[AsyncSession],
        runs_dir: Path,
    ) -> None:
        self.sio = sio
        self.sessions = sessions
        self.runs_dir = runs_dir
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._published: dict[str, int] = {}  # job id -> last seq sent to its room
        self._replay: OrderedDict[str, _Replay] = OrderedDict()  # job id -> its events 1..n
        self._tokens: dict[str, str] = {}  # sid -> id of the token it connected with
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_tokens(), name="thinker-token-sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    def lock(self, job_id: str) -> asyncio.Lock:
        return self._locks[job_id]

    def mark_published(self, job_id: str, seq: int) -> None:
        """Everything up to `seq` is known published (called under the job's lock)."""
        self._published[job_id] = max(seq, self._published.get(job_id, 0))

    # ---- publish and replay -------------------------------------------------------------
    async def publish(
        self, job_id: str, events: list[dict[str, Any]], snapshot: dict[str, Any]
    ) -> None:
        """Send `events` to the job's rooms, and its state changes to the jobs room (called
        under the job's lock, after they are applied to the database).

        The job's room gets a `job_event` message per event; its batched room one
        `job_events` message with them all (a manager tick applies a few at once: at a
        thousand watchers, messages are what the server spends its time on).
        """
        replay = self._replay.get(job_id)
        payloads = [{"job_id": job_id, **event} for event in events]
        plain = self._room(job_room(job_id))
        for event, payload in zip(events, payloads, strict=True):
            packet = self._encode("job_event", payload)
            if replay is not None and event["seq"] == len(replay.events) + 1:
                replay.add(payload, packet)
            await self._send(packet, plain)
            if event["type"] == "state":
                state = {**snapshot, **event["data"], "seq": event["seq"], "time": event["time"]}
                await self._send(self._encode("job_state", state), self._room(JOBS_ROOM))
        batched = self._room(batched_room(job_id))
        if batched:
            await self._send(self._encode("job_events", payloads), batched)
        self.mark_published(job_id, events[-1]["seq"])

    async def join(self, sid: str, job_id: str, after_seq: int, batch: bool = False) -> int:
        """Replay the events after `after_seq` to `sid`, then add it to the job's room (its
        batched room with `batch`: the replay and the live events then come as lists).

        Raises:
            NotFoundError: No such job.
            Gone: The client disconnected meanwhile.
        """
        async with self.sessions() as session:
            job = await session.get(Job, job_id)
        if job is None:
            raise NotFoundError(f"no job with id {job_id!r}")
        async with self.lock(job_id):
            upto = self._published.get(job_id, job.last_seq)
            replay = await self._replay_to(job_id, upto)
            eio_sid = self.sio.manager.eio_sid_from_sid(sid, "/")
            if eio_sid is None:
                raise Gone(sid)
            if batch:
                missed = replay.events[after_seq:upto]
                for start in range(0, len(missed), REPLAY_BATCH):
                    chunk = missed[start : start + REPLAY_BATCH]
                    packet = self._encode("job_events", chunk)
                    await self.sio.eio.send_packet(eio_sid, _message(packet))
            else:
                for packet in replay.packets[after_seq:upto]:
                    await self.sio.eio.send_packet(eio_sid, _message(packet))
            room = batched_room(job_id) if batch else job_room(job_id)
            await self.sio.enter_room(sid, room)
        return upto

    async def leave(self, sid: str, job_id: str) -> None:
        await self.sio.leave_room(sid, job_room(job_id))
        await self.sio.leave_room(sid, batched_room(job_id))

    async def _replay_to(self, job_id: str, upto: int) -> _Replay:
        """The job's events, at least up to `upto` (read from the file as needed)."""
        replay = self._replay.setdefault(job_id, _Replay())
        self._replay.move_to_end(job_id)
        while len(self._replay) > REPLAY_JOBS:
            self._replay.popitem(last=False)
        if len(replay.events) < upto:
            run_dir = RunDir(self.runs_dir / job_id).path
            for event in await asyncio.to_thread(read_events, run_dir, len(replay.events), upto):
                if event["seq"] == len(replay.events) + 1:  # numbered without gaps
                    payload = {"job_id": job_id, **event}
                    replay.add(payload, self._encode("job_event", payload))
        return replay

    def _encode(self, name: str, data: dict[str, Any] | list[dict[str, Any]]) -> str:
        """A Socket.IO EVENT packet for the default namespace, as text."""
        encoded = self.sio.packet_class(sio_packet.EVENT, data=[name, data]).encode()
        return str(encoded)

    def _room(self, room: str) -> list[str]:
        return [eio_sid for _, eio_sid in self.sio.manager.get_participants("/", room)]

    async def _send(self, packet: str, eio_sids: list[str]) -> None:
        # Queueing on an Engine.IO socket (an unbounded asyncio.Queue) never waits, so this
        # loop does not yield: the clients' writers send once it is done.
        message = _message(packet)
        for eio_sid in eio_sids:
            await self.sio.eio.send_packet(eio_sid, message)

    # ---- tokens -------------------------------------------------------------------------
    def connected(self, sid: str, token_id: str | None) -> None:
        if token_id is not None:
            self._tokens[sid] = token_id

    def disconnected(self, sid: str) -> None:
        self._tokens.pop(sid, None)

    async def may_join(self, sid: str) -> bool:
        """False when `sid` connected with a token that is now revoked."""
        token_id = self._tokens.get(sid)
        return token_id is None or not await revoked_tokens(self.sessions, {token_id})

    async def disconnect_token(self, token_id: str) -> int:
        """Disconnect every socket that connected with `token_id`; how many there were."""
        sids = [sid for sid, token in self._tokens.items() if token == token_id]
        for sid in sids:
            self._tokens.pop(sid, None)
            await self.sio.disconnect(sid)
        return len(sids)

    async def _sweep_tokens(self) -> None:
        """Disconnect sockets whose token was revoked elsewhere (`thinker token revoke`)."""
        while True:
            await asyncio.sleep(TOKEN_SWEEP_S)
            try:
                if self._tokens:
                    live = set(self._tokens.values())
                    for token_id in await revoked_tokens(self.sessions, live):
                        await self.disconnect_token(token_id)
            except Exception:  # keep sweeping: a database hiccup must not end it
                log.exception("token sweep failed")


class _Replay:
    """A job's published events in order (seq 1..n), as payloads and as `job_event` packets."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.packets: list[str] = []

    def add(self, payload: dict[str, Any], packet: str) -> None:
        self.events.append(payload)
        self.packets.append(packet)


def _message(packet: str) -> eio_packet.Packet:
    return eio_packet.Packet(eio_packet.MESSAGE, packet)


def register_socket_handlers(sio: socketio.AsyncServer, app: FastAPI) -> None:
    """Connect (with the token check), join/leave a job's room, join the jobs room."""

    def hub() -> EventHub:
        return app.state.platform.hub  # type: ignore[no-any-return]

    @sio.event
    async def connect(sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        token = auth.get("token") if isinstance(auth, dict) else None
        header = f"Bearer {token}" if token else environ.get("HTTP_AUTHORIZATION")
        settings = app.state.platform.settings
        try:
            token_id = await authorize(settings, hub().sessions, header)
        except AuthError as e:
            raise socketio.exceptions.ConnectionRefusedError(str(e)) from None
        hub().connected(sid, token_id)

    @sio.event
    async def disconnect(sid: str, reason: Any = None) -> None:
        hub().disconnected(sid)

    @sio.event
    async def join_job(sid: str, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict) or not isinstance(data.get("job_id"), str):
            return {"ok": False, "error": 'expected {"job_id": str, "after_seq": int}'}
        after = data.get("after_seq", 0)
        if not isinstance(after, int) or after < 0:
            return {"ok": False, "error": "after_seq must be a non-negative integer"}
        if not await hub().may_join(sid):
            return {"ok": False, "error": "the token was revoked"}
        try:
            batch = data.get("batch") is True
            upto = await hub().join(sid, data["job_id"], after, batch)
        except NotFoundError as e:
            return {"ok": False, "error": str(e)}
        except Gone:
            return {"ok": False, "error": "disconnected"}
        return {"ok": True, "replayed_to": upto}

    @sio.event
    async def leave_job(sid: str, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and isinstance(data.get("job_id"), str):
            await hub().leave(sid, data["job_id"])
        return {"ok": True}

    @sio.event
    async def join_jobs(sid: str, data: Any = None) -> dict[str, Any]:
        if not await hub().may_join(sid):
            return {"ok": False, "error": "the token was revoked"}
        if not sio.manager.is_connected(sid, "/"):
            return {"ok": False, "error": "disconnected"}
        await sio.enter_room(sid, JOBS_ROOM)
        return {"ok": True}


def register_import_handlers(sio: socketio.AsyncServer) -> None:
    """`join_imports` / `leave_imports`: enter or leave the room of `dataset_import` events.

    The connection itself is checked by the `connect` handler of `register_socket_handlers`.
    """

    @sio.event
    async def join_imports(sid: str, data: Any = None) -> dict[str, Any]:
        await sio.enter_room(sid, IMPORTS_ROOM)
        return {"ok": True}

    @sio.event
    async def leave_imports(sid: str, data: Any = None) -> dict[str, Any]:
        await sio.leave_room(sid, IMPORTS_ROOM)
        return {"ok": True}
