"""`thinker.ServiceClient` takes the tinker SDK's arguments (issue 18): each method below has
the parameters of `tinker.ServiceClient`'s (0.38, the version the project pins), in its order,
kinds and defaults, read from the SDK itself; and on the local engine they do what the SDK's
do: the backend by keyword, user metadata kept, `base_model` checked, the creation future
usable as the client, the `_async` twins giving the client itself."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from pathlib import Path

import pytest
import tinker
from tinker import types

import thinker
from thinker.errors import ConfigError

METHODS = [
    "__init__",
    "create_lora_training_client",
    "create_lora_training_client_async",
    "create_training_client_from_state",
    "create_training_client_from_state_async",
    "create_training_client_from_state_with_optimizer",
    "create_training_client_from_state_with_optimizer_async",
    "create_sampling_client",
    "create_sampling_client_async",
]


def _same_parameters(sdk_fn: object, our_fn: object, name: str) -> None:
    """Every SDK parameter taken the same way (name, kind, default, order); ours may add
    keyword parameters with defaults."""
    sdk = inspect.signature(sdk_fn).parameters  # type: ignore[arg-type]
    ours = inspect.signature(our_fn).parameters  # type: ignore[arg-type]
    for param in sdk.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            assert any(p.kind is param.kind for p in ours.values()), f"{name} takes no **kwargs"
            continue
        assert param.name in ours, f"{name} lacks the SDK's {param.name!r}"
        mine = ours[param.name]
        assert mine.kind == param.kind, f"{name}({param.name}): {mine.kind} vs {param.kind}"
        assert mine.default == param.default, f"{name}({param.name}) default"
    positional = [p.name for p in sdk.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in ours.values()][: len(positional)] == positional, name  # order
    extra = [p for n, p in ours.items() if n not in sdk and p.kind is not p.VAR_KEYWORD]
    assert all(p.default is not p.empty for p in extra), f"{name}: {extra} need defaults"


@pytest.mark.parametrize("name", METHODS)
def test_each_sdk_parameter_is_taken_the_same_way(name: str) -> None:
    _same_parameters(
        getattr(tinker.ServiceClient, name), getattr(thinker.ServiceClient, name), name
    )


# Not there yet (issue 18), each checked to be really missing so that this list only shrinks;
# and the SDK's internals, which user code does not call.
MISSING = {
    "ServiceClient": set(),
    "TrainingClient": set(),
    "SamplingClient": {"get_sampler_handle", "from_sampler_handle"},
}
INTERNAL = {"SamplingClient": {"create", "on_queue_state_change"}}
# The RestClient's account-level operations, which belong to a hosted service; and its
# `_async` twins, deprecated in the SDK (its plain methods' futures are awaitable).
ACCOUNT = {
    "assign_session_project",
    "copy_weights",
    "export_session_trace",
    "get_audit_log",
    "get_billing_usage",
    "get_current_checkpoint_storage_usage",
    "get_sampler",
    "get_session",
    "list_sessions",
    "search_sessions",
    "whoami",
}


@pytest.mark.parametrize(
    ("sdk_class", "ours"),
    [
        (tinker.ServiceClient, "thinker.engine.service.ServiceClient"),
        (tinker.TrainingClient, "thinker.engine.local.training.LocalTrainingClient"),
        (tinker.SamplingClient, "thinker.engine.local.sampling.LocalSamplingClient"),
    ],
    ids=["ServiceClient", "TrainingClient", "SamplingClient"],
)
def test_the_local_clients_have_the_sdks_methods(sdk_class: type, ours: str) -> None:
    module, _, name = ours.rpartition(".")
    local = getattr(importlib.import_module(module), name)
    kind = sdk_class.__name__
    for method, fn in inspect.getmembers(sdk_class, callable):
        if method.startswith("_") or method in INTERNAL.get(kind, set()):
            continue
        if method in MISSING[kind]:
            assert not hasattr(local, method), f"{kind}.{method} exists now: drop it from MISSING"
            continue
        assert hasattr(local, method), f"the local {kind} lacks {method}"
        _same_parameters(fn, getattr(local, method), f"{kind}.{method}")


def test_the_backend_is_a_keyword_and_the_first_argument_is_user_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"ServiceClient\(backend='local'\)"):
        thinker.ServiceClient("local")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown argument"):
        thinker.ServiceClient(backend="local", storage_dri=tmp_path)
    monkeypatch.setenv("THINKER_BACKEND", "nowhere")
    with pytest.raises(ConfigError, match="unknown backend 'nowhere'"):
        thinker.ServiceClient()
    monkeypatch.delenv("THINKER_BACKEND")
    service = thinker.ServiceClient(
        {"team": "a"}, "project-1", display_name="d", storage_dir=tmp_path
    )
    assert service.backend == "local"
    assert (service.user_metadata, service.project_id, service.display_name) == (
        {"team": "a"},
        "project-1",
        "d",
    )


def _datum() -> types.Datum:
    tokens = list(range(5, 40))
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def test_creation_calls_as_sdk_code_makes_them(tmp_path: Path) -> None:
    """The cookbook's ways: a creation future used as the client (deprecated, warned), the
    `_async` twins, user metadata, and `base_model` on the from-state calls."""
    service = thinker.ServiceClient({"team": "a"}, storage_dir=tmp_path, device="cpu")
    future = service.create_lora_training_client("thinker/tiny", rank=4, user_metadata={"k": "v"})
    with pytest.warns(FutureWarning, match="deprecated"):
        loss = future.forward_backward([_datum()], "cross_entropy").result().metrics["loss:sum"]
    assert loss > 0
    client = future.result()
    assert client.user_metadata == {"team": "a", "k": "v"}  # type: ignore[attr-defined]
    path = client.save_state("s").result().path

    async def twins() -> tuple[object, object]:
        resumed = await service.create_training_client_from_state_with_optimizer_async(
            path, base_model="thinker/tiny"
        )
        sampler = await service.create_sampling_client_async(base_model="thinker/tiny")
        return resumed, sampler

    resumed, sampler = asyncio.run(twins())
    assert type(resumed) is type(client) and resumed.step == client.step  # type: ignore[attr-defined]
    assert sampler.get_base_model() == "thinker/tiny"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="the checkpoint's base model is 'thinker/tiny'"):
        service.create_training_client_from_state(path, base_model="thinker/other").result()
    with pytest.raises(ConfigError, match="optimizer"):
        service.create_lora_training_client("thinker/tiny", optimizer=object())


def test_a_sampler_future_serves_as_the_sampler(tmp_path: Path) -> None:
    """As the cookbook's rl_loop uses it: `tc.save_weights_and_get_sampling_client().sample(...)`
    (the SDK's sampler futures double as the client, deprecated), same samples as the client's."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    client = service.create_lora_training_client("thinker/tiny", rank=4).result()
    path = client.save_weights_for_sampler("s").result().path
    prompt, params = (
        types.ModelInput.from_ints([5, 6, 7]),
        types.SamplingParams(max_tokens=3, seed=1),
    )
    for future in (
        client.save_weights_and_get_sampling_client(),
        client.create_sampling_client(path),
    ):
        with pytest.warns(FutureWarning, match="deprecated"):
            tokens = future.sample(prompt, 2, params).result().sequences[1].tokens
        assert tokens == future.result().sample(prompt, 2, params).result().sequences[1].tokens


def test_the_clients_async_twins_and_sdk_spellings_work(tmp_path: Path) -> None:
    """As the cookbook calls them: `await tc.forward_backward_async(...)` gives a future whose
    `result_async()` gives the output; `optim_step(adam_params=...)`; `load_state` gives the
    SDK's response; an "inflight" sampler follows the live weights; `sample_async` gives the
    response, with the SDK's top-k logprobs when asked."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4).result()
    prompt = types.ModelInput.from_ints(list(range(5, 20)))
    greedy = types.SamplingParams(max_tokens=6, temperature=0.0, stop=[])

    async def loop() -> tuple[float, object, object, object]:
        live = await tc.save_weights_and_get_sampling_client_async(kind="inflight")
        frozen = await tc.save_weights_and_get_sampling_client_async()
        before = await live.sample_async(prompt, 1, greedy)
        future = await tc.forward_backward_async([_datum()], "cross_entropy")
        output = await future.result_async()
        await (await tc.optim_step_async(adam_params=types.AdamParams(learning_rate=0.5)))
        after = await live.sample_async(prompt, 1, greedy)
        still = await frozen.sample_async(prompt, 1, greedy)
        return output.metrics["loss:sum"], before, after, still

    loss, before, after, still = asyncio.run(loop())
    assert loss > 0 and tc.step == 1  # type: ignore[attr-defined]
    lp = lambda r: list(r.sequences[0].logprobs)  # noqa: E731
    assert lp(after) != lp(before)  # the inflight sampler sees the step
    assert lp(still) == pytest.approx(lp(before), abs=1e-6)  # the snapshot does not
    path = tc.save_state("s").result().path
    assert tc.load_state(path).result() == types.LoadWeightsResponse(path=path)
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    topk = sampler.sample(prompt, 1, greedy, topk_sample_logprobs=5).result().sequences[0]
    assert topk.topk_logprobs is not None and len(topk.topk_logprobs) == len(topk.tokens)
    with pytest.raises(ConfigError, match="adam_params, not both"):
        tc.optim_step(types.AdamParams(), adam_params=types.AdamParams())


def test_the_server_capabilities_list_what_loads_offline(tmp_path: Path) -> None:
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    offered = {m.model_name: m for m in service.get_server_capabilities().supported_models}
    tiny = offered["thinker/tiny"]
    assert tiny.trainable and tiny.sampleable and tiny.max_context_length
    assert asyncio.run(service.get_server_capabilities_async()).supported_models
    assert service.get_console_url() == "" and service.get_telemetry() is None
    assert service.close("success").result() is None


def weighted_nll(logprobs, weights):  # noqa: ANN001, ANN201 - traced by torch.fx
    loss = -(logprobs * weights).sum()
    return loss, {"custom/tokens:sum": weights.sum(), "custom/nll:mean": loss}


def test_a_custom_loss_handle_trains_as_the_built_in_loss(tmp_path: Path) -> None:
    """`create_custom_loss` traces the function with the SDK's own tracer; run through
    `forward_backward_custom` it gives cross_entropy's loss and gradients, and its metrics
    reduce by their suffix (:sum summed, :mean averaged over datums)."""
    import torch

    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    for name, p in tc._model.named_parameters():  # type: ignore[attr-defined]
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    handle = service.create_custom_loss(weighted_nll, {"logprobs": 1, "weights": 1}).result()
    data = [_datum(), _datum()]
    built_in = tc.forward_backward(data, "cross_entropy").result()
    grads = {n: p.grad.clone() for n, p in tc._model.named_parameters() if p.grad is not None}  # type: ignore[attr-defined]
    tc._model.zero_grad()  # type: ignore[attr-defined]
    custom = tc.forward_backward_custom(data, handle).result()
    assert custom.metrics["loss:sum"] == pytest.approx(built_in.metrics["loss:sum"], rel=1e-6)
    assert custom.metrics["custom/tokens:sum"] == 2 * 34
    assert custom.metrics["custom/nll:mean"] == pytest.approx(built_in.metrics["loss:sum"] / 2)
    assert grads
    for name, p in tc._model.named_parameters():  # type: ignore[attr-defined]
        if p.grad is not None:
            assert torch.allclose(p.grad, grads[name], rtol=1e-5, atol=1e-7), name
    with pytest.raises(ValueError, match="has no loss_fn_inputs\\['advantages'\\]"):
        bad = service.create_custom_loss(
            lambda logprobs, advantages: ((logprobs * advantages).sum(), {}),
            {"logprobs": 1, "advantages": 1},
        ).result()
        tc.forward_backward_custom(data, bad)


def test_the_local_rest_client_has_the_sdks_run_and_checkpoint_operations() -> None:
    from tinker.lib.public_interfaces.rest_client import RestClient

    from thinker.engine.local.rest import LocalRestClient

    offered = 0
    for method, fn in inspect.getmembers(RestClient, callable):
        if method.startswith("_") or method.endswith("_async") or method in ACCOUNT:
            assert not hasattr(LocalRestClient, method) or method.startswith("_"), method
            continue
        assert hasattr(LocalRestClient, method), f"the local RestClient lacks {method}"
        _same_parameters(fn, getattr(LocalRestClient, method), f"RestClient.{method}")
        offered += 1
    assert offered == 14


def test_the_local_rest_client_publishes_and_links_external_weights(tmp_path: Path) -> None:
    """In process: publishing sets the listed flag (twice is a conflict, as on Tinker), and an
    external-weights checkpoint's URLs are its files on this machine, matching its checksums."""
    import hashlib
    from urllib.request import urlopen

    from thinker.errors import ConflictError

    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4).result()
    sampler = tc.save_weights_for_sampler("s").result().path
    external = tc.save_weights_external("e").result().path
    rest = service.create_rest_client()
    rest.publish_checkpoint_from_tinker_path(sampler).result()
    listed = {
        c.tinker_path: c.public for c in rest.list_checkpoints(tc.run_id).result().checkpoints
    }
    assert listed[sampler] and not listed[external]
    with pytest.raises(ConflictError, match="already public"):
        rest.publish_checkpoint_from_tinker_path(sampler).result()
    rest.unpublish_checkpoint_from_tinker_path(sampler).result()
    assert not rest.list_checkpoints(tc.run_id).result().checkpoints[0].public
    urls = rest.get_external_weights_urls(external).result().urls
    with urlopen(urls["SHA256SUMS"]) as f:
        sums = [line.split("  ") for line in f.read().decode().splitlines()]
    for digest, name in sums:
        with urlopen(urls[name]) as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name
    with pytest.raises(ConfigError, match="external weights"):
        rest.get_external_weights_urls(sampler).result()


def test_the_rest_client_lists_reads_and_deletes_local_checkpoints(tmp_path: Path) -> None:
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4).result()
    state = tc.save_state("000001", user_metadata={"note": "first"}).result().path
    sampler = tc.save_weights_for_sampler("000001").result().path
    other = service.create_lora_training_client("thinker/tiny", rank=8).result()
    other.save_state("a").result()
    rest = service.create_rest_client()

    runs = rest.list_training_runs().result()
    assert runs.cursor.total_count == 2
    assert runs.training_runs[0].training_run_id == other.run_id  # the most recent first
    run = rest.get_training_run(tc.run_id).result()
    assert (run.base_model, run.lora_rank, run.model_owner) == ("thinker/tiny", 4, "local")
    assert run.last_checkpoint is not None and run.last_checkpoint.tinker_path == state
    assert run.last_sampler_checkpoint is not None
    assert run.last_sampler_checkpoint.tinker_path == sampler
    assert rest.get_training_run_by_tinker_path(sampler).result() == run
    listed = rest.list_checkpoints(tc.run_id).result().checkpoints
    assert {(c.checkpoint_type, c.tinker_path) for c in listed} == {
        ("training", state),
        ("sampler", sampler),
    }
    assert [c.user_metadata for c in listed if c.checkpoint_type == "training"] == [
        {"note": "first"}
    ]
    assert all(c.size_bytes and c.size_bytes > 0 for c in listed)
    info = rest.get_weights_info_by_tinker_path(state).result()
    assert (info.base_model, info.lora_rank, info.is_lora) == ("thinker/tiny", 4, True)
    assert rest.list_user_checkpoints().result().cursor.total_count == 3

    rest.delete_checkpoint(tc.run_id, "sampler_weights/000001").result()
    rest.delete_checkpoint_from_tinker_path(state).result()
    assert rest.list_checkpoints(tc.run_id).result().checkpoints == []
    with pytest.raises(thinker.errors.CheckpointError, match="no training run"):
        rest.get_training_run(tc.run_id).result()
    with pytest.raises(thinker.errors.CheckpointError, match="no checkpoint"):
        service.create_training_client_from_state(state).result()


def test_per_token_clip_thresholds_in_a_datum_reach_the_loss(tmp_path: Path) -> None:
    """A ppo datum's clip_high_threshold input (here 1.01 at every token) acts as
    loss_fn_config's would; without it the default 1.2 applies."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4).result()
    plain = _datum()
    n = len(plain.model_input.to_ints())
    # The sampler's logprobs well below the model's: every ratio is far above any clip.
    inputs = {
        "target_tokens": plain.loss_fn_inputs["target_tokens"],
        "logprobs": [-30.0] * n,
        "advantages": [1.0] * n,
    }

    def ppo(extra: dict, config: dict | None = None) -> float:
        datum = types.Datum(model_input=plain.model_input, loss_fn_inputs={**inputs, **extra})
        return tc.forward(([datum]), "ppo", config).result().metrics["loss:sum"]

    per_token = ppo({"clip_high_threshold": [1.01] * n})
    assert per_token == pytest.approx(ppo({}, {"clip_high_threshold": 1.01}), rel=1e-6)
    assert per_token == pytest.approx(-1.01 * n, rel=1e-6)
    assert ppo({}) == pytest.approx(-1.2 * n, rel=1e-6)


def test_external_weights_are_the_merged_model_in_hugging_face_format(tmp_path: Path) -> None:
    """`save_weights_external` writes base + adapter folded in: transformers loads it, and
    its logprobs are the training client's; it samples as a base model; the REST client
    lists it as "external"."""
    import torch
    from transformers import AutoModelForCausalLM

    from thinker.engine.local import checkpoints

    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    for name, p in tc._model.named_parameters():  # type: ignore[attr-defined]
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    path = tc.save_weights_external("merged").result().path
    assert path == f"tinker://{tc.run_id}/external_weights/merged"
    assert types.ParsedCheckpointTinkerPath.from_tinker_path(path).checkpoint_type == "external"
    directory = checkpoints.resolve(path, tmp_path)
    merged = AutoModelForCausalLM.from_pretrained(directory).eval()
    datum = _datum()
    expected = torch.tensor(
        tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    )
    ids = torch.tensor([datum.model_input.to_ints()])
    with torch.no_grad():
        logp = torch.log_softmax(merged(input_ids=ids).logits[0].float(), dim=-1)
    targets = torch.tensor(datum.loss_fn_inputs["target_tokens"].tolist())
    got = logp.gather(-1, targets[:, None])[:, 0]
    assert torch.allclose(got, expected, atol=1e-4), (got - expected).abs().max()
    with pytest.raises(ConfigError, match="whole model in Hugging Face format"):
        service.create_sampling_client(model_path=path)
    sampler = service.create_sampling_client(base_model=str(directory)).result()
    prompt = types.ModelInput.from_ints(list(range(5, 20)))
    assert (
        len(
            sampler.sample(prompt, 1, types.SamplingParams(max_tokens=3, stop=[]))
            .result()
            .sequences[0]
            .tokens
        )
        == 3
    )
    listed = service.create_rest_client().list_checkpoints(tc.run_id).result().checkpoints
    assert [(c.checkpoint_type, c.tinker_path) for c in listed] == [("external", path)]
    with pytest.raises(ConfigError, match="age_encryption_recipients"):
        tc.save_weights_external("x", age_encryption_recipients=["age1..."])


def test_copy_weights_links_a_checkpoint_into_a_new_run(tmp_path: Path) -> None:
    """The copy resolves, loads and verifies like the source; its weight files are the
    source's (hard links: no bytes duplicated); the source is untouched."""
    import os

    from thinker.engine.local import checkpoints

    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4).result()
    source = tc.save_state("s").result().path
    before = checkpoints.read_meta(checkpoints.resolve(source, tmp_path))
    copy = service.copy_weights(source).result()
    assert copy.startswith("tinker://copy-") and copy.endswith("/weights/s")
    copied_dir, source_dir = (
        checkpoints.resolve(copy, tmp_path),
        checkpoints.resolve(source, tmp_path),
    )
    checkpoints.verify(copied_dir)
    assert os.path.samefile(
        copied_dir / "adapter_model.safetensors", source_dir / "adapter_model.safetensors"
    )
    assert checkpoints.read_meta(source_dir) == before
    assert checkpoints.read_meta(copied_dir)["copied_from"] == source
    resumed = service.create_training_client_from_state_with_optimizer(copy).result()
    assert resumed.step == tc.step  # type: ignore[attr-defined]
    # The copy's own TTL: it expires while the source stays.
    brief = service.copy_weights(source, ttl_seconds=3600).result()
    assert checkpoints.expires_at(checkpoints.resolve(brief, tmp_path)) is not None
    assert checkpoints.expires_at(source_dir) is None
