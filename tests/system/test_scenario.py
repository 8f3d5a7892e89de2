"""The whole platform through its public interfaces, as a script would use it: upload a
dataset, train an SL job while watching it over Socket.IO, find the model it made, sample
from it (REST and the OpenAI-style endpoint). A real server process, real worker processes,
the tiny model on the CPU; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import socketio
from tests.system.server import ARITHMETIC, ServerProcess, upload

# python-socketio waits 1 s for the namespace's connect by default: too short on a loaded
# 2-core machine ("Unexpected connection error" in CI, 50 sockets connecting at once).
CONNECT_S = 30

pytestmark = pytest.mark.postgresql  # the whole road once on each database

SL_CONFIG = {"max_steps": 12, "batch_size": 8, "save_every": 6, "eval_every": 6}


async def _watch_job(url: str, job_id: str, after_seq: int = 0) -> tuple[list[dict], list[dict]]:
    """Every job_event of `job_id` after `after_seq` until its final state, and the jobs
    room's job_state messages until the same final state."""
    events: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    finished, listed = asyncio.Event(), asyncio.Event()
    final = ("succeeded", "failed")
    sio = socketio.AsyncClient()

    @sio.on("job_event")
    async def on_event(data: dict[str, Any]) -> None:
        events.append(data)
        if data["type"] == "state" and data["data"]["state"] in final:
            finished.set()

    @sio.on("job_state")
    async def on_state(data: dict[str, Any]) -> None:
        states.append(data)
        if data["job_id"] == job_id and data["state"] in final:
            listed.set()

    await sio.connect(url, transports=["websocket"], wait_timeout=CONNECT_S)
    assert (await sio.call("join_jobs", {}))["ok"]
    ack = await sio.call("join_job", {"job_id": job_id, "after_seq": after_seq})
    assert ack["ok"], ack
    await asyncio.wait_for(finished.wait(), 180)
    if after_seq == 0:  # a replay of a finished job brings no new state to the jobs room
        await asyncio.wait_for(listed.wait(), 30)
    await sio.disconnect()
    return events, states


async def _connects(url: str, origin: str) -> bool:
    sio = socketio.AsyncClient()
    try:
        await sio.connect(
            url, transports=["websocket"], wait_timeout=CONNECT_S, headers={"Origin": origin}
        )
    except socketio.exceptions.ConnectionError:
        return False
    await sio.disconnect()
    return True


def test_upload_train_watch_find_model_and_sample(tmp_path: Path, database_url: str | None) -> None:
    server = ServerProcess(tmp_path / "data", database_url).start()
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat", name="arithmetic")
            response = client.post(
                "/api/jobs",
                json={
                    "name": "arith",
                    "algorithm": "sl",
                    "dataset_id": dataset_id,
                    "config": SL_CONFIG,
                },
            )
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]

            events, states = asyncio.run(_watch_job(server.url, job_id))
            seqs = [e["seq"] for e in events]
            assert seqs == list(range(1, len(seqs) + 1)), f"gap or repeat in {seqs}"
            kinds = [e["type"] for e in events]
            order = [e["data"]["state"] for e in events if e["type"] == "state"]
            assert order == ["queued", "starting", "running", "succeeded"]
            assert kinds.count("checkpoint") == 2 and "metrics" in kinds and "log" in kinds
            steps = [e["data"]["step"] for e in events if e["type"] == "metrics"]
            assert max(steps) == 12
            assert [s["state"] for s in states if s["job_id"] == job_id][-1] == "succeeded"

            job = client.get(f"/api/jobs/{job_id}").json()
            assert job["state"] == "succeeded" and job["step"] == 12 and job["progress"] == 1.0
            assert job["last_seq"] == seqs[-1]

            # The dashboard's own origin may open a socket; a foreign one may not.
            assert asyncio.run(_connects(server.url, server.url))
            assert not asyncio.run(_connects(server.url, "http://evil.example"))

            # A client that reconnects after seq k gets exactly k+1..N.
            k = len(seqs) // 2
            replayed, _ = asyncio.run(_watch_job(server.url, job_id, after_seq=k))
            assert [e["seq"] for e in replayed] == seqs[k:]
            assert replayed == events[k:]

            models = client.get("/api/models", params={"job_id": job_id}).json()
            assert models["count"] == 2, models
            final = max(models["data"], key=lambda m: m["step"])
            assert final["step"] == 12 and final["dataset_id"] == dataset_id
            assert final["base_model"] == "thinker/tiny"

            sample = client.post(
                "/api/sample",
                json={
                    "model": final["id"],
                    "messages": [{"role": "user", "content": "2+3="}],
                    "max_tokens": 8,
                    "temperature": 0.0,
                },
            )
            assert sample.status_code == 200, sample.text
            assert len(sample.json()["samples"]) == 1

            chat = client.post(
                "/v1/chat/completions",
                json={
                    "model": final["id"],
                    "messages": [{"role": "user", "content": "2+3="}],
                    "max_tokens": 8,
                    "temperature": 0,
                },
            )
            assert chat.status_code == 200, chat.text
            assert chat.json()["object"] == "chat.completion"
            text = chat.json()["choices"][0]["message"]["content"]

            chunks = []
            with client.stream(
                "POST",
                "/v1/chat/completions",
                json={
                    "model": final["id"],
                    "messages": [{"role": "user", "content": "2+3="}],
                    "max_tokens": 8,
                    "temperature": 0,
                    "stream": True,
                },
            ) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks.append(json.loads(line.removeprefix("data: ")))
            streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
            assert streamed == text  # greedy: the stream spells the same answer
            assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    finally:
        server.stop()
