"""A Tinker SDK training client over the wire is a platform run: a job with live metrics and
checkpoints, library models that sample, stoppable from the dashboard.

The unmodified SDK drives a real server (uvicorn in a thread, a real database file, the tiny
model on the CPU); the platform's REST API is read as the dashboard reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tinker
import torch
from tests.support.api import make_settings
from tests.support.net import serving
from tinker import types

from thinker.services.tokens import create_token
from thinker.store import make_engine, migrate, session_factory, sqlite_url

torch.set_num_threads(1)
TINY = "thinker/tiny"
TOKENS = [5, 6, 7, 8, 9, 10, 11, 12]
WAIT_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    with serving(make_settings(tmp_path_factory.mktemp("data"), None)) as (root, app):
        yield root, app


@pytest.fixture
def api(server: tuple[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server[0], timeout=60) as client:
        yield client


@pytest.fixture
def sdk(server: tuple[str, Any]) -> Iterator[Callable[[], tinker.ServiceClient]]:
    made: list[tinker.ServiceClient] = []

    def make() -> tinker.ServiceClient:
        made.append(tinker.ServiceClient(base_url=server[0], api_key="tml-x"))
        return made[-1]

    yield make
    for service in made:
        with contextlib.suppress(Exception):
            service.close("success").result()


def _datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights or [1.0] * n},
    )


def _until(check: Callable[[], Any], what: str) -> Any:
    """`check()`'s first truthy value, polled: the job manager applies events on its tick."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _job_of(api: httpx.Client, model_id: str) -> dict[str, Any]:
    jobs = api.get("/api/jobs", params={"algorithm": "tinker_sdk"}).json()["data"]
    (job,) = [j for j in jobs if j["config"]["model_id"] == model_id]
    return job  # type: ignore[no-any-return]


def test_an_sdk_run_is_a_job_with_the_metrics_its_calls_returned(
    api: httpx.Client, sdk: Callable[[], tinker.ServiceClient]
) -> None:
    service = sdk()
    client = service.create_lora_training_client(TINY, rank=4, seed=5)
    client = client.result()
    model_id = client.get_info().model_id
    job = _job_of(api, model_id)  # there once the SDK has its client
    assert (job["state"], job["base_model"], job["resource"]) == ("running", TINY, "server")
    assert job["config"]["lora_rank"] == 4 and job["config"]["session_id"]
    assert job["retryable"] is False and job["created_by"] is None  # auth is off

    weights = [0.0, 0.0, 1.0, 1.0, 1.0, 0.5, 1.0]  # 4.5 trained tokens
    batch = [_datum(TOKENS, weights), _datum(TOKENS[2:])]  # + 5: 9.5
    returned = []
    for lr in (1e-2, 5e-3):
        step = client.forward_backward(batch, "cross_entropy")
        update = client.optim_step(types.AdamParams(learning_rate=lr))
        returned.append((step.result().metrics, update.result().metrics, lr))
    rows = _until(
        lambda: (
            (r := api.get(f"/api/jobs/{job['id']}/metrics").json()["data"]) and len(r) == 2 and r
        ),
        "two metrics rows",
    )
    for number, (row, (fb, optim, lr)) in enumerate(zip(rows, returned, strict=True), 1):
        assert row["step"] == number
        assert row["loss:sum"] == fb["loss:sum"]  # what the SDK received, exactly
        assert row["num_tokens"] == 9.5 and row["num_sequences"] == 2
        assert row["train_mean_nll"] == pytest.approx(fb["loss:sum"] / 9.5, rel=1e-12)
        assert row["learning_rate"] == lr
        assert row["grad_norm"] == optim["grad_norm"]
        assert row["step_time_s"] > 0
        assert row["train_tokens_per_s"] == pytest.approx(9.5 / row["step_time_s"])
    assert rows[1]["train_mean_nll"] < rows[0]["train_mean_nll"]  # it trains
    # Events are served once applied: by then the job's step is 2.
    assert _until(lambda: api.get(f"/api/jobs/{job['id']}").json()["step"] == 2, "step 2")
    live = api.get(f"/api/jobs/{job['id']}/events").json()["data"]
    assert [e["data"]["metrics"]["loss:sum"] for e in live if e["type"] == "metrics"] == [
        fb["loss:sum"] for fb, _, _ in returned
    ]

    state = client.save_state("kept").result().path
    sampler_path = client.save_weights_for_sampler("chat").result().path
    saved = api.get(f"/api/jobs/{job['id']}/checkpoints").json()["data"]
    assert [(c["name"], c["step"], c.get("state_path"), c.get("sampler_path")) for c in saved] == [
        ("kept", 2, state, None),
        ("chat", 2, None, sampler_path),
    ]
    models = _until(
        lambda: api.get("/api/models", params={"job_id": job["id"]}).json()["data"],
        "the sampler checkpoint in the library",
    )
    (model,) = models
    assert (model["sampler_path"], model["base_model"], model["step"]) == (sampler_path, TINY, 2)
    assert model["metrics"]["train_mean_nll"] == rows[1]["train_mean_nll"]

    # The playground's route samples the library model: its logprobs are the adapter's, as
    # the SDK's own sampler of that checkpoint computes them, not the base model's.
    body = {"model": model["id"], "prompt": "Hello", "max_tokens": 6, "seed": 3, "logprobs": True}
    response = api.post("/api/sample", json=body)
    assert response.status_code == 200, response.text
    sample = response.json()["samples"][0]
    prompt = [b + 3 for b in b"Hello"]  # the byte-level tokenizer
    sampler = service.create_sampling_client(model_path=sampler_path).result()
    full = types.ModelInput.from_ints(prompt + sample["tokens"])
    expected = sampler.compute_logprobs(full).result()[len(prompt) :]
    assert sample["logprobs"] == pytest.approx(expected, abs=1e-4)
    base_sampler = service.create_sampling_client(base_model=TINY).result()
    base = base_sampler.compute_logprobs(full).result()
    assert max(abs(a - b) for a, b in zip(expected, base[len(prompt) :], strict=True)) > 1e-3
    chat = {"model": model["id"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    assert api.post("/v1/chat/completions", json=chat).status_code == 200

    service.close("success").result()
    ended = _until(
        lambda: (j := api.get(f"/api/jobs/{job['id']}").json())["state"] != "running" and j,
        "the job to end with its session",
    )
    assert ended["state"] == "succeeded" and "closed its session" in ended["reason"]


def test_cancelling_an_sdk_run_fails_its_next_call_with_the_reason(
    server: tuple[str, Any], api: httpx.Client, sdk: Callable[[], tinker.ServiceClient]
) -> None:
    """...and frees its adapter on the base model it shared with another client."""
    service = sdk()
    client = service.create_lora_training_client(TINY, rank=4, seed=1).result()
    other = service.create_lora_training_client(TINY, rank=4, seed=2).result()
    client.forward_backward([_datum(TOKENS)], "cross_entropy").result()
    job = _job_of(api, client.get_info().model_id)
    wire = server[1].state.platform.wire
    engine_client = wire.models[client.get_info().model_id].client
    shared_model, adapter = engine_client._model, engine_client.adapter
    assert adapter in shared_model.peft_config
    del engine_client
    assert api.post(f"/api/jobs/{job['id']}/pause").status_code == 409  # no worker to pause

    cancelled = api.post(f"/api/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["reason"] == "stopped from the Thinker dashboard"
    with pytest.raises(tinker.RequestFailedError, match="stopped from the Thinker dashboard"):
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    with pytest.raises(tinker.RequestFailedError, match="stopped from the Thinker dashboard"):
        client.forward_backward([_datum(TOKENS)], "cross_entropy").result()
    gc.collect()
    other.forward([_datum(TOKENS)], "cross_entropy").result()  # after the release, same worker
    assert adapter not in shared_model.peft_config  # the stopped run's adapter is freed
    resumed = api.post(f"/api/jobs/{job['id']}/resume")
    assert resumed.status_code == 409 and "Tinker SDK" in resumed.json()["detail"]
    service.close("success").result()  # the session's end does not overwrite the cancel
    time.sleep(0.3)
    assert api.get(f"/api/jobs/{job['id']}").json()["state"] == "cancelled"


def test_a_session_that_stops_its_heartbeats_ends_its_run(
    server: tuple[str, Any], api: httpx.Client
) -> None:
    """A client that exits without closing: no heartbeat for session_expires_s ends it."""
    wire = server[1].state.platform.wire
    session_id, model_id = _raw_model(api, "tml-x")
    wire.session_expires_s = 0.5
    try:
        ended = _until(
            lambda: (j := _job_of(api, model_id))["state"] != "running" and j, "the run to end"
        )
    finally:
        wire.session_expires_s = 120.0
    assert ended["state"] == "succeeded" and "stopped sending heartbeats" in ended["reason"]
    heartbeat = api.post(
        "/api/v1/session_heartbeat", json={"session_id": session_id}, headers={"X-API-Key": "x"}
    )
    assert heartbeat.status_code == 410  # the SDK stops its heartbeats on this


def test_a_restart_interrupts_sdk_runs_and_auth_names_their_creator(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, require_auth=True)
    settings.data_dir.mkdir(parents=True)
    token = asyncio.run(_token(settings.data_dir, "alice-laptop"))
    headers = {"Authorization": f"Bearer {token}"}
    with serving(settings) as (root, _), httpx.Client(base_url=root, timeout=60) as api:
        _, model_id = _raw_model(api, f"tml-{token}")
        jobs = api.get("/api/jobs", headers=headers).json()["data"]
        assert [(j["config"]["model_id"], j["created_by"]) for j in jobs] == [
            (model_id, "alice-laptop")
        ]
    with serving(settings) as (root, _), httpx.Client(base_url=root, timeout=60) as api:
        (job,) = api.get("/api/jobs", headers=headers).json()["data"]
        assert job["state"] == "interrupted" and "server restarted" in job["reason"]
        assert job["retryable"] is False


def _raw_model(api: httpx.Client, key: str) -> tuple[str, str]:
    """A session and a training client made with the SDK's requests, without its heartbeats."""
    headers = {"X-API-Key": key}
    session = {"tags": [], "user_metadata": {}, "sdk_version": tinker.__version__}
    session_id = api.post("/api/v1/create_session", json=session, headers=headers).json()[
        "session_id"
    ]
    body = {"session_id": session_id, "model_seq_id": 0, "base_model": TINY}
    body["lora_config"] = {"rank": 4}
    created = api.post("/api/v1/create_model", json=body, headers=headers).json()
    result = api.post(
        "/api/v1/retrieve_future", json={"request_id": created["request_id"]}, headers=headers
    ).json()
    assert result.get("model_id") == created["model_id"], result
    return session_id, created["model_id"]


async def _token(data_dir: Path, name: str) -> str:
    engine = make_engine(sqlite_url(data_dir))
    try:
        await migrate(engine)
        async with session_factory(engine)() as session:
            return (await create_token(session, name))[1]
    finally:
        await engine.dispose()
