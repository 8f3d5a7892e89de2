"""Shared-prompt decoding (engine/local/prefix.py): several calls' rows in one decode, each
prompt prefilled once and its cache shared by its rows.

Its logits must be the plain dynamic-cache decode's, step by step, for groups of equal and
unequal size, across token buckets, and when a kept capture is reused for other prompts; the
sampling client must decode calls made together in one decode and give each what it gives
alone; a bad call fails alone; running out of memory splits the calls instead of failing.
"""

from __future__ import annotations

import pytest
import torch
from tests.support.prefix_decode import shared_decode
from tests.support.sampling import worker_held
from tinker import types
from tiny_lora import tiny_lora_model

import thinker
from thinker.engine.local import prefix
from thinker.engine.local.decode import EagerDecoder
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.errors import BackendError

torch.set_num_threads(1)


def _plain(model: torch.nn.Module, prompts: list[list[int]], counts: list[int], steps: int):
    """Each group decoded alone on a dynamic cache, its prompt's cache repeated per row; row i
    of a group is fed its (i+1)-th likeliest token so the rows differ."""
    out = []
    for prompt, n in zip(prompts, counts, strict=True):
        decoder = EagerDecoder(model, "cache")
        logits = [decoder.prefill(torch.tensor([prompt]), n, steps)]
        for _ in range(steps - 1):
            logits.append(decoder.step(logits[-1].topk(n, dim=-1).indices.diagonal()))
        out.append(torch.stack(logits))
    return torch.cat(out, dim=1)  # (steps, rows, vocab)


@pytest.mark.parametrize(
    ("counts", "prefill_tokens"),
    [([3, 3, 3], 16384), ([3, 1, 4], 16384), ([3, 1, 4], 50)],
    ids=["equal", "unequal", "prefilled-in-two-forwards"],
)
@torch.inference_mode()
def test_shared_prompt_decode_equals_the_plain_decode(monkeypatch, counts, prefill_tokens) -> None:  # noqa: ANN001
    """The prompts (40, 17 and 3 tokens) are prefilled right-padded in one forward, or at 50
    padded tokens a forward as [40] then [17, 3]."""
    monkeypatch.setattr(prefix, "TOKEN_BUCKET", 8)  # 20 steps cross two bucket boundaries
    monkeypatch.setattr(prefix, "PREFILL_TOKENS", prefill_tokens)
    model = tiny_lora_model().eval()
    prompts = [list(range(5, 45)), list(range(50, 67)), list(range(100, 103))]
    decoder = prefix.PrefixDecoder(model, model.config, graphs=False)
    expected = _plain(model, prompts, counts, steps=20)
    got = shared_decode(decoder, prompts, counts, steps=20)
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    capture = prefix._CAPTURES[model]
    assert capture.cache.layout.adapter == "merged"  # the adapter folded into the weights
    # The kept capture serves the next call of the same layout: nothing stale leaks in.
    others = [list(range(200, 230)), list(range(7, 60)), list(range(300, 301))]
    again = shared_decode(decoder, others, counts, steps=20)
    assert prefix._CAPTURES[model] is capture
    assert torch.allclose(again, _plain(model, others, counts, steps=20), atol=1e-5)


@torch.inference_mode()
def test_the_merged_adapter_follows_the_live_one_and_leaves_the_model_as_it_was() -> None:
    """An adapter trained between two decodes is what the second decodes (the merge is made
    at each prefill); the model's own weights come back untouched, tied ones included."""
    model = tiny_lora_model(train_unembed=True).eval()
    weights = {n: p.clone() for n, p in model.named_parameters()}
    prompts, counts = [list(range(60, 80))], [2]
    decoder = prefix.PrefixDecoder(model, model.config, graphs=False)
    shared_decode(decoder, prompts, counts, steps=4)
    for name, p in model.named_parameters():
        assert torch.equal(p, weights[name]), name
        if "lora_B" in name:
            p.add_(0.05)  # as an optimizer step would
    assert prefix._CAPTURES[model].cache.layout.adapter == "merged"
    assert torch.allclose(
        shared_decode(decoder, prompts, counts, steps=4),
        _plain(model, prompts, counts, 4),
        atol=1e-5,
    )


@torch.inference_mode()
def test_shared_prompt_decode_with_the_adapter_off() -> None:
    model = tiny_lora_model().eval()
    prompts, counts = [list(range(60, 80)), list(range(9, 30))], [2, 2]
    decoder = prefix.PrefixDecoder(model, model.config, graphs=False)
    with_adapter = shared_decode(decoder, prompts, counts, steps=6)
    with model.disable_adapter():
        base = shared_decode(decoder, prompts, counts, steps=6)
        expected = _plain(model, prompts, counts, steps=6)
    assert torch.allclose(base, expected, atol=1e-5)
    assert not torch.allclose(base, with_adapter, atol=1e-3)


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> LocalSamplingClient:
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("storage"), device="cpu")
    return service.create_sampling_client(base_model="thinker/tiny").result()  # type: ignore[no-any-return]


def _input(sampler: LocalSamplingClient, text: str) -> types.ModelInput:
    return types.ModelInput.from_ints(
        sampler.get_tokenizer().encode(text, add_special_tokens=False)
    )


CALLS = [  # an RL step's groups: different prompts, sizes, lengths, stops and temperatures
    ("User: 3+4\n\nAssistant:", 4, types.SamplingParams(max_tokens=30, seed=1, stop=[])),
    ("2+2=", 2, types.SamplingParams(max_tokens=12, temperature=0.7, seed=2, stop=["e"])),
    ("User: name a colour\n\nAssistant:", 3, types.SamplingParams(max_tokens=20, temperature=0.0)),
]


def test_calls_made_together_decode_together_and_each_gets_what_it_gets_alone(
    sampler: LocalSamplingClient,
) -> None:
    alone = [sampler.sample(_input(sampler, t), n, p).result() for t, n, p in CALLS]
    prefills: list[tuple[int, ...]] = []
    original = prefix.PrefixDecoder.prefill

    def counting(self, prompts, counts, max_new_tokens):  # noqa: ANN001, ANN202
        prefills.append(tuple(counts))
        return original(self, prompts, counts, max_new_tokens)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prefix.PrefixDecoder, "prefill", counting)
        with worker_held(sampler):
            futures = [sampler.sample(_input(sampler, t), n, p) for t, n, p in CALLS]
        together = [f.result() for f in futures]
    assert prefills == [(4, 2, 3)]  # one decode for all three calls
    for got, ref in zip(together, alone, strict=True):
        assert [list(s.tokens) for s in got.sequences] == [list(s.tokens) for s in ref.sequences]
        assert [s.stop_reason for s in got.sequences] == [s.stop_reason for s in ref.sequences]
        for seq, expected in zip(got.sequences, ref.sequences, strict=True):
            assert seq.logprobs == pytest.approx(expected.logprobs, abs=1e-5)
    assert any(s.stop_reason == "stop" for s in together[1].sequences)  # the stop string bit


def test_a_bad_call_fails_alone(sampler: LocalSamplingClient) -> None:
    text, n, params = CALLS[0]
    with worker_held(sampler):
        good = sampler.sample(_input(sampler, text), n, params)
        bad = sampler.sample(_input(sampler, text), 2, types.SamplingParams(max_tokens=0))
    assert len(good.result().sequences) == n
    with pytest.raises(Exception, match="max_tokens must be at least 1"):
        bad.result()


def test_out_of_memory_splits_the_calls_then_names_the_setting(
    sampler: LocalSamplingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card that holds at most 5 rows at once (the out-of-memory error is raised where a
    CUDA allocation would raise it): 4 + 2 + 3 rows decode as 4, then 2 + 3; 6 rows fail."""
    original = prefix.SharedPromptCache.allocate.__func__  # type: ignore[attr-defined]
    sizes: list[int] = []

    def allocate(cls, layout, *args):  # noqa: ANN001, ANN202
        sizes.append(layout.rows)
        if layout.rows > 5:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated: a 5-row card)")
        return original(cls, layout, *args)

    monkeypatch.setattr(prefix.SharedPromptCache, "allocate", classmethod(allocate))
    alone = [sampler.sample(_input(sampler, t), n, p).result() for t, n, p in CALLS]
    with worker_held(sampler):
        futures = [sampler.sample(_input(sampler, t), n, p) for t, n, p in CALLS]
    for future, ref in zip(futures, alone, strict=True):
        got = future.result()
        assert [list(s.tokens) for s in got.sequences] == [list(s.tokens) for s in ref.sequences]
    assert sizes[-3:] == [9, 4, 5]
    too_many = sampler.sample(_input(sampler, CALLS[0][0]), 6, CALLS[0][2])
    with pytest.raises(BackendError, match="lower num_samples or max_tokens"):
        too_many.result()


def test_training_takes_back_the_memory_a_sampler_of_its_weights_kept(tmp_path) -> None:  # noqa: ANN001
    """A trainer's sampler keeps its decode (cache, graphs, merged adapter) between calls; the
    next training call drops it, so the batch plan sees that memory free, and sampling after
    it makes a new one from the trained weights."""
    client = (
        thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
        .create_lora_training_client("thinker/tiny", rank=4)
        .result()
    )
    text, n, params = CALLS[0]
    sampler = client.save_weights_and_get_sampling_client().result()
    before = sampler.sample(_input(sampler, text), n, params).result()
    assert prefix._CAPTURES.get(client._model) is not None
    tokens = _input(sampler, text).to_ints()
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )
    client.forward_backward([datum], "cross_entropy").result()
    assert prefix._CAPTURES.get(client._model) is None
    client.optim_step(types.AdamParams(learning_rate=0.05)).result()
    after = client.save_weights_and_get_sampling_client().result()
    trained = after.sample(_input(after, text), n, params).result()
    assert prefix._CAPTURES.get(client._model) is not None
    assert [s.logprobs for s in trained.sequences] != [s.logprobs for s in before.sequences]
