"""The SDK's extra `sample` options on the local sampler (tinker 0.38's SamplingClient.sample):
`topk_sample_logprobs`, `topk_prompt_logprobs`, `target_prompt_logprobs`,
`prompt_alt_tokens_k` and `prompt_logprobs_last_n`, and `compute_logprobs`'s last n.

Every value is checked against a plain forward of the tiny model computed here, independently
of the sampler: log_softmax of `model(input_ids).logits`. On both decode paths (the grouped
shared-prompt decode, and the eager one of models whose attention it cannot take), and for
calls decoded together. Bad values are ConfigErrors naming the field.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tests.support.sampling import worker_held
from tinker import types

import thinker
from thinker.engine.local import prefix
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.errors import ConfigError

torch.set_num_threads(1)  # the tiny model gains nothing from threads; other tests share the CPU

PROMPT = list(range(5, 21))  # 16 tokens
VOCAB = 384  # the tiny model's


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> LocalSamplingClient:
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("storage"), device="cpu")
    return service.create_sampling_client(base_model="thinker/tiny").result()  # type: ignore[no-any-return]


@pytest.fixture(params=["grouped", "eager"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared-prompt decode (prefix.py), or the eager one a sliding-window model gets."""
    if request.param == "eager":
        monkeypatch.setattr(prefix, "can_decode", lambda model: False)
    return str(request.param)


@torch.inference_mode()
def plain_logprobs(sampler: LocalSamplingClient, tokens: list[int]) -> torch.Tensor:
    """Row i: log p(. | tokens[: i + 1]) over the vocabulary, from one plain forward."""
    logits = sampler.model(torch.tensor([tokens])).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


def _ids(prompt: list[int]) -> types.ModelInput:
    return types.ModelInput.from_ints(prompt)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_topk_sample_logprobs_are_each_steps_sorted_log_softmax(
    sampler: LocalSamplingClient, path: str, temperature: float
) -> None:
    """At temperature 0 the first of each step's top-k is the sampled token with its logprob;
    at any temperature the k are the plain forward's k likeliest, sorted, with its values
    (the model's own distribution, as the sampled logprobs), and asking for them changes no
    sampled token."""
    params = types.SamplingParams(max_tokens=6, temperature=temperature, seed=7, stop=[])
    out = sampler.sample(_ids(PROMPT), 2, params, topk_sample_logprobs=5).result()
    without = sampler.sample(_ids(PROMPT), 2, params).result()
    for seq, ref in zip(out.sequences, without.sequences, strict=True):
        assert list(seq.tokens) == list(ref.tokens) and seq.logprobs == ref.logprobs
        assert seq.topk_logprobs is not None and len(seq.topk_logprobs) == len(seq.tokens) == 6
        expected = plain_logprobs(sampler, PROMPT + list(seq.tokens[:-1]))[len(PROMPT) - 1 :]
        for step, top in enumerate(seq.topk_logprobs):
            assert top is not None and len(top) == 5
            values = [v for _, v in top]
            assert values == sorted(values, reverse=True)
            want = expected[step].topk(5)
            assert [t for t, _ in top] == want.indices.tolist()
            assert values == pytest.approx(want.values.tolist(), abs=1e-5)
            if temperature == 0.0:
                assert top[0] == (seq.tokens[step], pytest.approx(seq.logprobs[step], abs=1e-6))
    assert without.sequences[0].topk_logprobs is None  # not asked, not computed


def test_prompt_topk_targets_and_last_n_equal_a_plain_forward(
    sampler: LocalSamplingClient, path: str
) -> None:
    """`prompt_logprobs_last_n=5`: prompt logprobs and top-k rows before the last 5 are None
    (as the SDK's response reads them); the rest, and every requested target id (-1 cells:
    0.0, unaffected by last_n), are the plain forward's values."""
    expected = plain_logprobs(sampler, PROMPT)[:-1]  # row r scores prompt position r + 1
    rows, n = len(PROMPT) - 1, 5
    ids = torch.full((rows, 3), -1, dtype=torch.long)
    ids[2] = torch.tensor([7, 300, -1])
    ids[rows - 1] = torch.tensor([0, 383, PROMPT[-1]])
    greedy = types.SamplingParams(max_tokens=2, temperature=0.0)
    out = sampler.sample(
        _ids(PROMPT),
        1,
        greedy,
        include_prompt_logprobs=True,
        topk_prompt_logprobs=4,
        target_prompt_logprobs=types.TensorData.from_torch(ids),
        prompt_logprobs_last_n=n,
    ).result()

    assert out.prompt_logprobs is not None and out.topk_prompt_logprobs is not None
    assert out.prompt_logprobs[: len(PROMPT) - n] == [None] * (len(PROMPT) - n)
    assert out.topk_prompt_logprobs[: len(PROMPT) - n] == [None] * (len(PROMPT) - n)
    gathered = expected.gather(-1, torch.tensor(PROMPT[1:])[:, None])[:, 0]
    assert out.prompt_logprobs[-n:] == pytest.approx(gathered[-n:].tolist(), abs=1e-5)
    for position in range(len(PROMPT) - n, len(PROMPT)):
        top = out.topk_prompt_logprobs[position]
        want = expected[position - 1].topk(4)
        assert top is not None and [t for t, _ in top] == want.indices.tolist()
        assert [v for _, v in top] == pytest.approx(want.values.tolist(), abs=1e-5)

    assert out.target_prompt_logprobs is not None
    got = out.target_prompt_logprobs.to_torch()
    assert list(got.shape) == [rows, 3] and got.dtype == torch.float32
    want_targets = expected.gather(-1, ids.clamp(min=0)).masked_fill(ids < 0, 0.0)
    assert torch.allclose(got, want_targets, atol=1e-5)
    assert got[2, 0] < 0 and got[2, 2] == 0.0 and got[0].tolist() == [0.0] * 3


def test_topk_prompt_alone_and_sparse_targets_keep_the_sdks_layout(
    sampler: LocalSamplingClient,
) -> None:
    """Without include_prompt_logprobs, the top-k covers every position but the first (no
    context) and prompt_logprobs stays None; a sparse target request gets a sparse answer
    with the same cells."""
    expected = plain_logprobs(sampler, PROMPT)[:-1]
    ids = torch.full((len(PROMPT) - 1, 4), -1, dtype=torch.long)
    ids[5, 1], ids[9, 3] = 42, 17
    target = types.TensorData.from_torch_sparse(ids, pad_value=-1)
    assert target.sparse_crow_indices is not None  # sparse on the way in
    out = sampler.sample(
        _ids(PROMPT),
        1,
        types.SamplingParams(max_tokens=1),
        topk_prompt_logprobs=2,
        target_prompt_logprobs=target,
    ).result()
    assert out.prompt_logprobs is None
    assert out.topk_prompt_logprobs is not None and out.topk_prompt_logprobs[0] is None
    assert len(out.topk_prompt_logprobs) == len(PROMPT)
    assert all(top is not None and len(top) == 2 for top in out.topk_prompt_logprobs[1:])
    answer = out.target_prompt_logprobs
    assert answer is not None
    assert answer.sparse_crow_indices == target.sparse_crow_indices
    assert answer.sparse_col_indices == target.sparse_col_indices
    assert answer.data == pytest.approx([expected[5, 42].item(), expected[9, 17].item()], abs=1e-5)


def test_prompt_alt_tokens_are_draws_with_the_models_logprobs(
    sampler: LocalSamplingClient, path: str
) -> None:
    """k draws per prompt position after the first, [len(prompt) - 1, k]: the argmax each
    time at temperature 0; at temperature 1 each with its plain-forward logprob, the same
    for the same seed, and the sampled tokens those of a call without them."""
    expected = plain_logprobs(sampler, PROMPT)[:-1]
    greedy = types.SamplingParams(max_tokens=3, temperature=0.0)
    alt = sampler.sample(_ids(PROMPT), 1, greedy, prompt_alt_tokens_k=3).result().prompt_alt_tokens
    assert alt is not None
    tokens, logprobs = alt.tokens.to_torch(), alt.logprobs.to_torch()
    assert list(tokens.shape) == list(logprobs.shape) == [len(PROMPT) - 1, 3]
    assert (tokens == expected.argmax(-1, keepdim=True)).all()

    hot = types.SamplingParams(max_tokens=4, temperature=1.0, seed=3, stop=[])
    first = sampler.sample(_ids(PROMPT), 2, hot, prompt_alt_tokens_k=8).result()
    again = sampler.sample(_ids(PROMPT), 2, hot, prompt_alt_tokens_k=8).result()
    plain = sampler.sample(_ids(PROMPT), 2, hot).result()
    assert first.prompt_alt_tokens is not None and again.prompt_alt_tokens is not None
    tokens = first.prompt_alt_tokens.tokens.to_torch()
    assert tokens.dtype == torch.int64 and torch.equal(
        tokens, again.prompt_alt_tokens.tokens.to_torch()
    )
    assert torch.allclose(
        first.prompt_alt_tokens.logprobs.to_torch(), expected.gather(-1, tokens), atol=1e-5
    )
    assert len(set(tokens.flatten().tolist())) > 8  # drawn, not the argmax
    assert [list(s.tokens) for s in first.sequences] == [list(s.tokens) for s in plain.sequences]


def test_compute_logprobs_last_n_scores_only_the_last_n(sampler: LocalSamplingClient) -> None:
    full = sampler.compute_logprobs(_ids(PROMPT)).result()
    last = sampler.compute_logprobs(_ids(PROMPT), prompt_logprobs_last_n=3).result()
    assert last == [None] * (len(PROMPT) - 3) + full[-3:]
    gathered = plain_logprobs(sampler, PROMPT)[:-1].gather(-1, torch.tensor(PROMPT[1:])[:, None])
    assert last[-3:] == pytest.approx(gathered[-3:, 0].tolist(), abs=1e-5)
    for bad in (0, len(PROMPT)):
        with pytest.raises(ConfigError, match="prompt_logprobs_last_n must be from 1 to"):
            sampler.compute_logprobs(_ids(PROMPT), prompt_logprobs_last_n=bad)


def test_calls_with_different_options_decode_together_as_each_alone(
    sampler: LocalSamplingClient,
) -> None:
    params = types.SamplingParams(max_tokens=5, temperature=0.9, seed=5, stop=[])
    short = PROMPT[:7]
    calls = [
        (PROMPT, 3, {"topk_sample_logprobs": 3, "topk_prompt_logprobs": 2}),
        (short, 2, {}),
        (short, 1, {"prompt_alt_tokens_k": 2, "include_prompt_logprobs": True}),
    ]
    alone = [sampler.sample(_ids(p), n, params, **kw).result() for p, n, kw in calls]  # type: ignore[arg-type]
    with worker_held(sampler):
        futures = [sampler.sample(_ids(p), n, params, **kw) for p, n, kw in calls]  # type: ignore[arg-type]
    for future, ref in zip(futures, alone, strict=True):
        got = future.result()
        for seq, want in zip(got.sequences, ref.sequences, strict=True):
            assert list(seq.tokens) == list(want.tokens)
            assert (seq.topk_logprobs is None) == (want.topk_logprobs is None)
            if seq.topk_logprobs is not None:
                assert [[t for t, _ in row] for row in seq.topk_logprobs] == [  # type: ignore[union-attr]
                    [t for t, _ in row]
                    for row in want.topk_logprobs  # type: ignore[union-attr]
                ]
        assert got.topk_prompt_logprobs == ref.topk_prompt_logprobs
        assert (got.prompt_alt_tokens is None) == (ref.prompt_alt_tokens is None)
        if got.prompt_alt_tokens is not None and ref.prompt_alt_tokens is not None:
            assert got.prompt_alt_tokens.tokens.tolist() == ref.prompt_alt_tokens.tokens.tolist()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topk_sample_logprobs": -1}, "topk_sample_logprobs must be an integer from 0 to"),
        ({"topk_sample_logprobs": VOCAB + 1}, "vocabulary's 384 tokens, got 385"),
        ({"topk_prompt_logprobs": -2}, "topk_prompt_logprobs must be an integer from 0 to"),
        ({"topk_prompt_logprobs": VOCAB + 1}, "topk_prompt_logprobs.*got 385"),
        ({"prompt_alt_tokens_k": -1}, "prompt_alt_tokens_k must be an integer, 0 or more"),
        (
            {"prompt_logprobs_last_n": 2},
            "prompt_logprobs_last_n applies to prompt logprobs: set include_prompt_logprobs",
        ),
        (
            {"prompt_logprobs_last_n": len(PROMPT), "include_prompt_logprobs": True},
            "prompt_logprobs_last_n must be from 1 to len.prompt. - 1 = 15, got 16",
        ),
        (
            {"target_prompt_logprobs": types.TensorData.from_numpy(np.zeros((16, 2), np.int64))},
            "target_prompt_logprobs has 16 rows; a prompt of 16 tokens needs len.prompt. - 1",
        ),
        (
            {"target_prompt_logprobs": types.TensorData.from_numpy(np.zeros(15, np.int64))},
            "target_prompt_logprobs must be 2-D",
        ),
        (
            {"target_prompt_logprobs": types.TensorData.from_numpy(np.zeros((15, 1), np.float32))},
            "target_prompt_logprobs must be an int64 tensor",
        ),
        (
            {"target_prompt_logprobs": types.TensorData.from_numpy(np.full((15, 1), VOCAB))},
            "target_prompt_logprobs holds ids outside the vocabulary's 384 tokens",
        ),
        (
            {"target_prompt_logprobs": types.TensorData.from_numpy(np.full((15, 2), -1))},
            "target_prompt_logprobs names no token id",
        ),
    ],
)
def test_bad_options_are_config_errors_naming_the_field(
    sampler: LocalSamplingClient, options: dict[str, object], message: str
) -> None:
    params = types.SamplingParams(max_tokens=1)
    with pytest.raises(ConfigError, match=message):
        sampler.sample(_ids(PROMPT), 1, params, **options)  # type: ignore[arg-type]


def test_every_bad_option_is_named_at_once(sampler: LocalSamplingClient) -> None:
    with pytest.raises(ConfigError) as error:
        sampler.sample(
            _ids(PROMPT),
            1,
            types.SamplingParams(max_tokens=1),
            topk_prompt_logprobs=-1,
            prompt_alt_tokens_k=-1,
            prompt_logprobs_last_n=99,
        )
    for field in ("topk_prompt_logprobs", "prompt_alt_tokens_k", "prompt_logprobs_last_n"):
        assert field in str(error.value)
