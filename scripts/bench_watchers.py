"""Benchmark: many Socket.IO clients watching a training job while REST reads go on.

Starts a real `thinker serve` (its own data directory, SQLite unless `--database-url`, tokens
required unless `--no-auth`), queues a default SL job on the shipped arithmetic example
(`max_steps` raised so that it trains through the run), and once it runs:

- `--clients` watchers, spread over `--processes` processes, each a raw Engine.IO v4 /
  Socket.IO v5 client over one aiohttp websocket (python-socketio's AsyncClient is heavier
  per client, and the clients share the server's two cores). Each connects with the token,
  emits `join_job` with `after_seq` 0 and `batch: true` as the dashboard does (events come as
  `job_events` lists, one per server tick; `--per-event` joins without it: one `job_event`
  message per event), answers the server's pings, and records every event: its `seq`, and
  its lag (time received minus the `time` in the event).
- an open-loop REST load: `--rps` GETs per second for `--seconds`, each sent on schedule
  whether or not the earlier ones have answered, rotating through the dashboard's reads;
  latency runs from the scheduled send time, so a stalled server cannot hide its queue.

At the end it cancels the job, waits until every watcher has the job's last event, and prints
REST latency p50/p99 and throughput, errors, event lag p50/p99 (events received during the
REST window), missed and duplicated events by seq, and the CPU used by the server, the worker
and the load generators, with the load average (the machine may be shared: read it beside the
figures).

    .venv/bin/python scripts/bench_watchers.py                # 1,000 clients, 50 req/s, 60 s
    .venv/bin/python scripts/bench_watchers.py --quick        # 50 clients, 10 req/s, 10 s
    .venv/bin/python scripts/bench_watchers.py --json out.json --database-url postgresql+...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
import psutil
from bench_common import free_port, start_job, stop_server

REPO = Path(__file__).resolve().parents[1]
HANDSHAKES_AT_ONCE = 50  # per watcher process, so that connecting does not swamp the server
JOIN_TIMEOUT_S = 600.0  # for every watcher to connect and join
FINISH_TIMEOUT_S = 30.0  # how long watchers wait for the job's last event after the run


# ---- the server -------------------------------------------------------------------------
@dataclass
class Server:
    """`python -m thinker serve` with its own data directory (removed by `stop`)."""

    data_dir: Path
    database_url: str | None
    auth: bool
    backend: Path = REPO / "backend"  # the thinker package it runs
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    token: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "PYTHONPATH": str(self.backend),
            "THINKER_DATA_DIR": str(self.data_dir),
            "THINKER_PORT": str(self.port),
            "THINKER_GPUS": "0",
            "THINKER_REQUIRE_AUTH": "1" if self.auth else "0",
            "HF_HUB_OFFLINE": "1",
        }
        if self.database_url:
            env["THINKER_DATABASE_URL"] = self.database_url
        return env

    def start(self) -> None:
        self.data_dir.mkdir(parents=True)
        if self.auth:
            created = subprocess.run(
                [sys.executable, "-m", "thinker", "token", "create", "--name", "bench"],
                env=self.env,
                capture_output=True,
                text=True,
                check=True,
            )
            self.token = created.stdout.strip()
        log = open(self.data_dir.parent / "server.log", "wb")  # noqa: SIM115 (lives with it)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "thinker", "serve"], env=self.env, stdout=log, stderr=log
        )
        deadline = time.time() + 120
        with self.client() as client:
            while time.time() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited; see {log.name}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get("/api/health").status_code == 200:
                        return
                time.sleep(0.3)
        raise TimeoutError("the server did not come up in 120 s")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=60)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def stop(self) -> None:
        stop_server(self.process)


# ---- the watchers -----------------------------------------------------------------------
@dataclass
class Watcher:
    """One raw Socket.IO client's record of a job's events."""

    seqs: list[int] = field(default_factory=list)
    lags: list[tuple[float, float]] = field(default_factory=list)  # (received at, lag s)
    replayed_to: int | None = None
    error: str | None = None


async def watch(
    session: aiohttp.ClientSession,
    url: str,
    token: str | None,
    job_id: str,
    me: Watcher,
    batch: bool,
) -> None:
    """Connect, join the job's room, record its events until cancelled."""
    ws_url = url.replace("http", "ws", 1) + "/socket.io/?EIO=4&transport=websocket"
    try:
        async with session.ws_connect(ws_url, autoping=True, max_msg_size=0) as ws:
            opening = await ws.receive_str()
            if not opening.startswith("0"):
                raise RuntimeError(f"expected an Engine.IO open packet, got {opening[:80]!r}")
            await ws.send_str("40" + (json.dumps({"token": token}) if token else ""))
            join = {"job_id": job_id, "after_seq": 0, "batch": batch}
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    raise RuntimeError(f"websocket {message.type.name}: {message.data}")
                await on_message(ws, message.data, me, join)
            raise RuntimeError("the server closed the websocket")
    except asyncio.CancelledError:
        raise
    except Exception as e:  # recorded and reported: a watcher that fails is a failed run
        me.error = f"{type(e).__name__}: {e}"


async def on_message(
    ws: aiohttp.ClientWebSocketResponse, data: str, me: Watcher, join: dict[str, Any]
) -> None:
    """Handle one Engine.IO text packet: ping, Socket.IO connect/ack/event/disconnect."""
    if data.startswith("42"):  # a Socket.IO EVENT: ["job_event", {...}] or ["job_events", [...]]
        name, payload = orjson.loads(data[2:])
        if name in ("job_event", "job_events"):
            received = time.time()
            for event in payload if name == "job_events" else [payload]:
                me.seqs.append(event["seq"])
                me.lags.append((received, received - event["time"]))
    elif data == "2":  # Engine.IO ping
        await ws.send_str("3")
    elif data.startswith("40"):  # connected to the namespace: join the job (ack id 1)
        await ws.send_str("421" + json.dumps(["join_job", join]))
    elif data.startswith("431"):  # the join's ack
        (ack,) = orjson.loads(data[3:])
        if not ack.get("ok"):
            raise RuntimeError(f"join_job refused: {ack}")
        me.replayed_to = ack["replayed_to"]
    elif data.startswith(("44", "41", "1")):
        raise RuntimeError(f"disconnected by the server: {data[:200]}")


def watcher_process(
    url: str, token: str | None, job_id: str, clients: int, batch: bool, pipe: Connection
) -> None:
    """Run `clients` watchers; talk to the coordinator over `pipe` (see `run_watchers`)."""
    asyncio.run(_watchers(url, token, job_id, clients, batch, pipe))


async def _watchers(
    url: str, token: str | None, job_id: str, clients: int, batch: bool, pipe: Connection
) -> None:
    watchers = [Watcher() for _ in range(clients)]
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(me: Watcher) -> None:
            async with gate:
                task = asyncio.create_task(watch(session, url, token, job_id, me, batch))
                while me.replayed_to is None and me.error is None and not task.done():
                    await asyncio.sleep(0.05)
            await task

        tasks = [asyncio.create_task(one(w)) for w in watchers]
        while any(w.replayed_to is None and w.error is None for w in watchers):
            await asyncio.sleep(0.1)
        pipe.send("joined")
        last_seq = await asyncio.to_thread(pipe.recv)  # the coordinator's "the job ended at n"
        deadline = time.time() + FINISH_TIMEOUT_S
        while time.time() < deadline and any(
            w.error is None and (not w.seqs or max(w.seqs) < last_seq) for w in watchers
        ):
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    pipe.send(_summary(watchers, last_seq))


def _summary(watchers: list[Watcher], last_seq: int) -> dict[str, Any]:
    expected = set(range(1, last_seq + 1))
    return {
        "missed": sum(len(expected - set(w.seqs)) for w in watchers),
        "duplicated": sum(len(w.seqs) - len(set(w.seqs)) for w in watchers),
        "out_of_order": sum(w.seqs != sorted(w.seqs) for w in watchers),
        "errors": [w.error for w in watchers if w.error is not None],
        "events": sum(len(w.seqs) for w in watchers),
        "lags": [lag for w in watchers for lag in w.lags],
        "replayed_to": [w.replayed_to for w in watchers],
    }


# ---- the REST load ----------------------------------------------------------------------
def rest_paths(job_id: str) -> list[str]:
    """What the dashboard reads while a job trains."""
    return [
        "/api/jobs",
        f"/api/jobs/{job_id}",
        f"/api/jobs/{job_id}/metrics",
        "/api/datasets",
        "/api/models",
        "/api/health",
        f"/api/jobs/{job_id}",
        "/api/jobs?state=running",
    ]


def rest_process(
    url: str, headers: dict[str, str], job_id: str, rps: float, seconds: float, pipe: Connection
) -> None:
    assert pipe.recv() == "go"  # started early, so that its CPU time can be measured
    pipe.send(asyncio.run(_rest_load(url, headers, job_id, rps, seconds)))


async def _rest_load(
    url: str, headers: dict[str, str], job_id: str, rps: float, seconds: float
) -> dict[str, Any]:
    """Open loop: request i goes at start + i/rps, answered or not; latency from then."""
    paths = rest_paths(job_id)
    latencies: list[float] = []
    errors: list[str] = []
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        url, headers=headers, timeout=timeout, connector=connector
    ) as session:

        async def get(path: str, scheduled: float) -> None:
            try:
                async with session.get(path) as response:
                    await response.read()
                    if response.status != 200:
                        errors.append(f"{response.status} {path}")
            except Exception as e:  # a reset or a timeout: an error, not a latency
                errors.append(f"{type(e).__name__} {path}: {e}")
                return
            latencies.append(time.perf_counter() - scheduled)

        start = time.perf_counter()
        tasks = []
        for i in range(int(rps * seconds)):
            scheduled = start + i / rps
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            tasks.append(asyncio.create_task(get(paths[i % len(paths)], scheduled)))
        sent_by = time.perf_counter() - start
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    return {"latencies": latencies, "errors": errors, "sent_in": sent_by, "elapsed": elapsed}


# ---- the run ----------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


def run_queue_seconds(pid: int) -> float:
    """Time the process's threads have waited for a CPU, runnable but not running (Linux)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[1]) / 1e9
    return total


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench_watchers_"))
    server = Server(work / "data", args.database_url, not args.no_auth, args.backend_dir)
    try:
        server.start()
        return measure(server, args)
    finally:
        server.stop()
        if args.keep:
            print(f"[bench] kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def measure(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    assert server.process is not None
    ctx = multiprocessing.get_context("spawn")
    with server.client() as client:
        job_id = start_job(client)
        workers = [p.pid for p in psutil.Process(server.process.pid).children(recursive=True)]
        print(f"[bench] job {job_id} training; connecting {args.clients} watchers", flush=True)
        shares = [args.clients // args.processes] * args.processes
        shares[0] += args.clients - sum(shares)
        watchers = []
        joined_at = time.perf_counter()
        for share in shares:
            ours, theirs = ctx.Pipe()
            process = ctx.Process(
                target=watcher_process,
                args=(server.url, server.token, job_id, share, not args.per_event, theirs),
                daemon=True,
            )
            process.start()
            watchers.append((process, ours))
        for _, pipe in watchers:
            if not pipe.poll(JOIN_TIMEOUT_S - (time.perf_counter() - joined_at)):
                raise TimeoutError(f"the watchers had not all joined after {JOIN_TIMEOUT_S} s")
            assert pipe.recv() == "joined"
        join_s = time.perf_counter() - joined_at
        print(f"[bench] all joined in {join_s:.1f} s; {args.rps} req/s for {args.seconds} s")

        ours, theirs = ctx.Pipe()
        rest = ctx.Process(
            target=rest_process,
            args=(server.url, server.headers, job_id, args.rps, args.seconds, theirs),
            daemon=True,
        )
        load_before = os.getloadavg()
        load_pids = [p.pid for p, _ in watchers if p.pid is not None]
        rest.start()
        load_pids.append(rest.pid)
        cpu_before = {
            "server": cpu_seconds([server.process.pid]),
            "worker": cpu_seconds(workers),
            "load generators": cpu_seconds(load_pids),
        }
        waited_before = run_queue_seconds(server.process.pid)
        window = (time.time(), time.perf_counter())
        ours.send("go")
        rest_result = ours.recv()
        rest.join()
        window_s = time.perf_counter() - window[1]
        cpu_after = {
            "server": cpu_seconds([server.process.pid]),
            "worker": cpu_seconds(workers),
            "load generators": cpu_seconds(load_pids),
        }
        load_after = os.getloadavg()
        waited = (run_queue_seconds(server.process.pid) - waited_before) / window_s
        window_end = time.time()

        client.post(f"/api/jobs/{job_id}/cancel").raise_for_status()
        deadline = time.time() + 60
        job = client.get(f"/api/jobs/{job_id}").json()
        while job["state"] not in ("cancelled", "succeeded", "failed") and time.time() < deadline:
            time.sleep(0.2)
            job = client.get(f"/api/jobs/{job_id}").json()
        for _, pipe in watchers:
            pipe.send(job["last_seq"])
        summaries = [pipe.recv() for _, pipe in watchers]
        for process, _ in watchers:
            process.join()

    lags = [lag for s in summaries for at, lag in s["lags"] if window[0] <= at <= window_end]
    latencies = rest_result["latencies"]
    return {
        "clients": args.clients,
        "rps": args.rps,
        "seconds": args.seconds,
        "database": "postgresql" if args.database_url else "sqlite",
        "auth": not args.no_auth,
        "batched": not args.per_event,
        "join_all_s": join_s,
        "rest": {
            "requests": int(args.rps * args.seconds),
            "ok": len(latencies),
            "errors": len(rest_result["errors"]),
            "error_samples": rest_result["errors"][:10],
            "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "max_ms": max(latencies, default=float("nan")) * 1000,
            "achieved_rps": len(latencies) / rest_result["elapsed"],
        },
        "events": {
            "last_seq": job["last_seq"],
            "received": sum(s["events"] for s in summaries),
            "in_window": len(lags),
            "lag_p50_ms": percentile(lags, 0.5) * 1000,
            "lag_p99_ms": percentile(lags, 0.99) * 1000,
            "lag_max_ms": max(lags, default=float("nan")) * 1000,
            "missed": sum(s["missed"] for s in summaries),
            "duplicated": sum(s["duplicated"] for s in summaries),
            "out_of_order_clients": sum(s["out_of_order"] for s in summaries),
            "watcher_errors": sum(len(s["errors"]) for s in summaries),
            "error_samples": [e for s in summaries for e in s["errors"]][:10],
        },
        "cpu_cores": {k: (cpu_after[k] - cpu_before[k]) / window_s for k in cpu_before},
        "server_run_queue_wait": waited,  # seconds per second, summed over its threads
        "load_average": {"before": load_before, "after": load_after},
        "cores": os.cpu_count(),
    }


def report(result: dict[str, Any]) -> str:
    rest, events, cpu = result["rest"], result["events"], result["cpu_cores"]
    load = result["load_average"]
    return "\n".join(
        [
            f"{result['clients']} watchers, {result['rps']} req/s for {result['seconds']} s "
            f"({result['database']}, auth {'on' if result['auth'] else 'off'}); "
            f"all joined in {result['join_all_s']:.1f} s",
            f"REST   p50 {rest['p50_ms']:.0f} ms  p99 {rest['p99_ms']:.0f} ms  "
            f"max {rest['max_ms']:.0f} ms  {rest['achieved_rps']:.1f} req/s answered  "
            f"errors {rest['errors']} of {rest['requests']}",
            f"events lag p50 {events['lag_p50_ms']:.0f} ms  p99 {events['lag_p99_ms']:.0f} ms  "
            f"max {events['lag_max_ms']:.0f} ms ({events['in_window']} receipts in the window); "
            f"last seq {events['last_seq']}: missed {events['missed']}, duplicated "
            f"{events['duplicated']}, out of order {events['out_of_order_clients']} clients, "
            f"watcher errors {events['watcher_errors']}",
            "CPU (cores) " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()) + "; server "
            f"threads runnable but waiting for a CPU {result['server_run_queue_wait']:.2f} s/s",
            f"load average before {' '.join(f'{x:.2f}' for x in load['before'])}, "
            f"after {' '.join(f'{x:.2f}' for x in load['after'])} ({result['cores']} cores)",
            *(f"  REST error: {e}" for e in rest["error_samples"]),
            *(f"  watcher error: {e}" for e in events["error_samples"]),
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--rps", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=2, help="watcher processes")
    parser.add_argument("--quick", action="store_true", help="50 clients, 10 req/s, 10 s")
    parser.add_argument("--database-url", help="a PostgreSQL URL (default: SQLite)")
    parser.add_argument("--no-auth", action="store_true", help="serve without tokens")
    parser.add_argument(
        "--per-event",
        action="store_true",
        help="join without batch: one job_event message per event (third-party clients)",
    )
    parser.add_argument(
        "--backend-dir",
        type=Path,
        default=REPO / "backend",
        help="the thinker package to serve, e.g. an older commit's (git archive) to compare",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directory and log")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up on `timeout` too
    if args.quick:
        args.clients, args.rps, args.seconds, args.processes = 50, 10.0, 10.0, 1
    result = run(args)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    ok = (
        result["rest"]["errors"] == 0
        and result["events"]["missed"] == 0
        and result["events"]["duplicated"] == 0
        and result["events"]["watcher_errors"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
