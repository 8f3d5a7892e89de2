"""Training clients of one base model share one copy of its weights, each with its own adapter,
and their calls are taken in turn; on thinker/tiny, CPU."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
import torch
from tinker import types

import thinker
from thinker.engine.futures import FairExecutor
from thinker.engine.local import checkpoints
from thinker.engine.local.models import load_tokenizer

PROMPT = "User: 3+4\n\nAssistant: 7\n\n"


def _datum(client, text: str = PROMPT) -> types.Datum:  # type: ignore[no-untyped-def]
    ids = client.get_tokenizer().encode(text, add_special_tokens=False)
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )


def _step(client, datum: types.Datum, lr: float = 1e-2):  # type: ignore[no-untyped-def]
    fb = client.forward_backward([datum], "cross_entropy")
    client.optim_step(types.AdamParams(learning_rate=lr)).result()
    return fb.result().metrics["loss:sum"]


def _adapter(client) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return {k: v.detach().clone() for k, v in client._adapter_snapshot().items()}


def test_two_clients_share_the_base_and_train_as_if_alone(tmp_path: Path) -> None:
    """Interleaved calls of two clients (different seeds and ranks, the second's gradient
    accumulated over two calls while the first steps) give each the losses and adapter
    weights, bit for bit, that it gets alone on its own service."""
    alone_a = thinker.ServiceClient(storage_dir=tmp_path / "a", device="cpu")
    a = alone_a.create_lora_training_client("thinker/tiny", rank=4, seed=1).result()
    other = "User: 2+2\n\nAssistant: 4\n\n"
    expected_a = [_step(a, _datum(a)) for _ in range(3)]
    weights_a = _adapter(a)
    alone_b = thinker.ServiceClient(storage_dir=tmp_path / "b", device="cpu")
    b = alone_b.create_lora_training_client("thinker/tiny", rank=8, seed=2).result()
    expected_b = []
    for _ in range(3):
        first = b.forward_backward([_datum(b, other)], "cross_entropy")
        second = b.forward_backward([_datum(b, PROMPT)], "cross_entropy")
        b.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        expected_b.append((first.result().metrics["loss:sum"], second.result().metrics["loss:sum"]))
    weights_b = _adapter(b)
    del a, b

    service = thinker.ServiceClient(storage_dir=tmp_path / "shared", device="cpu")
    a = service.create_lora_training_client("thinker/tiny", rank=4, seed=1).result()
    b = service.create_lora_training_client("thinker/tiny", rank=8, seed=2).result()
    base_a, base_b = a._model.get_base_model(), b._model.get_base_model()
    assert base_a is base_b  # one copy of the base weights
    assert {a.adapter, b.adapter} == set(a._model.peft_config)
    losses_a, losses_b = [], []
    for _ in range(3):
        first = b.forward_backward([_datum(b, other)], "cross_entropy")
        fb_a = a.forward_backward([_datum(a)], "cross_entropy")
        a.optim_step(types.AdamParams(learning_rate=1e-2))
        second = b.forward_backward([_datum(b, PROMPT)], "cross_entropy")
        b.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        losses_a.append(fb_a.result().metrics["loss:sum"])
        losses_b.append((first.result().metrics["loss:sum"], second.result().metrics["loss:sum"]))
    assert losses_a == expected_a and losses_b == expected_b
    for mine, alone in ((_adapter(a), weights_a), (_adapter(b), weights_b)):
        assert mine.keys() == alone.keys()
        for key in mine:
            assert torch.equal(mine[key], alone[key]), key


def test_a_second_clients_checkpoint_and_sampler_are_its_own(tmp_path: Path) -> None:
    """The second client's adapter (not PEFT's "default") saves in the usual layout, loads
    into a new service with the same weights, and its sampler samples it, not the first's."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    a = service.create_lora_training_client("thinker/tiny", rank=4, seed=1).result()
    b = service.create_lora_training_client("thinker/tiny", rank=4, seed=2).result()
    datum = _datum(b)
    for _ in range(3):
        _step(b, datum, lr=5e-2)
    path = b.save_state("b").result().path
    files = {p.name for p in _directory(tmp_path, path).iterdir()}
    assert files == {
        p.name for p in _directory(tmp_path, a.save_state("a").result().path).iterdir()
    }
    assert {"adapter_config.json", "adapter_model.safetensors", "optimizer.pt"} <= files
    fresh = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    loaded = fresh.create_training_client_from_state_with_optimizer(path).result()
    for key, value in _adapter(b).items():
        assert torch.equal(_adapter(loaded)[key], value), key

    prompt = types.ModelInput.from_ints(datum.model_input.to_ints())
    params = types.SamplingParams(max_tokens=6, temperature=0.0, stop=[])
    sampled = {}
    for name, client in (("a", a), ("b", b), ("loaded", loaded)):
        sampler = client.save_weights_and_get_sampling_client().result()
        sampled[name] = sampler.sample(prompt, 1, params).result().sequences[0].tokens
    assert sampled["b"] == sampled["loaded"]
    assert sampled["a"] != sampled["b"]  # b learnt its answer; a is untrained


def _directory(storage: Path, path: str) -> Path:
    return checkpoints.resolve(path, storage)


def test_a_client_that_goes_frees_its_adapter(tmp_path: Path) -> None:
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    a = service.create_lora_training_client("thinker/tiny", rank=4, seed=1).result()
    b = service.create_lora_training_client("thinker/tiny", rank=4, seed=2).result()
    model, gone = a._model, b.adapter
    del b
    gc.collect()
    a.forward([_datum(a)], "cross_entropy").result()  # runs after the release on the worker
    assert gone not in model.peft_config and list(model.peft_config) == [a.adapter]


def test_a_sampler_on_a_clients_model_outlives_the_client_s_variable(tmp_path: Path) -> None:
    """A sampler of a saved adapter made while a training client holds the base samples on
    that client's model and executor. When the caller drops the client (a pipeline's stage
    ends, its judge sampling on in the next stage), the sampler keeps it alive: it used to
    fail with "this client's lane is closed" once the client was collected."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=1).result()
    path = client.save_weights_for_sampler("judge").result().path
    sampler = service.create_sampling_client(model_path=path).result()
    assert sampler._model is client._model  # on the client's model, not a second copy
    del client
    gc.collect()
    prompt = types.ModelInput.from_ints(sampler.get_tokenizer().encode("2+2="))
    params = types.SamplingParams(max_tokens=3, temperature=0.0)
    assert len(sampler.sample(prompt, 1, params).result().sequences[0].tokens) == 3


def test_samplers_of_saved_adapters_of_any_shape_share_one_base(tmp_path: Path) -> None:
    """Samplers of two saved adapters of different shapes (rank 4 on every layer, rank 8 on
    attention only), with no training client left, hold one copy of the base weights between
    them and a training client made later, and each scores as its adapter loaded by PEFT on a
    base of its own; a sampler that goes frees its slot."""
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    paths = {}
    for name, rank, mlp in (("wide", 4, True), ("attn", 8, False)):
        client = service.create_lora_training_client(
            "thinker/tiny", rank=rank, seed=rank, train_mlp=mlp
        ).result()
        for _ in range(2):
            _step(client, _datum(client), lr=5e-2)
        paths[name] = client.save_weights_for_sampler(name).result().path
        del client
    gc.collect()

    tokens = types.ModelInput.from_ints(
        load_tokenizer("thinker/tiny").encode(PROMPT, add_special_tokens=False)
    )
    wide = service.create_sampling_client(model_path=paths["wide"]).result()
    attn = service.create_sampling_client(model_path=paths["attn"]).result()
    base = wide.model.get_base_model()
    assert attn.model.get_base_model() is base  # one copy of the base weights
    trainer = service.create_lora_training_client("thinker/tiny", rank=2).result()
    assert trainer._model.get_base_model() is base
    for name, sampler in (("wide", wide), ("attn", attn)):
        got = torch.tensor(sampler.compute_logprobs(tokens).result()[1:])
        expected = _peft_logprobs(_directory(tmp_path, paths[name]), tokens.to_ints())
        assert torch.allclose(got, expected, atol=1e-5), (name, (got - expected).abs().max())
    slots = set(wide.model.peft_config)
    del attn, sampler
    gc.collect()
    # The release is queued on the worker before these calls; the worker takes its lanes in
    # turn, a lane going to the back once served, so it runs before the second at the latest.
    for _ in range(2):
        wide.compute_logprobs(tokens).result()
    assert len(wide.model.peft_config) == len(slots) - 1


@torch.inference_mode()
def _peft_logprobs(directory: Path, tokens: list[int]) -> torch.Tensor:
    """log p(token i | tokens before i), i >= 1, from the adapter loaded by PEFT on its own
    base model (an implementation apart from the shared one)."""
    from peft import PeftModel

    from thinker.engine.local.models import Placement, load_base_model

    base = load_base_model("thinker/tiny", Placement(torch.device("cpu"), torch.float32, None))
    model = PeftModel.from_pretrained(base, directory).eval()
    logits = model(torch.tensor([tokens])).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(tokens[1:])[:, None])[:, 0]


def test_the_worker_takes_the_clients_calls_in_turn() -> None:
    """A client with ten calls queued delays another's call by one of them, not ten."""
    executor = FairExecutor("test")
    busy, ran = executor.lane(), []
    patient = executor.lane()
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        release.wait(10)

    busy.submit(first)
    assert started.wait(10)
    calls = [busy.submit(ran.append, f"busy {i}") for i in range(10)]
    late = patient.submit(ran.append, "patient")
    release.set()
    late.result(10)
    for call in calls:
        call.result(10)
    assert ran.index("patient") == 0  # right after the call that was running
    assert [r for r in ran if r != "patient"] == [f"busy {i}" for i in range(10)]


def test_a_lane_runs_its_before_hook_and_reports_errors() -> None:
    executor = FairExecutor("test")
    seen: list[str] = []
    lane = executor.lane(lambda: seen.append("before"))
    assert lane.submit(lambda: 3).result(10) == 3

    def fail() -> None:
        raise ValueError("bad call")

    with pytest.raises(ValueError, match="bad call"):
        lane.submit(fail).result(10)
    assert seen == ["before", "before"]
    last = lane.submit(lambda: "queued before the close")
    lane.close()
    with pytest.raises(RuntimeError, match="closed"):
        lane.submit(lambda: None)
    assert last.result(10) == "queued before the close"
    assert seen == ["before"] * 3
