"""The unmodified `tinker` SDK against `thinker serve`: Tinker's own HTTP protocol.

A server runs under uvicorn in a thread; the SDK (the pinned release, as installed) talks to it
over real HTTP, exactly as it talks to Tinker. What it computes must be what the in-process
engine computes with the same seed, bit for bit on the CPU: losses, logprobs, optimizer
metrics, sampled tokens. Requests start in the order of their `seq_id` whatever order they
arrive in; a failed request fails alone with its reason; a poll of a request the server does
not know (issued before a restart) answers at once; with auth on, the key is `tml-` and a
Thinker token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import tinker
import torch
from tests.support.api import make_settings
from tests.support.net import serving
from tinker import types

import thinker
from thinker.services.tokens import create_token
from thinker.settings import Settings
from thinker.store import make_engine, migrate, session_factory, sqlite_url

torch.set_num_threads(1)
TINY = "thinker/tiny"
TOKENS = [5, 6, 7, 8, 9, 10, 11, 12]


@contextmanager
def _serving(settings: Settings) -> Iterator[str]:
    with serving(settings) as (root, _):
        yield root


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serving(make_settings(tmp_path_factory.mktemp("data"), None)) as root:
        yield root


@pytest.fixture
def sdk(url: str) -> Iterator[Callable[[], tinker.ServiceClient]]:
    """New SDK clients of the server, closed after the test (else their heartbeats go on
    against a server that has stopped)."""
    made: list[tinker.ServiceClient] = []

    def make() -> tinker.ServiceClient:
        made.append(tinker.ServiceClient(base_url=url, api_key="tml-x"))
        return made[-1]

    yield make
    for service in made:
        with contextlib.suppress(Exception):
            service.close("success")


def _datum(tokens: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def _run(service: Any) -> dict[str, Any]:
    """Three steps, a forward, a save, a sample: what a Tinker script does."""
    client = service.create_lora_training_client(TINY, rank=8, seed=3).result()
    batch = [_datum(TOKENS), _datum(TOKENS[2:])]
    losses, optim = [], []
    for _ in range(3):
        step = client.forward_backward(batch, "cross_entropy")
        update = client.optim_step(types.AdamParams(learning_rate=1e-2))
        losses.append(step.result().metrics["loss:sum"])
        optim.append(update.result().metrics)
    out = client.forward([_datum(TOKENS)], "cross_entropy").result()
    logprobs = out.loss_fn_outputs[0]["logprobs"].tolist()
    saved = client.save_state("wire").result().path
    sampler = client.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=6, temperature=1.0, seed=11)
    sample = sampler.sample(types.ModelInput.from_ints(TOKENS), 3, params).result()
    # An RL step on what was sampled: the importance-sampling loss with per-token inputs.
    rl = []
    for i, seq in enumerate(sample.sequences):
        tokens = TOKENS + list(seq.tokens)
        n = len(tokens) - 1
        prompt = len(TOKENS) - 1
        rl.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "logprobs": [0.0] * prompt + list(seq.logprobs or []),
                    "advantages": [0.0] * prompt + [1.0 - i] * (n - prompt),
                },
            )
        )
    rl_out = client.forward_backward(rl, "importance_sampling").result()
    return {
        "rl_loss": rl_out.metrics["loss:sum"],
        "rl_logprobs": [o["logprobs"].tolist() for o in rl_out.loss_fn_outputs],
        "losses": losses,
        "optim": optim,
        "logprobs": logprobs,
        "saved": saved,
        "tokens": [list(s.tokens) for s in sample.sequences],
        "sample_logprobs": [list(s.logprobs or []) for s in sample.sequences],
        "sequence_ids": [s.sequence_id for s in sample.sequences],
        "client": client,
    }


def test_the_unmodified_sdk_computes_over_http_what_the_engine_computes_in_process(
    sdk: Callable[[], tinker.ServiceClient], tmp_path: Path
) -> None:
    wire = sdk()
    over_http = _run(wire)
    in_process = _run(thinker.ServiceClient(storage_dir=tmp_path))
    keys = ("losses", "optim", "logprobs", "tokens", "sample_logprobs", "rl_loss", "rl_logprobs")
    for key in keys:
        assert over_http[key] == in_process[key], key  # bit for bit: one engine, one seed
    assert over_http["losses"][2] < over_http["losses"][0]  # it trains
    ids = over_http["sequence_ids"]
    assert len(ids) == 3 and len(set(ids)) == 3 and all(ids)
    # The checkpoint path is one the SDK's own parser takes, and a new client loads it: its
    # model id is the one the SDK assumes (session:train:n), and it computes as the saved one.
    parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(over_http["saved"])
    assert parsed.checkpoint_type == "training"
    loaded = wire.create_training_client_from_state(over_http["saved"]).result()
    assert loaded.get_info().model_id.split(":")[1:] == ["train", "1"]
    again = loaded.forward([_datum(TOKENS)], "cross_entropy").result()
    assert again.loss_fn_outputs[0]["logprobs"].tolist() == over_http["logprobs"]
    named = over_http["client"].save_weights_for_sampler("named").result().path
    by_path = wire.create_sampling_client(model_path=named).result()
    greedy = types.SamplingParams(max_tokens=4, temperature=0.0)
    assert (
        len(by_path.sample(types.ModelInput.from_ints(TOKENS), 1, greedy).result().sequences) == 1
    )


def test_requests_start_in_seq_order_and_a_failed_one_fails_alone(
    url: str, sdk: Callable[[], tinker.ServiceClient]
) -> None:
    """The SDK sends request k+1 before k has run, and a large forward_backward's chunks at
    once (the first last); here an optimizer step (seq 2) arrives before its forward_backward
    (seq 1), and must still run after it: the step then has gradients to apply."""
    wire = sdk()
    client = wire.create_lora_training_client(TINY, rank=4, seed=1).result()
    # Raw requests go to a model of their own: the SDK numbers its client's requests itself.
    model_id = wire.create_lora_training_client(TINY, rank=4).result().get_info().model_id

    async def post(path: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            response = await http.post(
                path, headers={"X-API-Key": "tml-x", **(headers or {})}, **kwargs
            )
            response.raise_for_status()
            return response.json()  # type: ignore[no-any-return]

    from tinker.proto.request_conv import forward_backward_request_to_proto

    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=[_datum(TOKENS)], loss_fn="cross_entropy"
        ),
        model_id=model_id,
        seq_id=1,
    )
    body = forward_backward_request_to_proto(request).SerializeToString()
    step = {"model_id": model_id, "seq_id": 2, "adam_params": {"learning_rate": 1e-2}}

    async def out_of_order() -> tuple[dict[str, Any], dict[str, Any]]:
        optim = await post("/api/v1/optim_step", json=step)
        await asyncio.sleep(0.2)  # it has arrived, and waits
        fb = await post(
            "/api/v1/forward_backward",
            content=body,
            headers={"Content-Type": "application/x-protobuf"},
        )
        return optim, fb

    optim, _ = asyncio.run(out_of_order())
    result = asyncio.run(post("/api/v1/retrieve_future", json={"request_id": optim["request_id"]}))
    assert result.get("metrics", {}).get("grad_norm", 0) > 0, result  # ran after the backward
    # A retried submission (the same seq_id) is the same request, not a second step.
    assert asyncio.run(post("/api/v1/optim_step", json=step))["request_id"] == optim["request_id"]

    # A bad request fails with its reason, as the user's fault; the next one runs.
    bad = client.forward_backward([_datum(TOKENS)], "no_such_loss")
    with pytest.raises(tinker.RequestFailedError, match="no_such_loss") as failed:
        bad.result()
    assert failed.value.category == "user"
    assert client.forward([_datum(TOKENS)], "cross_entropy").result().metrics["loss:sum"] > 0


def test_a_request_the_server_does_not_know_is_answered_at_once(url: str) -> None:
    """After a restart the SDK's polls of older requests get 410 with the reason (which the
    SDK raises), never "try again" (which it would poll forever)."""
    response = httpx.post(
        f"{url}/api/v1/retrieve_future",
        json={"request_id": "req-from-before-a-restart"},
        headers={"X-API-Key": "tml-x"},
        timeout=60,
    )
    assert response.status_code == 410 and "restarted" in response.json()["detail"]


def test_with_auth_on_the_key_is_tml_and_a_thinker_token(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", None, require_auth=True)

    async def first_token() -> str:
        engine = make_engine(sqlite_url(settings.data_dir))
        try:
            await migrate(engine)
            async with session_factory(engine)() as session:
                return (await create_token(session, "sdk"))[1]
        finally:
            await engine.dispose()

    settings.data_dir.mkdir(parents=True)
    token = asyncio.run(first_token())
    with _serving(settings) as root:
        caps = tinker.RestClient(base_url=root, api_key=f"tml-{token}").get_server_capabilities()
        assert TINY in [m.model_name for m in caps.result().supported_models]
        refused = httpx.post(
            f"{root}/api/v1/create_session", json={}, headers={"X-API-Key": "tml-nope"}
        )
        assert refused.status_code == 401


def test_runs_checkpoints_custom_losses_and_prompt_logprobs_over_the_wire(
    url: str, sdk: Callable[[], tinker.ServiceClient]
) -> None:
    """The SDK's RestClient lists and deletes what a client saved; a custom loss (the SDK
    computes it from the server's logprobs) trains; prompt logprobs come back."""
    wire = sdk()
    client = wire.create_lora_training_client(TINY, rank=4, seed=2).result()
    state = client.save_state("kept").result().path
    sampler_path = client.save_weights_for_sampler("for-chat").result().path
    run_id = types.ParsedCheckpointTinkerPath.from_tinker_path(state).training_run_id
    rest = tinker.RestClient(base_url=url, api_key="tml-x")
    runs = rest.list_training_runs(limit=100).result()
    assert run_id in [r.training_run_id for r in runs.training_runs]
    listed = rest.list_checkpoints(run_id).result().checkpoints
    assert sorted(c.tinker_path for c in listed) == sorted([state, sampler_path])
    info = rest.get_weights_info_by_tinker_path(state).result()
    assert (info.base_model, info.lora_rank) == (TINY, 4)
    rest.delete_checkpoint(run_id, "weights/kept").result()
    assert [c.tinker_path for c in rest.list_checkpoints(run_id).result().checkpoints] == [
        sampler_path
    ]
    rest.set_checkpoint_ttl_from_tinker_path(sampler_path, 7200).result()
    (listed,) = rest.list_checkpoints(run_id).result().checkpoints
    assert listed.expires_at is not None  # the TTL, as the SDK reads it
    rest.set_checkpoint_ttl_from_tinker_path(sampler_path, None).result()
    assert rest.list_checkpoints(run_id).result().checkpoints[0].expires_at is None
    rest.publish_checkpoint_from_tinker_path(sampler_path).result()
    assert rest.list_checkpoints(run_id).result().checkpoints[0].public
    checkpoint = f"{url}/api/v1/training_runs/{run_id}/checkpoints/sampler_weights/for-chat"
    twice = httpx.post(f"{checkpoint}/publish", headers={"X-API-Key": "tml-x"})
    assert twice.status_code == 409 and "already public" in twice.text
    rest.unpublish_checkpoint_from_tinker_path(sampler_path).result()
    assert not rest.list_checkpoints(run_id).result().checkpoints[0].public

    def negative_mean_logprob(
        data: list[types.Datum], logprobs: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        loss = -torch.cat(logprobs).mean()
        return loss, {"custom_loss": float(loss.detach())}

    batch = [_datum(TOKENS)]
    before = client.forward(batch, "cross_entropy").result().metrics["loss:sum"]
    for _ in range(3):
        client.forward_backward_custom(batch, negative_mean_logprob).result()
        client.optim_step(types.AdamParams(learning_rate=2e-2)).result()
    assert client.forward(batch, "cross_entropy").result().metrics["loss:sum"] < before

    sampler = client.save_weights_and_get_sampling_client().result()
    logprobs = sampler.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
    assert logprobs[0] is None and len(logprobs) == len(TOKENS)
    assert all(v is not None and v < 0 for v in logprobs[1:])


def test_external_weights_are_read_through_signed_links(
    url: str, sdk: Callable[[], tinker.ServiceClient]
) -> None:
    """The SDK's get_external_weights_urls gives a link to every file of a saved model; each
    link reads its file without an API key, the files match the checkpoint's own checksums,
    and a link with another file's signature or a passed expiry is refused."""
    client = sdk().create_lora_training_client(TINY, rank=4, seed=3).result()
    path = client.save_weights_external("linked").result().path
    rest = tinker.RestClient(base_url=url, api_key="tml-x")
    links = rest.get_external_weights_urls(path).result()
    assert {"config.json", "model.safetensors", "SHA256SUMS"} <= set(links.urls)
    files = {name: httpx.get(link) for name, link in links.urls.items()}
    assert all(r.status_code == 200 for r in files.values())
    sums = [line.split("  ") for line in files["SHA256SUMS"].text.splitlines()]
    assert sums and {name for _, name in sums} <= set(files)
    for digest, name in sums:
        assert hashlib.sha256(files[name].content).hexdigest() == digest, name
    config, weights = links.urls["config.json"], links.urls["model.safetensors"]
    forged = config.split("?")[0] + "?" + weights.split("?")[1]  # another file's signature
    assert httpx.get(forged).status_code == 401
    expired = re.sub(r"expires=\d+", "expires=1000", config)
    assert httpx.get(expired).status_code == 401
    run_id = types.ParsedCheckpointTinkerPath.from_tinker_path(path).training_run_id
    other = httpx.get(
        f"{url}/api/v1/training_runs/{run_id}/checkpoints/weights/linked/external_weights_urls",
        headers={"X-API-Key": "tml-x"},
    )
    assert other.status_code == 422 and "external weights" in other.text


def test_gspo_and_stable_reinforce_over_the_wire(sdk: Callable[[], tinker.ServiceClient]) -> None:
    """The SDK's two newest losses, with their config and per-datum inputs, compute over
    HTTP what the formula gives on the logprobs the server returns; a misspelt config key is
    refused with its name."""
    from thinker.engine.losses import get_loss_fn

    client = sdk().create_lora_training_client(TINY, rank=4, seed=5).result()
    n = len(TOKENS) - 1
    inputs: dict[str, list[float]] = {
        "logprobs": [0.0, 0.0] + [-5.0] * (n - 2),
        "advantages": [0.0, 0.0] + [1.0, -0.5] * ((n - 2) // 2) + [1.0] * ((n - 2) % 2),
        "sequence_ratio_mask": [0.0, 0.0] + [1.0] * (n - 2),
    }
    cases = [
        ("gspo", {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0}),
        ("stable_reinforce", {"kl_coeff": 0.05}),
    ]
    for loss_fn, config in cases:
        datum = types.Datum(
            model_input=types.ModelInput.from_ints(TOKENS[:-1]),
            loss_fn_inputs={"target_tokens": TOKENS[1:], **inputs},
        )
        out = client.forward_backward([datum], loss_fn, config).result()
        logprobs = out.loss_fn_outputs[0]["logprobs"].to_torch()
        x = {k: torch.tensor(v) for k, v in inputs.items()}
        want = get_loss_fn(loss_fn, config)(logprobs, x, config).item()
        assert out.metrics["loss:sum"] == pytest.approx(want, rel=1e-5), loss_fn
    bad = client.forward_backward([datum], "stable_reinforce", {"kl_coef": 0.1})
    with pytest.raises(tinker.RequestFailedError, match="kl_coef.*allowed.*kl_coeff"):
        bad.result()


def _sample_with_every_option(sampler: Any) -> types.SampleResponse:
    """One sample asking for every prompt- and sample-side option the SDK 0.38 offers."""
    ids = torch.full((len(TOKENS) - 1, 2), -1, dtype=torch.long)
    ids[3, 1], ids[6, 0] = 42, TOKENS[-1]
    response: types.SampleResponse = sampler.sample(
        types.ModelInput.from_ints(TOKENS),
        2,
        types.SamplingParams(max_tokens=4, temperature=1.0, seed=9, stop=[]),
        include_prompt_logprobs=True,
        topk_prompt_logprobs=3,
        topk_sample_logprobs=4,
        target_prompt_logprobs=types.TensorData.from_torch_sparse(ids, pad_value=-1),
        prompt_alt_tokens_k=2,
        prompt_logprobs_last_n=3,
    ).result()
    return response


def test_top_k_target_and_alternative_logprobs_over_the_wire(
    sdk: Callable[[], tinker.ServiceClient], tmp_path: Path
) -> None:
    """The SDK's top-k (of each sampled token and of the prompt), target-id and alternative
    logprobs and `prompt_logprobs_last_n` reach the unmodified SDK over HTTP in its own
    response types, equal to what the engine returns in process; the SDK's own checks (the
    suffix honoured, the draws returned) pass; a bad width fails with the field's name."""
    wire = sdk().create_sampling_client(base_model=TINY).result()
    local = thinker.ServiceClient(storage_dir=tmp_path).create_sampling_client(base_model=TINY)
    over_http = _sample_with_every_option(wire)
    in_process = _sample_with_every_option(local.result())
    for got, want in zip(over_http.sequences, in_process.sequences, strict=True):
        assert list(got.tokens) == list(want.tokens)
        assert got.topk_logprobs == want.topk_logprobs  # bit for bit: one engine, one seed
        assert got.topk_logprobs is not None and len(got.topk_logprobs[0] or []) == 4
    assert over_http.prompt_logprobs == in_process.prompt_logprobs
    assert over_http.prompt_logprobs is not None
    assert over_http.prompt_logprobs[: len(TOKENS) - 3] == [None] * (len(TOKENS) - 3)
    assert over_http.topk_prompt_logprobs == in_process.topk_prompt_logprobs
    top = over_http.topk_prompt_logprobs
    assert top is not None and top[0] is None and len(top[-1] or []) == 3
    target, want_target = over_http.target_prompt_logprobs, in_process.target_prompt_logprobs
    assert target is not None and want_target is not None
    assert target.sparse_crow_indices == want_target.sparse_crow_indices is not None
    assert target.sparse_col_indices == want_target.sparse_col_indices
    assert target.to_torch().tolist() == want_target.to_torch().tolist()
    alt, want_alt = over_http.prompt_alt_tokens, in_process.prompt_alt_tokens
    assert alt is not None and want_alt is not None
    assert alt.tokens.tolist() == want_alt.tokens.tolist()
    assert alt.logprobs.tolist() == want_alt.logprobs.tolist()
    assert list(alt.tokens.to_torch().shape) == [len(TOKENS) - 1, 2]
    full = wire.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
    last = wire.compute_logprobs(types.ModelInput.from_ints(TOKENS), prompt_logprobs_last_n=2)
    assert last.result() == [None] * (len(TOKENS) - 2) + full[-2:]
    too_wide = wire.sample(
        types.ModelInput.from_ints(TOKENS), 1, types.SamplingParams(max_tokens=1),
        topk_sample_logprobs=10_000,
    )  # fmt: skip
    with pytest.raises(tinker.RequestFailedError, match="topk_sample_logprobs must be"):
        too_wide.result()


def test_an_evaluation_on_the_tinker_backend_matches_the_local_one(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eval run (algorithms/evaluation.py) with `backend: tinker` samples and scores through
    the SDK over the wire: the same greedy answers, scores and reference NLLs as the same run
    on the local engine. (The SDK's sampling client downloads its tokenizer from the model hub
    by the base model's name; offline, the built-in tokenizer stands in for the download.)"""
    import importlib
    import json

    from thinker.algorithms import evaluation
    from thinker.algorithms.evaluation_config import EvalConfig
    from thinker.engine.local.models import load_tokenizer

    sdk_sampling = importlib.import_module("tinker.lib.public_interfaces.sampling_client")
    monkeypatch.setattr(
        sdk_sampling, "_load_tokenizer_from_model_info", lambda name, *_: load_tokenizer(name)
    )

    rows = [{"prompt": f"{i}+1", "completion": str(i + 1)} for i in range(4)]
    dataset = tmp_path / "set.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    models = [{"model": TINY, "name": "a"}, {"model": TINY, "name": "b"}]
    found = {}
    for backend in ("local", "tinker"):
        config = EvalConfig(
            dataset=dataset,
            models=models,
            backend=backend,
            max_tokens=6,
            resamples=200,
            log_path=tmp_path / backend,
        )
        service = None
        if backend == "tinker":
            service = thinker.ServiceClient(backend="tinker", base_url=url, api_key="tml-x")
        try:
            asyncio.run(evaluation.main(config, service=service))
        finally:
            if service is not None:
                service.close("success")
        lines = (tmp_path / backend / evaluation.SAMPLES).read_text().splitlines()
        found[backend] = [json.loads(line) for line in lines]
    local, remote = found["local"], found["tinker"]
    assert [r["answers"][0]["answers"] for r in remote] == [
        r["answers"][0]["answers"] for r in local
    ]
    for got, want in zip(remote, local, strict=True):
        for a, b in zip(got["answers"], want["answers"], strict=True):
            assert a["score"] == b["score"]
            assert a["nll"] == pytest.approx(b["nll"], rel=1e-6)


def test_a_review_on_the_tinker_backend_matches_the_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (algorithms/review.py) with `backend: tinker` scores its pairs through the SDK
    over the wire: a committee of two sampler checkpoints saved over the wire gives the same
    probabilities as the same checkpoints read from the server's disk by the local engine."""
    import importlib
    import json

    from thinker.algorithms import review
    from thinker.algorithms.review_config import ReviewConfig
    from thinker.engine.local import checkpoints
    from thinker.engine.local.models import load_tokenizer

    sdk_sampling = importlib.import_module("tinker.lib.public_interfaces.sampling_client")
    monkeypatch.setattr(
        sdk_sampling, "_load_tokenizer_from_model_info", lambda name, *_: load_tokenizer(name)
    )
    rows = [{"prompt": f"{i}+1", "chosen": str(i + 1), "rejected": str(i + 2)} for i in range(5)]
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = make_settings(tmp_path / "data", None)
    with _serving(settings) as root:
        wire = tinker.ServiceClient(base_url=root, api_key="tml-x")
        try:
            client = wire.create_lora_training_client(TINY, rank=4, seed=2).result()
            paths = [client.save_weights_for_sampler("before").result().path]
            client.forward_backward([_datum(TOKENS)], "cross_entropy").result()
            client.optim_step(types.AdamParams(learning_rate=5e-2)).result()
            paths.append(client.save_weights_for_sampler("after").result().path)
            storage = settings.data_dir / "tinker"
            on_disk = [str(checkpoints.resolve(p, storage)) for p in paths]
            found = {}
            for backend, committee in (("tinker", paths), ("local", on_disk)):
                config = ReviewConfig(
                    dataset=dataset,
                    reward_models=committee,
                    base_model=TINY,
                    backend=backend,
                    queue_size=3,
                    log_path=tmp_path / backend,
                )
                service = None
                if backend == "tinker":
                    service = thinker.ServiceClient(
                        backend="tinker", base_url=root, api_key="tml-x"
                    )
                try:
                    asyncio.run(review.main(config, service=service))
                finally:
                    if service is not None:
                        service.close("success")
                lines = (tmp_path / backend / review.PAIRS).read_text().splitlines()
                found[backend] = [json.loads(line) for line in lines]
        finally:
            wire.close("success")
    remote, local = found["tinker"], found["local"]
    assert [r["index"] for r in remote] == [r["index"] for r in local]  # the same queue order
    for got, want in zip(remote, local, strict=True):
        assert got["p_a"] == pytest.approx(want["p_a"], abs=1e-6)
        assert got["p_a"][0] != pytest.approx(got["p_a"][1], abs=1e-9)  # two different models
