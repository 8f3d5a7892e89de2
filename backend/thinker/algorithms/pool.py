"""A pool of actors that work through shards of inputs, each actor holding its model once.

An actor is a process (`LocalPool`: spawned on this machine) or a Ray actor (`RayPool`: placed
by the cluster, one GPU or a few CPUs each) that runs `setup(*args)` once, which returns the
work function, and then runs that function on one shard at a time. The pool gives each idle
actor the next shard and:

- checks the health of its actors: an idle actor is pinged every `health_every_s` and must
  answer within `health_timeout_s`; a busy one must finish its shard within `shard_timeout_s`;
- replaces an actor that died (its process exited, its node was lost), hung or failed a
  health check, and retries the shard it held on another actor; a shard whose work raised is
  retried too. After `max_retries` retries a shard is given up with every reason it failed;
- stops with a PoolError when actors keep dying with no shard finished in between (a model
  that cannot load, say), rather than replacing them forever;
- writes what each actor is doing to `record` (pool.json: id, process id, node, state, the
  shard it holds, shards done, why it was lost), for the dashboard and for tests.

`run` blocks until every shard is done or given up; results arrive through `on_done` in the
order the shards finish, so the caller can stream them to a file.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from thinker.errors import ThinkerError
from thinker.files import write_json_atomically

Work = Callable[[list[Any]], list[Any]]
Setup = Callable[..., Work]


class PoolError(ThinkerError, RuntimeError):
    """The pool cannot go on: its actors keep failing before they finish any work."""


@dataclass
class Shard:
    number: int
    items: list[Any]
    attempts: int = 0  # tries that failed
    failures: list[str] = field(default_factory=list)


@dataclass
class ActorRecord:
    """One actor as pool.json shows it."""

    id: int
    state: str = "starting"  # starting, idle, busy, lost, stopped
    pid: int | None = None
    node: str | None = None
    shard: int | None = None
    shards_done: int = 0
    lost_reason: str | None = None


@dataclass
class PoolStats:
    shards_done: int = 0
    shards_failed: int = 0
    retries: int = 0
    actors_started: int = 0
    actors_lost: int = 0


@dataclass
class _Actor:
    record: ActorRecord
    handle: Any  # LocalPool: (process, connection); RayPool: the actor handle
    slot: int = 0  # its place in the pool (a local actor's GPU or share of cores)
    asked: bool = False  # RayPool: whether its `ready` call was made
    shard: Shard | None = None
    since: float = 0.0  # when its shard or its ping was sent
    pinged: bool = False
    last_seen: float = field(default_factory=time.monotonic)


class _Pool:
    """The scheduling, health checks and retries; the subclasses start, message and kill."""

    def __init__(  # noqa: PLR0913
        self,
        size: int,
        setup: Setup,
        args: tuple[Any, ...],
        *,
        max_retries: int = 2,
        shard_timeout_s: float = 600.0,
        health_every_s: float = 5.0,
        health_timeout_s: float = 30.0,
        record: Path | None = None,
        env_for: Callable[[int], dict[str, str]] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one actor, got {size}")
        self.size = size
        self._setup, self._args = setup, args
        self.max_retries = max_retries
        self.shard_timeout_s = shard_timeout_s
        self.health_every_s, self.health_timeout_s = health_every_s, health_timeout_s
        self._record_path = record
        self._env_for = env_for or (lambda slot: {})
        self._actors: dict[int, _Actor] = {}
        self._records: list[ActorRecord] = []
        self._pending: deque[Shard] = deque()
        self._next_id = 0
        self._losses_in_a_row: list[str] = []  # reasons since the last finished shard
        self.stats = PoolStats()

    # ---- what a subclass provides -----------------------------------------------------
    def _start(self, actor_id: int, env: dict[str, str]) -> Any:
        raise NotImplementedError

    def _send(self, actor: _Actor, message: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def _wait(self, timeout: float) -> list[tuple[_Actor, tuple[Any, ...]]]:
        """Messages that arrived (or ("lost", reason) for an actor that died), by actor."""
        raise NotImplementedError

    def _kill(self, actor: _Actor) -> None:
        raise NotImplementedError

    # ---- the loop ---------------------------------------------------------------------
    def run(
        self,
        shards: list[Shard],
        on_done: Callable[[Shard, list[Any]], None],
        on_failed: Callable[[Shard, str], None],
    ) -> PoolStats:
        """Work through `shards`; each ends in `on_done(shard, results)` or, given up,
        `on_failed(shard, reasons)`."""
        self._pending.extend(shards)
        self._on_done, self._on_failed = on_done, on_failed
        try:
            for slot in range(min(self.size, len(shards))):
                self._add_actor(slot)
            while self._pending or any(a.shard is not None for a in self._actors.values()):
                self._assign()
                for actor, message in self._wait(timeout=0.5):
                    if actor.record.id in self._actors:
                        self._handle(actor, message)
                self._check_health()
        finally:
            self._stop_all()
        return self.stats

    def _add_actor(self, slot: int) -> None:
        record = ActorRecord(self._next_id)
        self._next_id += 1
        actor = _Actor(record, None, slot)
        actor.handle = self._start(record.id, self._env_for(slot))
        actor.since = time.monotonic()
        self._actors[record.id] = actor
        self._records.append(record)
        self.stats.actors_started += 1
        self._write_record()

    def _assign(self) -> None:
        for actor in self._actors.values():
            if actor.record.state == "idle" and not actor.pinged and self._pending:
                shard = self._pending.popleft()
                actor.shard, actor.since = shard, time.monotonic()
                actor.record.state, actor.record.shard = "busy", shard.number
                self._send(actor, ("run", shard.number, shard.items))
                self._write_record()

    def _handle(self, actor: _Actor, message: tuple[Any, ...]) -> None:
        kind = message[0]
        actor.last_seen = time.monotonic()
        if kind == "ready":
            actor.record.state, actor.record.pid, actor.record.node = "idle", *message[1:3]
        elif kind == "pong":
            actor.pinged = False
        elif kind == "done":
            shard = actor.shard
            assert shard is not None and shard.number == message[1], "a result of another shard"
            actor.shard, actor.record.shard, actor.record.state = None, None, "idle"
            actor.record.shards_done += 1
            self.stats.shards_done += 1
            self._losses_in_a_row.clear()
            self._on_done(shard, message[2])
        elif kind == "error":  # the work raised: the actor is fine, the shard is retried
            shard = actor.shard
            assert shard is not None
            actor.shard, actor.record.shard, actor.record.state = None, None, "idle"
            self._retry(shard, f"actor {actor.record.id}: {message[2]}")
        elif kind == "lost":
            self._lose(actor, message[1])
        if kind != "pong":  # a health check changes nothing pool.json shows
            self._write_record()

    def _check_health(self) -> None:
        now = time.monotonic()
        for actor in list(self._actors.values()):
            state = actor.record.state
            if state == "busy" and now - actor.since > self.shard_timeout_s:
                self._lose(actor, f"its shard took over {self.shard_timeout_s:g} s")
            elif state == "starting" and now - actor.since > self.shard_timeout_s:
                self._lose(actor, f"it did not start in {self.shard_timeout_s:g} s")
            elif state == "idle" and actor.pinged and now - actor.since > self.health_timeout_s:
                self._lose(actor, f"no answer to a health check in {self.health_timeout_s:g} s")
            elif (
                state == "idle" and not actor.pinged and now - actor.last_seen > self.health_every_s
            ):
                actor.pinged, actor.since = True, now
                self._send(actor, ("ping",))

    def _lose(self, actor: _Actor, reason: str) -> None:
        """Replace `actor`, and retry the shard it held."""
        record = actor.record
        record.state, record.lost_reason = "lost", reason
        self._kill(actor)
        del self._actors[record.id]
        self.stats.actors_lost += 1
        self._losses_in_a_row.append(f"actor {record.id}: {reason}")
        print(f"[thinker] batch: actor {record.id} lost ({reason}); replacing it", flush=True)
        if actor.shard is not None:
            self._retry(actor.shard, f"actor {record.id} lost: {reason}")
            record.shard = None
        if len(self._losses_in_a_row) > self.size * (self.max_retries + 1):
            raise PoolError(
                f"{len(self._losses_in_a_row)} actors were lost with no shard finished in "
                "between; the last: " + "; ".join(self._losses_in_a_row[-3:])
            )
        if self._pending or actor.shard is not None:
            self._add_actor(actor.slot)
        self._write_record()

    def _retry(self, shard: Shard, reason: str) -> None:
        shard.attempts += 1
        shard.failures.append(reason)
        if shard.attempts <= self.max_retries:
            self.stats.retries += 1
            self._pending.appendleft(shard)
            print(f"[thinker] batch: shard {shard.number} retried ({reason})", flush=True)
        else:
            self.stats.shards_failed += 1
            self._on_failed(shard, "; ".join(shard.failures))

    def _stop_all(self) -> None:
        for actor in list(self._actors.values()):
            self._kill(actor)
            actor.record.state = "stopped"
        self._actors.clear()
        self._write_record()

    def _write_record(self) -> None:
        if self._record_path is not None:
            actors = [asdict(r) for r in self._records]
            write_json_atomically(self._record_path, {"actors": actors, **asdict(self.stats)})


# ---- processes on this machine ----------------------------------------------------------
def _actor_main(connection: Connection, setup: Setup, args: tuple[Any, ...]) -> None:
    """An actor process: set up once, then answer pings and run shards until told to stop."""
    try:
        work = setup(*args)
    except Exception as e:  # noqa: BLE001 - reported to the pool, which replaces the actor
        connection.send(("lost", f"its setup failed: {type(e).__name__}: {e}"))
        return
    connection.send(("ready", os.getpid(), socket.gethostname()))
    while True:
        try:
            message = connection.recv()
        except EOFError:  # the pool is gone
            return
        if message[0] == "stop":
            return
        if message[0] == "ping":
            connection.send(("pong",))
            continue
        _, number, items = message
        try:
            connection.send(("done", number, work(items)))
        except Exception as e:  # noqa: BLE001 - the shard failed, not the actor
            where = traceback.extract_tb(e.__traceback__)[-1:]
            connection.send(("error", number, f"{type(e).__name__}: {e} ({where})"))


def _start_process(
    env: dict[str, str], connection: Connection, setup: Setup, args: tuple[Any, ...]
) -> None:
    os.environ.update(env)  # before the setup imports torch: CUDA_VISIBLE_DEVICES
    _actor_main(connection, setup, args)


class LocalPool(_Pool):
    """Actors that are spawned processes on this machine."""

    def _start(self, actor_id: int, env: dict[str, str]) -> Any:
        context = multiprocessing.get_context("spawn")
        mine, theirs = context.Pipe()
        process = context.Process(
            target=_start_process,
            args=(env, theirs, self._setup, self._args),
            name=f"thinker-actor-{actor_id}",
            daemon=True,
        )
        process.start()
        theirs.close()
        return process, mine

    def _send(self, actor: _Actor, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):  # a death shows at the next wait
            actor.handle[1].send(message)

    def _wait(self, timeout: float) -> list[tuple[_Actor, tuple[Any, ...]]]:
        by_object: dict[Any, _Actor] = {}
        for actor in self._actors.values():
            process, connection = actor.handle
            by_object[connection] = actor
            by_object[process.sentinel] = actor
        woken = {
            by_object[ready].record.id: by_object[ready] for ready in wait(list(by_object), timeout)
        }
        out: list[tuple[_Actor, tuple[Any, ...]]] = []
        for actor in woken.values():
            process, connection = actor.handle
            try:  # what it sent before it died counts: a finished shard is not run twice
                while connection.poll():
                    out.append((actor, connection.recv()))
            except (EOFError, OSError):
                pass
            if not process.is_alive():
                process.join(timeout=1)
                out.append((actor, ("lost", f"its process exited (code {process.exitcode})")))
        return out

    def _kill(self, actor: _Actor) -> None:
        process, connection = actor.handle
        if process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                connection.send(("stop",))
            process.join(timeout=2)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
        connection.close()


# ---- Ray actors -------------------------------------------------------------------------
class _RayActorBody:
    """The body of a Ray actor (made remote by RayPool)."""

    def __init__(self, setup: Setup, args: tuple[Any, ...]) -> None:
        self._work = setup(*args)

    def ready(self) -> tuple[int, str]:
        return os.getpid(), socket.gethostname()

    def ping(self) -> bool:
        return True

    def run(self, number: int, items: list[Any]) -> tuple[int, list[Any]]:
        return number, self._work(items)


class RayPool(_Pool):
    """Actors placed by a Ray cluster (ray.init must have run): `gpus` GPUs and `cpus` CPUs
    each."""

    def __init__(self, *args: Any, gpus: float = 0, cpus: float = 1, **kwargs: Any) -> None:
        import ray  # optional (the ray extra): only a Ray pool needs it

        super().__init__(*args, **kwargs)
        self._remote = ray.remote(num_gpus=gpus, num_cpus=cpus, max_restarts=0)(_RayActorBody)
        self._calls: dict[Any, tuple[_Actor, str]] = {}  # object ref -> (actor, call)

    def _start(self, actor_id: int, env: dict[str, str]) -> Any:
        options = {"runtime_env": {"env_vars": env}} if env else {}
        return self._remote.options(**options).remote(self._setup, self._args)

    def _track(self, actor: _Actor, ref: Any, call: str) -> None:
        self._calls[ref] = (actor, call)

    def _send(self, actor: _Actor, message: tuple[Any, ...]) -> None:
        handle = actor.handle
        if message[0] == "run":
            self._track(actor, handle.run.remote(message[1], message[2]), "run")
        elif message[0] == "ping":
            self._track(actor, handle.ping.remote(), "ping")

    def _wait(self, timeout: float) -> list[tuple[_Actor, tuple[Any, ...]]]:
        import ray  # optional (the ray extra): only a Ray pool needs it

        for actor in self._actors.values():  # a new actor: ask when it is ready
            if actor.record.state == "starting" and not actor.asked:
                actor.asked = True
                self._track(actor, actor.handle.ready.remote(), "ready")
        if not self._calls:
            time.sleep(timeout)
            return []
        ready, _ = ray.wait(list(self._calls), num_returns=1, timeout=timeout)
        if ready:
            more, _ = ray.wait(list(self._calls), num_returns=len(self._calls), timeout=0)
            ready = list(dict.fromkeys([*ready, *more]))
        out: list[tuple[_Actor, tuple[Any, ...]]] = []
        for ref in ready:
            actor, call = self._calls.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                out.append((actor, ("lost", f"the Ray actor died: {_first_line(e)}")))
                continue
            except ray.exceptions.RayTaskError as e:
                number = actor.shard.number if actor.shard else -1
                out.append((actor, ("error", number, _first_line(e))))
                continue
            if call == "ready":
                out.append((actor, ("ready", *value)))
            elif call == "ping":
                out.append((actor, ("pong",)))
            else:
                out.append((actor, ("done", *value)))
        return out

    def _kill(self, actor: _Actor) -> None:
        import ray  # optional (the ray extra): only a Ray pool needs it

        for ref, (owner, _) in list(self._calls.items()):
            if owner is actor:
                del self._calls[ref]
        with contextlib.suppress(Exception):  # already dead, or its node gone
            ray.kill(actor.handle, no_restart=True)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[-1] if text else type(e).__name__
