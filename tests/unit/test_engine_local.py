"""The local engine's sampling, checkpoints, futures and device checks, on thinker/tiny."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from tinker import types
from transformers import ByT5Tokenizer

import thinker
from thinker.engine.local.models import Placement, load_base_model
from thinker.errors import BackendError, CheckpointError, ConfigError

PROMPT = "User: 3+4\n\nAssistant:"


@pytest.fixture
def service(tmp_path: Path) -> thinker.ServiceClient:
    return thinker.ServiceClient(storage_dir=tmp_path, device="cpu")


def _ids(tokenizer, text: str) -> list[int]:  # type: ignore[no-untyped-def]
    return tokenizer.encode(text, add_special_tokens=False)


def _trained(service: thinker.ServiceClient, steps: int = 3):  # type: ignore[no-untyped-def]
    tc = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    ids = _ids(tc.get_tokenizer(), PROMPT + " 7\n\n")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    for _ in range(steps):
        tc.forward_backward([datum], "cross_entropy")
        tc.optim_step(types.AdamParams(learning_rate=1e-2))
    return tc, datum


def test_sampled_logprobs_equal_the_models_logprobs_of_those_tokens(service) -> None:  # type: ignore[no-untyped-def]
    tc, _ = _trained(service)
    sampler = tc.save_weights_and_get_sampling_client("s").result()
    prompt = _ids(sampler.get_tokenizer(), PROMPT)
    params = types.SamplingParams(max_tokens=12, temperature=1.0, seed=7, stop=[])
    response = sampler.sample(types.ModelInput.from_ints(prompt), 4, params).result()
    assert len(response.sequences) == 4
    for seq in response.sequences:
        assert len(seq.tokens) == 12 and seq.stop_reason == "length"
        full = sampler.compute_logprobs(types.ModelInput.from_ints(prompt + seq.tokens)).result()
        torch.testing.assert_close(
            torch.tensor(seq.logprobs), torch.tensor(full[len(prompt) :]), rtol=1e-4, atol=1e-4
        )


def test_seed_reproduces_and_top_k_one_is_greedy(service) -> None:  # type: ignore[no-untyped-def]
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    prompt = types.ModelInput.from_ints(_ids(sampler.get_tokenizer(), PROMPT))

    def run(**kw: object) -> list[list[int]]:
        params = types.SamplingParams(max_tokens=8, stop=[], **kw)
        return [s.tokens for s in sampler.sample(prompt, 3, params).result().sequences]

    assert run(seed=1) == run(seed=1)
    assert run(seed=1) != run(seed=2)
    greedy = run(temperature=0.0)
    assert greedy[0] == greedy[1] == greedy[2]
    assert run(top_k=1, seed=5) == greedy
    assert run(top_p=1e-6, seed=9) == greedy


def test_stop_token_ids_and_strings(service) -> None:  # type: ignore[no-untyped-def]
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    tok = sampler.get_tokenizer()
    prompt = types.ModelInput.from_ints(_ids(tok, PROMPT))
    free = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=20, temperature=0.0, stop=[]))
    tokens = free.result().sequences[0].tokens
    # stop on the 5th greedy token (by id) and on the text of tokens 3..4 (as a string)
    by_id = (
        sampler.sample(
            prompt, 1, types.SamplingParams(max_tokens=20, temperature=0.0, stop=[tokens[4]])
        )
        .result()
        .sequences[0]
    )
    first = tokens.index(tokens[4])
    assert by_id.stop_reason == "stop" and by_id.tokens == tokens[: first + 1]
    text = tok.decode(tokens[2:4])
    by_str = (
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=20, temperature=0.0, stop=text))
        .result()
        .sequences[0]
    )
    assert by_str.stop_reason == "stop"
    assert tok.decode(by_str.tokens).endswith(text) or text in tok.decode(by_str.tokens)
    assert len(by_str.tokens) <= 4


def test_prompt_logprobs_and_compute_logprobs_agree(service) -> None:  # type: ignore[no-untyped-def]
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    prompt = types.ModelInput.from_ints(_ids(sampler.get_tokenizer(), PROMPT))
    lps = sampler.compute_logprobs(prompt).result()
    assert lps[0] is None and len(lps) == prompt.length and all(v < 0 for v in lps[1:])
    out = sampler.sample(
        prompt, 1, types.SamplingParams(max_tokens=2), include_prompt_logprobs=True
    ).result()
    assert out.prompt_logprobs[0] is None
    assert out.prompt_logprobs[1:] == pytest.approx(lps[1:], abs=1e-5)


def test_sampler_checkpoint_is_a_plain_peft_adapter(service, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tc, datum = _trained(service)
    path = tc.save_weights_for_sampler("final").result().path
    assert path == f"tinker://{tc.run_id}/sampler_weights/final"
    parsed = types.ParsedCheckpointTinkerPath.from_tinker_path(path)  # the SDK's own parser
    assert (parsed.training_run_id, parsed.checkpoint_type) == (tc.run_id, "sampler")
    directory = tmp_path / tc.run_id / "sampler_weights" / "final"
    assert (directory / "adapter_config.json").is_file()
    meta = json.loads((directory / "thinker_checkpoint.json").read_text())
    assert meta["kind"] == "sampler_weights" and meta["step"] == 3
    # PEFT loads it onto a freshly built base model and gives the training client's logits.
    base = load_base_model("thinker/tiny", Placement(torch.device("cpu"), torch.float32))
    peft_model = PeftModel.from_pretrained(base, directory)
    ids = torch.tensor([datum.model_input.to_ints()])
    with torch.no_grad():
        torch.testing.assert_close(
            peft_model(input_ids=ids).logits, tc._model(input_ids=ids).logits
        )
    # and the engine's own sampler agrees with the training client on every logprob
    sampler = service.create_sampling_client(model_path=path).result()
    tokens = datum.model_input.to_ints() + [datum.loss_fn_inputs["target_tokens"].tolist()[-1]]
    fwd = tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    assert sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[
        1:
    ] == pytest.approx(fwd, abs=1e-4)


def test_state_round_trip_restores_weights_optimizer_and_step(service) -> None:  # type: ignore[no-untyped-def]
    tc, datum = _trained(service)
    path = tc.save_state("ckpt").result().path
    resumed = service.create_training_client_from_state_with_optimizer(path).result()
    fresh_optimizer = service.create_training_client_from_state(path).result()
    assert resumed.step == 3 and fresh_optimizer.step == 0
    for a, b in zip(
        tc._model.state_dict().values(), resumed._model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    # one more identical step on both gives bit-identical weights (optimizer moments restored)
    for client in (tc, resumed):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    for (n, a), b in zip(tc._model.named_parameters(), resumed._model.parameters(), strict=True):
        assert torch.equal(a, b), n


def test_checkpoints_are_atomic_and_never_overwritten(service, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tc, _ = _trained(service, steps=1)
    tc.save_state("a").result()
    with pytest.raises(CheckpointError, match="already exists"):
        tc.save_state("a").result()
    leftovers = [p for p in (tmp_path / tc.run_id / "weights").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    with pytest.raises(CheckpointError, match="invalid checkpoint name"):
        tc.save_state("../escape")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        # the older thinker:// form still resolves (to nothing here)
        service.create_training_client_from_state(f"thinker://{tc.run_id}/weights/missing")
    with pytest.raises(CheckpointError, match="malformed"):
        service.create_sampling_client(model_path="thinker://only-run")


def test_the_sdks_second_argument_is_a_ttl_and_never_overwrites(
    service, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """`save_state("a", 3600)` is the tinker SDK's `ttl_seconds=3600`, never an overwrite (it
    used to be read as overwrite=3600 and replaced "a"): the existing "a" is refused and stays
    as it was. A checkpoint saved with a TTL is there until the TTL runs out, then refused by
    name and deleted; `user_metadata` is kept with the checkpoint."""
    from thinker.engine.local import checkpoints

    tc, _ = _trained(service, steps=1)
    path = tc.save_state("a", user_metadata={"purpose": "test"}).result().path
    directory = checkpoints.resolve(path, tmp_path)
    before = checkpoints.read_meta(directory)
    assert before["user_metadata"] == {"purpose": "test"}
    tc.optim_step(types.AdamParams(learning_rate=1e-2)).result()  # the step moves on
    with pytest.raises(CheckpointError, match="already exists"):
        tc.save_state("a", 3600).result()
    assert checkpoints.read_meta(directory) == before
    replaced = tc.save_state("a", overwrite=True).result().path
    assert (
        checkpoints.read_meta(checkpoints.resolve(replaced, tmp_path))["created"]
        > before["created"]
    )
    # A TTL: the checkpoint loads until its hour is up, then it is gone.
    sampler = tc.save_weights_for_sampler("brief", 3600).result().path
    brief = checkpoints.resolve(sampler, tmp_path)
    checkpoints.verify(brief)  # the expiry sits beside the checksums
    assert checkpoints.expires_at(brief) is not None
    now = checkpoints.clock()
    monkeypatch.setattr(checkpoints, "clock", lambda: now + 3599)
    service.create_sampling_client(model_path=sampler).result()
    monkeypatch.setattr(checkpoints, "clock", lambda: now + 3601)
    with pytest.raises(CheckpointError, match="expired"):
        service.create_sampling_client(model_path=sampler)
    assert not brief.exists()
    with pytest.raises(CheckpointError, match="TTL is a number of seconds"):
        tc.save_state("b", 0)


def test_calls_are_futures_that_run_in_submission_order(service) -> None:  # type: ignore[no-untyped-def]
    """Submitting three steps before awaiting any gives exactly the losses of awaiting each."""

    async def pipelined() -> list[float]:
        tc, datum = _trained(service, steps=0)
        futures = []
        for _ in range(3):
            futures.append(tc.forward_backward([datum], "cross_entropy"))
            tc.optim_step(types.AdamParams(learning_rate=1e-2))
        return [(await f).metrics["loss:sum"] for f in futures]

    def one_by_one() -> list[float]:
        tc, datum = _trained(service, steps=0)
        losses = []
        for _ in range(3):
            losses.append(
                tc.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"]
            )
            tc.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        return losses

    losses = asyncio.run(pipelined())
    assert losses == one_by_one()
    assert losses[0] > losses[1] > losses[2]


def test_get_info_and_tokenizer(service) -> None:  # type: ignore[no-untyped-def]
    tc = service.create_lora_training_client("thinker/tiny", rank=8).result()
    info = tc.get_info()
    assert info.model_id == tc.run_id and info.lora_rank == 8 and info.is_lora
    assert info.model_data.model_name == "thinker/tiny"
    assert tc.get_tokenizer().decode(_ids(tc.get_tokenizer(), "hi")) == "hi"


def test_lora_flags_choose_the_adapted_layers(service) -> None:  # type: ignore[no-untyped-def]
    def adapted(**flags: bool) -> set[str]:
        tc = service.create_lora_training_client("thinker/tiny", rank=2, **flags).result()
        return {
            n.split(".lora_")[0].rsplit(".", 1)[-1]
            for n, _ in tc._model.named_parameters()
            if "lora_A" in n
        }

    assert adapted() == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "lm_head",
    }
    assert adapted(train_mlp=False, train_unembed=False) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    assert adapted(train_attn=False, train_unembed=False) == {"gate_proj", "up_proj", "down_proj"}
    with pytest.raises(ConfigError, match="no LoRA target"):
        adapted(train_attn=False, train_mlp=False, train_unembed=False)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_qlora_is_refused_without_cuda_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="4-bit QLoRA needs a CUDA GPU"):
        thinker.ServiceClient(storage_dir=tmp_path, quantization="4bit")
    with pytest.raises(BackendError, match="CUDA is not available"):
        thinker.ServiceClient(storage_dir=tmp_path, device="cuda")


def test_unknown_models_fail_clearly(service) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="unknown built-in model"):
        service.create_lora_training_client("thinker/huge")
    with pytest.raises(BackendError, match="cannot load base model '/nonexistent/model'"):
        service.create_lora_training_client("/nonexistent/model")


def test_a_local_model_directory_loads_like_a_hub_model(service, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """transformers' from_pretrained path: a saved model + tokenizer directory, no hub."""
    model_dir = tmp_path / "my-model"
    load_base_model("thinker/tiny", Placement(torch.device("cpu"), torch.float32)).save_pretrained(
        model_dir
    )
    ByT5Tokenizer().save_pretrained(model_dir)
    from_dir = service.create_lora_training_client(str(model_dir), rank=4, seed=0).result()
    builtin = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([5, 6, 7, 8]),
        loss_fn_inputs={"target_tokens": [6, 7, 8, 9], "weights": [1.0] * 4},
    )
    losses = [
        c.forward([datum], "cross_entropy").result().metrics["loss:sum"]
        for c in (from_dir, builtin)
    ]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert from_dir.get_info().model_data.model_name == str(model_dir)


def test_samplers_share_the_training_model_and_stay_frozen_snapshots(service) -> None:  # type: ignore[no-untyped-def]
    """No second model copy: a snapshot sampler swaps its adapter in and back out, exactly."""
    tc, datum = _trained(service, steps=2)
    tokens = datum.model_input.to_ints()
    prompt = types.ModelInput.from_ints(tokens)
    snapshot = tc.save_weights_and_get_sampling_client("snap").result()
    base = service.create_sampling_client(base_model="thinker/tiny").result()
    from_path = service.create_sampling_client(model_path=snapshot.model_path).result()
    assert (
        snapshot._model is tc._model and base._model is tc._model and from_path._model is tc._model
    )
    before = snapshot.compute_logprobs(prompt).result()
    for _ in range(2):  # train on; the snapshot must not move
        tc.forward_backward([datum], "cross_entropy")
        tc.optim_step(types.AdamParams(learning_rate=1e-2))
    assert snapshot.compute_logprobs(prompt).result() == before
    assert from_path.compute_logprobs(prompt).result() == before
    # the base sampler equals a separately loaded base model
    fresh = thinker.ServiceClient(storage_dir=service._impl.storage_dir, device="cpu")
    alone = fresh.create_sampling_client(base_model="thinker/tiny").result()
    assert alone._model is not tc._model
    assert base.compute_logprobs(prompt).result() == pytest.approx(
        alone.compute_logprobs(prompt).result(), abs=1e-6
    )
    # and sampling in between left the live weights exactly as training made them
    live = tc.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    twin, _ = _trained(fresh, steps=4)
    assert (
        twin.forward([datum], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
        == live
    )
