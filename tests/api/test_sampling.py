"""Sampling through the API: /api/sample, its stream, the OpenAI-compatible /v1, the model pool.

Real app, real databases (SQLite and PostgreSQL), the real tiny model on the CPU, and a real
adapter trained by a few SL steps and registered as a job's model.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from tests.support.api import make_settings, platform_of
from tests.support.sampling import TINY, TrainedRun, add_model

from thinker.server.app import create_app
from thinker.server.pool import ModelPool

torch.set_num_threads(1)  # the tiny model gains nothing from threads; other tests share the CPU

MESSAGES = [{"role": "user", "content": "3+4"}]


def _pool(client: TestClient) -> ModelPool:
    return platform_of(client).pool


def _events(client: TestClient, path: str, body: dict[str, Any]) -> list[Any]:
    """The `data:` payloads of an SSE response, [DONE] included (as the string)."""
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    payloads = [line[len("data: ") :] for line in lines]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


# ---- /api/sample ---------------------------------------------------------------------------


def test_sample_a_prompt_n_times_with_logprobs(client: TestClient) -> None:
    body = {"model": TINY, "prompt": "Hello", "max_tokens": 8, "n": 3, "seed": 4, "logprobs": True}
    response = client.post("/api/sample", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["model"] == TINY and data["prompt_tokens"] == 5  # byte-level: one per byte
    assert len(data["samples"]) == 3
    for sample in data["samples"]:
        assert 1 <= len(sample["tokens"]) <= 8 and len(sample["logprobs"]) == len(sample["tokens"])
        assert all(lp <= 0 for lp in sample["logprobs"])
        assert sample["stop_reason"] in ("stop", "length")
    completion = sum(len(s["tokens"]) for s in data["samples"])
    assert data["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": completion,
        "total_tokens": 5 + completion,
    }
    assert client.post("/api/sample", json=body).json() == data  # same seed, same samples


def test_sample_says_how_sure_the_model_is(client: TestClient) -> None:
    """`uncertainty`: the agreement of the n samples and the mean surprisal of their tokens.
    Greedy samples all agree (sure); the random tiny model at temperature 1 spreads its
    answers (not sure, under the threshold the request sets)."""
    base = {"model": TINY, "messages": MESSAGES, "max_tokens": 6, "seed": 1}
    greedy = client.post(
        "/api/sample",
        json={**base, "n": 4, "temperature": 0.0, "uncertainty": {}, "logprobs": True},
    ).json()
    random = client.post(
        "/api/sample",
        json={**base, "n": 6, "temperature": 1.0, "uncertainty": {"not_sure_below": 0.9}},
    ).json()
    one = client.post("/api/sample", json={**base, "n": 1, "uncertainty": {}})
    sure = greedy["uncertainty"]
    assert (sure["agreement"], sure["distinct_answers"], sure["not_sure"]) == (1.0, 1, False)
    surprisals = [-lp for s in greedy["samples"] for lp in s["logprobs"]]
    assert sure["mean_entropy"] == pytest.approx(sum(surprisals) / len(surprisals))
    unsure = random["uncertainty"]
    texts = [s["text"] for s in random["samples"]]
    assert unsure["distinct_answers"] == len({" ".join(t.lower().split()) for t in texts}) > 1
    assert unsure["agreement"] < 0.9 and unsure["not_sure"]
    assert one.status_code == 422 and "n >= 2" in one.text


def test_sample_messages_renders_the_chat_format(client: TestClient) -> None:
    body = {"model": TINY, "messages": MESSAGES, "max_tokens": 4, "temperature": 0}
    data = client.post("/api/sample", json=body).json()
    # role_colon: "User: 3+4\n\nAssistant:" (thinker/tiny's tokenizer has no BOS)
    assert data["prompt_tokens"] == len("User: 3+4\n\nAssistant:")
    assert data["samples"][0]["logprobs"] is None  # not asked for


def test_stream_gives_the_same_tokens_and_text_as_a_plain_sample(client: TestClient) -> None:
    for prompt in ({"prompt": "User: 1+2\n\nAssistant:"}, {"messages": MESSAGES}):
        body = {"model": TINY, **prompt, "max_tokens": 40, "seed": 21, "temperature": 1.2}
        (plain,) = client.post("/api/sample", json=body).json()["samples"]
        events = _events(client, "/api/sample/stream", body)
        *token_events, final, done = events
        assert done == "[DONE]"
        assert [e["token"] for e in token_events] == plain["tokens"]  # one event per token
        assert "".join(e["text"] for e in [*token_events, final]) == plain["text"]
        assert final["stop_reason"] == plain["stop_reason"]
        assert final["usage"]["completion_tokens"] == len(plain["tokens"])


def test_a_stop_string_ends_the_stream_and_never_shows(
    client: TestClient, trained: TrainedRun
) -> None:
    model_id = add_model(client, trained)
    body: dict[str, Any] = {"model": model_id, "messages": MESSAGES, "max_tokens": 40, "seed": 2}
    (free,) = client.post("/api/sample", json=body).json()["samples"]
    # A character this seed is known to produce a few tokens in: it must end the sample there.
    stop = next(ch for ch in free["text"][3:] if ch.isalnum())
    body["stop"] = [stop]
    (plain,) = client.post("/api/sample", json=body).json()["samples"]
    assert plain["stop_reason"] == "stop" and stop not in plain["text"]
    assert free["text"].startswith(plain["text"]) and len(plain["tokens"]) < len(free["tokens"])
    *token_events, final, _ = _events(client, "/api/sample/stream", body)
    assert [e["token"] for e in token_events] == plain["tokens"]
    assert "".join(e["text"] for e in [*token_events, final]) == plain["text"]
    assert final["stop_reason"] == "stop"


def test_an_adapter_samples_a_different_distribution_than_its_base(
    client: TestClient, trained: TrainedRun
) -> None:
    model_id = add_model(client, trained)
    text = "User: 2+5\n\nAssistant: 7\n\nUser:"

    def prompt_logprobs(model: str) -> list[float | None]:
        body = {"model": model, "prompt": text, "max_tokens": 1, "prompt_logprobs": True}
        response = client.post("/api/sample", json=body)
        assert response.status_code == 200, response.text
        return response.json()["prompt_logprobs"]  # type: ignore[no-any-return]

    base, tuned = prompt_logprobs(TINY), prompt_logprobs(model_id)
    assert base[0] is None and tuned[0] is None and len(base) == len(tuned) == len(text)
    # The adapter was trained on this format: it must find the text more likely.
    assert sum(tuned[1:]) > sum(base[1:]) + 1.0  # type: ignore[arg-type]


def test_unknown_models_are_404(client: TestClient) -> None:
    for model in ("mdl_000000000000", "Qwen/Qwen3-0.6B", "../../etc/passwd"):
        response = client.post("/api/sample", json={"model": model, "prompt": "a"})
        assert response.status_code == 404, response.text
        assert model in response.json()["detail"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"temperature": -0.5}, "temperature: Input should be greater than or equal to 0"),
        ({"n": 0}, "n: Input should be greater than or equal to 1"),
        ({"messages": MESSAGES}, "exactly one of `prompt` and `messages`"),
        ({"prompt": None}, "exactly one of `prompt` and `messages`"),
        ({"top_p": 0}, "top_p: Input should be greater than 0"),
        ({"stop": [""]}, "none of them empty"),
        ({"best_of": 2}, "best_of: Extra inputs are not permitted"),
    ],
)
def test_bad_parameters_are_422_with_the_reason(
    client: TestClient, change: dict[str, Any], problem: str
) -> None:
    body = {"model": TINY, "prompt": "a", **change}
    response = client.post("/api/sample", json=body)
    assert response.status_code == 422
    assert problem in response.json()["detail"]
    assert _pool(client).loaded() == []  # refused before any model was loaded


def test_a_stream_refuses_more_than_one_sample(client: TestClient) -> None:
    response = client.post("/api/sample/stream", json={"model": TINY, "prompt": "a", "n": 2})
    assert response.status_code == 422
    assert "n must be 1" in response.json()["detail"]


def test_a_tinker_model_without_a_key_is_a_clear_error(
    client: TestClient, trained: TrainedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    model_id = add_model(client, trained, backend="tinker")
    response = client.post("/api/sample", json={"model": model_id, "prompt": "a"})
    assert response.status_code == 503  # the backend cannot serve it now
    assert "no Tinker API key" in response.json()["detail"]


def test_a_tinker_error_never_shows_the_stored_key(
    client: TestClient, trained: TrainedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thinker.secrets import write_secret

    key = "tml-secret-key-that-must-not-leak"
    write_secret(platform_of(client).settings, "tinker_api_key", key)
    monkeypatch.setenv("TINKER_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("THINKER_TINKER_TIMEOUT_S", "2")
    model_id = add_model(client, trained, backend="tinker")
    response = client.post("/api/sample", json={"model": model_id, "prompt": "a"})
    assert response.status_code == 503
    assert "not reachable" in response.json()["detail"] and key not in response.text
    openai = client.post("/v1/chat/completions", json={"model": model_id, "messages": MESSAGES})
    assert openai.status_code == 503 and key not in openai.text
    assert openai.json()["error"]["type"] == "server_error"


class RemoteSampler:
    """The Tinker SDK's SamplingClient as the pool uses it, without the service (unreachable
    here): `sample` returns the SDK's own awaitable future, which the test answers."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.calls: list[tuple[Future[Any], bool]] = []  # (its future, called on a loop?)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def sample(self, prompt: Any, num_samples: int, params: Any, logprobs: bool) -> Any:
        from tinker.lib.public_interfaces.api_future import AwaitableConcurrentFuture

        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:  # a worker thread, blocked in .result() until Tinker answers
            on_loop = False
        future: Future[Any] = Future()
        self.calls.append((future, on_loop))
        return AwaitableConcurrentFuture(future)


def test_tinker_samples_hold_no_thread_while_the_service_answers(
    client: TestClient, trained: TrainedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tinker import types

    from thinker.server import pool

    base = pool.ModelRef(TINY, TINY, "local")
    local = pool._sampling_client(base, platform_of(client).settings)  # for its tokenizer
    remote = RemoteSampler(local.get_tokenizer())
    monkeypatch.setattr(pool, "_tinker_sampling_client", lambda ref, settings: remote)
    model_id = add_model(client, trained, backend="tinker")
    with ThreadPoolExecutor(3) as senders:
        body = {"model": model_id, "prompt": "1+1=", "max_tokens": 2}
        pending = [senders.submit(client.post, "/api/sample", json=body) for _ in range(3)]
        deadline = time.monotonic() + 120
        while len(remote.calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        tokens = local.get_tokenizer().encode(" 2", add_special_tokens=False)
        for future, _ in remote.calls:
            sequence = types.SampledSequence(
                stop_reason="length",
                sequence_id="s",
                tokens_np=np.array(tokens, dtype=np.int32),
                logprobs_np=np.zeros(len(tokens), dtype=np.float32),
            )
            future.set_result(types.SampleResponse(sequences=[sequence]))
        answers = [p.result(timeout=120) for p in pending]
    assert [on_loop for _, on_loop in remote.calls] == [True, True, True]
    assert [a.status_code for a in answers] == [200, 200, 200], answers[0].text
    assert {a.json()["samples"][0]["tokens"] == tokens for a in answers} == {True}


# ---- the pool --------------------------------------------------------------------------------


@pytest.fixture
def small_pool_client(tmp_path: Path, database_url: str | None) -> Iterator[TestClient]:
    settings = make_settings(tmp_path / "data", database_url, model_pool_size=2)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_pool_evicts_the_least_recently_used_model(
    small_pool_client: TestClient, trained: TrainedRun
) -> None:
    client, pool = small_pool_client, _pool(small_pool_client)
    first, second = add_model(client, trained), add_model(client, trained)

    def sample(model: str) -> None:
        body = {"model": model, "prompt": "1+1", "max_tokens": 2}
        assert client.post("/api/sample", json=body).status_code == 200

    sample(TINY)
    sample(first)
    sample(TINY)  # now `first` is the least recently used
    assert pool.loaded() == [first, TINY] and pool.loads == 2
    sample(second)
    assert pool.loaded() == [TINY, second] and pool.loads == 3
    sample(first)  # evicted, so loaded again; TINY goes this time
    assert pool.loaded() == [second, first] and pool.loads == 4
    pool.forget(second)  # as when its model is deleted
    assert pool.loaded() == [first]


def test_a_pool_of_one_keeps_only_the_last_model(
    tmp_path: Path, database_url: str | None, trained: TrainedRun
) -> None:
    settings = make_settings(tmp_path / "data", database_url, model_pool_size=1)
    with TestClient(create_app(settings)) as client:
        model_id, pool = add_model(client, trained), _pool(client)
        for model in (TINY, model_id, model_id, TINY):
            body = {"model": model, "prompt": "a", "max_tokens": 1}
            assert client.post("/api/sample", json=body).status_code == 200
            assert pool.loaded() == [model]
        assert pool.loads == 3  # the repeated model was served from the pool


def test_concurrent_requests_for_one_model_share_one_load(client: TestClient) -> None:
    pool = _pool(client)

    async def three_at_once() -> list[object]:
        return list(await asyncio.gather(*(pool.get(TINY) for _ in range(3))))

    models = client.portal.call(three_at_once)  # type: ignore[union-attr]
    assert models[0] is models[1] is models[2]
    assert pool.loads == 1


# ---- OpenAI-compatible /v1 -----------------------------------------------------------------


def test_v1_models_lists_base_models_and_every_model_not_archived(
    client: TestClient, trained: TrainedRun
) -> None:
    active = add_model(client, trained)
    deprecated = add_model(client, trained, lifecycle="deprecated")
    archived = add_model(client, trained, lifecycle="archived")
    data = client.get("/v1/models").json()
    assert data["object"] == "list"
    ids = [m["id"] for m in data["data"]]
    assert TINY in ids and active in ids and deprecated in ids and archived not in ids
    entry = next(m for m in data["data"] if m["id"] == active)
    assert entry["object"] == "model" and entry["owned_by"] == "thinker"
    assert entry["parent"] == TINY and isinstance(entry["created"], int)


def test_chat_completions_in_openai_format_streaming_and_not(
    client: TestClient, trained: TrainedRun
) -> None:
    model_id = add_model(client, trained)
    body = {"model": model_id, "messages": MESSAGES, "max_tokens": 30, "seed": 5}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-")
    assert data["model"] == model_id and isinstance(data["created"], int)
    (choice,) = data["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] in ("stop", "length")
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]

    chunks = _events(client, "/v1/chat/completions", {**body, "stream": True})
    assert chunks[-1] == "[DONE]"
    chunks = chunks[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert content == choice["message"]["content"]  # same seed, same reply
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": choice["finish_reason"],
    }


def test_chat_completions_n_and_stream_usage(client: TestClient) -> None:
    body = {"model": TINY, "messages": MESSAGES, "max_completion_tokens": 5, "n": 2, "seed": 1}
    data = client.post("/v1/chat/completions", json=body).json()
    assert [c["index"] for c in data["choices"]] == [0, 1]
    assert data["usage"]["completion_tokens"] <= 10
    stream = {**body, "n": 1, "stream": True, "stream_options": {"include_usage": True}}
    *chunks, done = _events(client, "/v1/chat/completions", stream)
    assert done == "[DONE]" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == len("User: 3+4\n\nAssistant:")


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": "mdl_000000000000", "messages": MESSAGES}, 404, None, "model_not_found"),
        ({"model": TINY, "messages": MESSAGES, "temperature": 2.5}, 400, "temperature", None),
        ({"model": TINY, "messages": []}, 400, "messages", None),
        ({"model": TINY, "messages": MESSAGES, "tools": []}, 400, "tools", None),
        ({"model": TINY, "messages": MESSAGES, "n": 2, "stream": True}, 400, None, None),
    ],
)
def test_v1_errors_take_openais_shape(
    client: TestClient, body: dict[str, Any], status: int, param: str | None, code: str | None
) -> None:
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    if code is not None:
        assert error["code"] == code
