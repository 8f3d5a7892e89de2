"""Sampling under abuse: bounds checked before any decode, requests of one model batched with a
bounded queue, a client that leaves stops its decode, a damaged checkpoint is a clear 503.

Real app on SQLite and PostgreSQL, the real tiny model (context 1,024 tokens, one token per
byte), a real adapter from a few SL steps. Waiting is on the scheduler's own state, held in
place by a call whose step callback blocks, never on how long something takes.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import uvicorn
from fastapi.testclient import TestClient
from tests.support.api import make_settings, platform_of
from tests.support.net import free_port
from tests.support.sampling import TINY, TrainedRun, add_model
from tinker import types

from thinker.engine.local.scheduler import DecodeScheduler
from thinker.server.app import create_app
from thinker.server.platform import Platform
from thinker.settings import Settings

torch.set_num_threads(1)  # the tiny model gains nothing from threads; other tests share the CPU

MESSAGES = [{"role": "user", "content": "3+4"}]
LONG_RUNNING = [{"role": "user", "content": "hello"}]  # greedy: 1,000 tokens, no stop


def _scheduler(platform: Platform, client: TestClient | None = None) -> DecodeScheduler:
    """The decode scheduler of the loaded tiny model (loading it first through a request)."""
    if platform.pool.peek(TINY) is None:
        assert client is not None
        assert client.post("/api/sample", json={"model": TINY, "prompt": "a", "max_tokens": 1})
    model = platform.pool.peek(TINY)
    assert model is not None and model.scheduler is not None
    return model.scheduler


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state of the server (the deadline only turns a hang into a failure)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


@contextmanager
def _held(scheduler: DecodeScheduler) -> Iterator[threading.Event]:
    """A call decoding on `scheduler`, stopped inside its first step until the event is set:
    the batch stands still and new calls wait in the queue."""
    running, release = threading.Event(), threading.Event()

    def hold(tokens: list[int]) -> None:
        if not running.is_set():
            running.set()
            assert release.wait(timeout=120)

    ids = scheduler.tokenizer.encode("1+1", add_special_tokens=False)
    params = types.SamplingParams(max_tokens=20, temperature=0.0)
    future = scheduler.submit(ids, 1, params, on_step=hold)
    assert running.wait(timeout=60)
    try:
        yield release
    finally:
        release.set()
        future.result(timeout=60)


# ---- bounds, before any decode -----------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"temperature": 2.5}, "temperature: Input should be less than or equal to 2"),
        ({"n": 16, "max_tokens": 8192}, "16 x 8,192 = 131,072 tokens, over the limit of 16,384"),
        ({"messages": [{"role": "user", "content": "a"}] * 10_000}, "at most 1024 items"),
        ({"stop": ["x" * 300]}, "at most 256 characters"),
        ({"model": "thinker/tiny\u0007"}, "model: holds U+0007 (a control character) at position"),
        ({"model": "thinker/tiny\u202e"}, "holds U+202E"),
    ],
)
def test_out_of_bounds_requests_are_422_before_any_model_loads(
    client: TestClient, change: dict[str, Any], problem: str
) -> None:
    body = {"model": TINY, "prompt": "a", **change}
    if "messages" in change:
        del body["prompt"]
    response = client.post("/api/sample", json=body)
    assert response.status_code == 422, response.text
    assert problem in response.json()["detail"]
    assert platform_of(client).pool.loaded() == []


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_temperature_that_is_not_finite_is_refused_on_both_routes(
    client: TestClient, number: str
) -> None:
    """Python's JSON parser reads Infinity and NaN (and 1e999 as inf); none may reach the
    sampler, where an infinite temperature samples garbage."""
    api = f'{{"model": "{TINY}", "prompt": "a", "temperature": {number}}}'
    response = client.post("/api/sample", content=api, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "temperature" in response.json()["detail"]
    v1 = f'{{"model": "{TINY}", "messages": {json.dumps(MESSAGES)}, "temperature": {number}}}'
    response = client.post(
        "/v1/chat/completions", content=v1, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and "temperature" in response.json()["error"]["message"]
    assert platform_of(client).pool.loaded() == []


def test_a_nul_in_the_model_field_never_reaches_the_database(client: TestClient) -> None:
    for path, body in (
        ("/api/sample", {"model": "mdl_\u0000", "prompt": "a"}),
        ("/v1/chat/completions", {"model": "mdl_\u0000", "messages": MESSAGES}),
    ):
        response = client.post(path, json=body)
        assert response.status_code in (400, 422), response.text
        assert "model" in response.text


def test_a_prompt_longer_than_the_model_can_hold_is_refused_before_tokenizing(
    client: TestClient,
) -> None:
    prompt = "a" * 1_000_000
    response = client.post("/api/sample", json={"model": TINY, "prompt": prompt})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "prompt has 1,000,000 characters" in detail
    assert "at most 32,768 (32 per token of its 1,024-token context)" in detail
    messages = [{"role": "user", "content": prompt}]
    response = client.post("/v1/chat/completions", json={"model": TINY, "messages": messages})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"


def test_prompt_and_completion_tokens_must_fit_the_context(client: TestClient) -> None:
    """Byte-level tokens: a 900-character prompt is 900 tokens, so 124 more fit, not 125."""
    prompt = "b" * 900
    too_many = client.post("/api/sample", json={"model": TINY, "prompt": prompt, "max_tokens": 125})
    assert too_many.status_code == 422
    assert too_many.json()["detail"].startswith(
        "this model's context is 1,024 tokens; the request asks 900 prompt + 125 completion tokens"
    )
    fits = {"model": TINY, "prompt": prompt, "max_tokens": 124, "temperature": 0}
    assert client.post("/api/sample", json=fits).status_code == 200
    messages = [{"role": "user", "content": "hi"}] * 1000  # ~13,000 tokens rendered
    for path in ("/api/sample", "/v1/chat/completions"):
        response = client.post(path, json={"model": TINY, "messages": messages})
        assert response.status_code in (400, 422)
        assert "this model's context is 1,024 tokens" in response.text
        assert "256 completion tokens" in response.text or "512 completion" in response.text


@pytest.mark.parametrize("change", [{"temperature": 1e-300}, {"top_p": 5e-324}])
def test_extreme_values_in_range_sample_greedily_instead_of_failing(
    client: TestClient, change: dict[str, float]
) -> None:
    """A temperature so small that dividing by it overflows, and a top_p that rounds to 0 in
    float32, keep only the likeliest token: the greedy sample (once a 500 from NaN probs)."""
    body = {"model": TINY, "messages": MESSAGES, "max_tokens": 8, "seed": 3}
    greedy = client.post("/v1/chat/completions", json={**body, "temperature": 0}).json()
    response = client.post("/v1/chat/completions", json={**body, **change})
    assert response.status_code == 200, response.text
    assert response.json()["choices"] == greedy["choices"]


# ---- concurrency: one batch, a bounded queue -----------------------------------------------


def test_concurrent_requests_to_one_model_decode_in_one_batch(client: TestClient) -> None:
    """Three requests that arrive while the model is busy join its running batch together,
    and each gets what it gets alone (same seed, same tokens)."""
    scheduler = _scheduler(platform_of(client), client)
    bodies = [
        {"model": TINY, "prompt": prompt, "max_tokens": 12, "seed": seed}
        for seed, prompt in enumerate(["1+2=", "User: 7+1\n\nAssistant:", "a"])
    ]
    results: dict[int, Any] = {}

    def post(i: int) -> None:
        results[i] = client.post("/api/sample", json=bodies[i])

    with _held(scheduler):
        threads = [threading.Thread(target=post, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        _until(lambda: scheduler.queued == 3, "three requests queued")
    for thread in threads:
        thread.join(60)
    assert max(scheduler.batch_sizes) == 4  # the held call's row and the three requests'
    for i, body in enumerate(bodies):
        assert results[i].status_code == 200, results[i].text
        alone = client.post("/api/sample", json=body).json()
        assert results[i].json()["samples"][0]["tokens"] == alone["samples"][0]["tokens"]


@pytest.fixture
def one_at_a_time(tmp_path: Path, database_url: str | None) -> Iterator[TestClient]:
    """A server that decodes one sequence at a time and lets one request wait per model."""
    settings = make_settings(
        tmp_path / "data", database_url, sample_batch_rows=1, sample_queue_size=1
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_full_queue_is_429_with_retry_after_on_both_routes(one_at_a_time: TestClient) -> None:
    client = one_at_a_time
    scheduler = _scheduler(platform_of(client), client)
    waiting: list[httpx.Response] = []
    body = {"model": TINY, "prompt": "a", "max_tokens": 3}
    with _held(scheduler):
        thread = threading.Thread(
            target=lambda: waiting.append(client.post("/api/sample", json=body))
        )
        thread.start()
        _until(lambda: scheduler.queued == 1, "one request waiting")
        refused = client.post("/api/sample", json=body)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert "sampling queue of this model is full (1 requests" in refused.json()["detail"]
        openai = client.post("/v1/chat/completions", json={"model": TINY, "messages": MESSAGES})
        assert openai.status_code == 429 and openai.headers["Retry-After"] == "1"
        assert openai.json()["error"]["type"] == "rate_limit_error"
    thread.join(60)
    assert waiting[0].status_code == 200  # the queued request was served once the model freed


# ---- a client that leaves stops its decode -------------------------------------------------


@contextmanager
def _serving(settings: Settings) -> Iterator[tuple[Any, int]]:
    """The app under uvicorn in a thread of this process: (the app, its port)."""
    app, port = create_app(settings), free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    _until(lambda: server.started or not thread.is_alive(), "uvicorn started")
    assert server.started
    try:
        yield app, port
    finally:
        server.should_exit = True
        thread.join(30)


def _send(port: int, path: str, body: dict[str, Any]) -> socket.socket:
    """A request sent on a raw socket, its response never read."""
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return connection


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/sample", {"prompt": "a", "max_tokens": 1000}),
        ("/v1/chat/completions", {"messages": LONG_RUNNING, "n": 16, "max_tokens": 1000}),
        ("/api/sample/stream", {"prompt": "a", "max_tokens": 1000}),
    ],
    ids=["api", "v1-n16", "stream"],
)
def test_a_request_whose_client_left_stops_decoding(
    settings: Settings, path: str, body: dict[str, Any]
) -> None:
    """The client closes its connection while its request decodes (greedy: 1,000 tokens
    unless stopped); the decode is dropped at its next step, not run to the end."""
    with _serving(settings) as (app, port):
        url = f"http://127.0.0.1:{port}"
        warm = httpx.post(f"{url}/api/sample", json={"model": TINY, "prompt": "a", "max_tokens": 1})
        assert warm.status_code == 200
        scheduler = _scheduler(app.other_asgi_app.state.platform)
        connection = _send(port, path, {"model": TINY, "temperature": 0, **body})
        # Taken from the queue (so decoding, or prefilling: the held call joins after it).
        _until(lambda: scheduler.unanswered == 1 and scheduler.queued == 0, "the request taken")
        with _held(scheduler):  # the batch stands still, the request mid-decode
            connection.close()
            _until(lambda: scheduler.unanswered == 1, "the request cancelled")  # the held one
        assert scheduler.outcomes["cancelled"] == 1  # dropped at the step after the hold
        assert scheduler.outcomes["done"] == 2  # the warm-up and the held call: not the request
        after = httpx.post(
            f"{url}/api/sample", json={"model": TINY, "prompt": "a", "max_tokens": 2}
        )
        assert after.status_code == 200


# ---- a damaged checkpoint --------------------------------------------------------------------


def _checkpoint_dir(client: TestClient, model_id: str) -> Path:
    runs = platform_of(client).settings.runs_dir
    job_id = client.get(f"/api/models/{model_id}").json()["job_id"]
    (adapter,) = (runs / job_id).glob("*/sampler_weights/*/adapter_model.safetensors")
    return adapter.parent


def _all_routes(client: TestClient, model: str) -> list[tuple[int, str]]:
    """(status, error message) of the three sampling routes for `model`."""
    api = client.post("/api/sample", json={"model": model, "prompt": "1+1", "max_tokens": 2})
    stream = client.post(
        "/api/sample/stream", json={"model": model, "prompt": "1", "max_tokens": 2}
    )
    v1 = client.post("/v1/chat/completions", json={"model": model, "messages": MESSAGES})
    return [
        (api.status_code, api.json().get("detail", "")),
        (stream.status_code, stream.json().get("detail", "") if stream.status_code != 200 else ""),
        (v1.status_code, v1.json().get("error", {}).get("message", "")),
    ]


def test_a_truncated_adapter_is_503_naming_the_model_and_file_and_is_not_kept(
    client: TestClient,
    trained: TrainedRun,
) -> None:
    model_id = add_model(client, trained)
    adapter = _checkpoint_dir(client, model_id) / "adapter_model.safetensors"
    whole = adapter.read_bytes()
    adapter.write_bytes(whole[: len(whole) // 2])
    for status, message in _all_routes(client, model_id):
        assert status == 503
        assert model_id in message and "adapter_model.safetensors" in message
    assert model_id not in platform_of(client).pool.loaded()
    assert client.post("/api/sample", json={"model": TINY, "prompt": "a"}).status_code == 200
    adapter.write_bytes(whole)  # repaired: the next request loads it
    assert [status for status, _ in _all_routes(client, model_id)] == [200, 200, 200]


def test_an_adapter_config_that_does_not_parse_is_503_even_with_matching_checksums(
    client: TestClient,
    trained: TrainedRun,
) -> None:
    """A checkpoint saved wrong (its checksums written after the bad bytes) still fails to
    load; that failure, too, is a 503 naming the model and the file."""
    model_id = add_model(client, trained)
    directory = _checkpoint_dir(client, model_id)
    (directory / "adapter_config.json").write_text('{"peft_type": "LORA", "r": ', "utf-8")
    _rewrite_checksums(directory)
    for status, message in _all_routes(client, model_id):
        assert status == 503
        assert model_id in message and "adapter_config.json" in message
    assert model_id not in platform_of(client).pool.loaded()


def _rewrite_checksums(directory: Path) -> None:
    sums = directory / "SHA256SUMS"
    names = [line.split("  ", 1)[1] for line in sums.read_text("utf-8").splitlines()]
    lines = [f"{hashlib.sha256((directory / n).read_bytes()).hexdigest()}  {n}" for n in names]
    sums.write_text("\n".join(lines) + "\n", "utf-8")
