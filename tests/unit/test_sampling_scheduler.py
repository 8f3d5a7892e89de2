"""Continuous batching (engine/local/scheduler.py): calls to one model decode together.

A call alone, and calls of different prompt lengths that join and leave a running batch, must
give what `LocalSamplingClient.sample` gives for the same seed (same tokens, logprobs equal to
float rounding: `sample` shares the prompt's cache between samples, prefix.py); a cancelled
call or a failing callback ends that call alone, at the next step. Every "while" below is
arranged through the calls' own step callbacks, never by waiting a while.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError

import numpy as np
import pytest
import torch
from tinker import types
from transformers import ByT5Tokenizer, Qwen3Config, Qwen3ForCausalLM

import thinker
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.engine.local.scheduler import DecodeScheduler
from thinker.errors import OverloadedError

torch.set_num_threads(1)  # the tiny model gains nothing from threads; other tests share the CPU

SHORT = "3+4="
CHAT = "User: 3+4\n\nAssistant:"
LONG = "User: what is the sum of twelve and thirty, written in digits?\n\nAssistant:"


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> LocalSamplingClient:
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("storage"), device="cpu")
    return service.create_sampling_client(base_model="thinker/tiny").result()  # type: ignore[no-any-return]


def _ids(sampler: LocalSamplingClient, text: str) -> list[int]:
    return sampler.get_tokenizer().encode(text, add_special_tokens=False)  # type: ignore[no-any-return]


def _alone(
    sampler: LocalSamplingClient, text: str, n: int, params: types.SamplingParams
) -> types.SampleResponse:
    return sampler.sample(types.ModelInput.from_ints(_ids(sampler, text)), n, params).result()


def _tokens(response: types.SampleResponse) -> list[list[int]]:
    return [list(seq.tokens) for seq in response.sequences]


def _assert_same_samples(got: types.SampleResponse, alone: types.SampleResponse) -> None:
    assert _tokens(got) == _tokens(alone)
    assert [s.stop_reason for s in got.sequences] == [s.stop_reason for s in alone.sequences]
    for seq, ref in zip(got.sequences, alone.sequences, strict=True):
        np.testing.assert_allclose(seq.logprobs, ref.logprobs, atol=1e-4)


PARAMS = [
    types.SamplingParams(max_tokens=30, temperature=1.0, seed=11, stop=[]),
    types.SamplingParams(max_tokens=40, temperature=0.7, top_k=20, seed=3, stop=["e"]),
    types.SamplingParams(max_tokens=25, temperature=0.0),
]


@pytest.mark.parametrize("params", PARAMS, ids=["no-stop", "stop-string", "greedy"])
def test_a_call_alone_gives_what_sample_gives(
    sampler: LocalSamplingClient, params: types.SamplingParams
) -> None:
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8)
    got = scheduler.submit(_ids(sampler, CHAT), 3, params).result()
    _assert_same_samples(got, _alone(sampler, CHAT, 3, params))
    assert set(scheduler.batch_sizes) == {3}


def test_a_call_alone_on_the_static_cache_path_samples_as_sample_does(
    sampler: LocalSamplingClient,
) -> None:
    """The solo path (CUDA graphs there) agrees with the dynamic-cache decode to rounding."""
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8, solo_graphs=True)
    for params in PARAMS:
        got = scheduler.submit(_ids(sampler, CHAT), 3, params).result()
        _assert_same_samples(got, _alone(sampler, CHAT, 3, params))


def _on_step(at: int, action: Callable[[], None]) -> Callable[[list[int]], None]:
    """A step callback that runs `action` once, on the decode thread, at step `at`."""
    steps = [0]

    def on_step(tokens: list[int]) -> None:
        steps[0] += 1
        if steps[0] == at:
            action()

    return on_step


@pytest.mark.parametrize("solo_graphs", [False, True], ids=["dynamic", "solo-static-first"])
def test_calls_that_join_and_leave_a_running_batch_sample_as_they_would_alone(
    sampler: LocalSamplingClient, solo_graphs: bool
) -> None:
    """CHAT decodes; at its 5th step a longer and a shorter prompt join (both padded against
    it); the short one leaves first (its padding is trimmed), the others go on. With
    `solo_graphs` the first call starts alone on a static cache (CUDA's graph path, run eagerly
    here), which moves into the dynamic batch when the others come."""
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8, solo_graphs=solo_graphs)
    first = types.SamplingParams(max_tokens=60, temperature=1.0, seed=5, stop=[])
    longer = types.SamplingParams(max_tokens=50, temperature=0.8, seed=6, stop=[])
    shorter = types.SamplingParams(max_tokens=12, temperature=1.2, top_p=0.9, seed=7, stop=[])
    joined: list[object] = []

    def join() -> None:
        joined.append(scheduler.submit(_ids(sampler, LONG), 2, longer))
        joined.append(scheduler.submit(_ids(sampler, SHORT), 1, shorter))

    got_first = scheduler.submit(_ids(sampler, CHAT), 2, first, on_step=_on_step(5, join))
    _assert_same_samples(got_first.result(), _alone(sampler, CHAT, 2, first))
    got_longer, got_shorter = (future.result() for future in joined)  # type: ignore[attr-defined]
    _assert_same_samples(got_longer, _alone(sampler, LONG, 2, longer))
    _assert_same_samples(got_shorter, _alone(sampler, SHORT, 1, shorter))
    assert max(scheduler.batch_sizes) == 5  # all five rows in one forward
    assert scheduler.outcomes == {"done": 3}


def test_a_cancelled_call_leaves_at_the_next_step_and_the_others_go_on(
    sampler: LocalSamplingClient,
) -> None:
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8)
    long = types.SamplingParams(max_tokens=800, temperature=1.0, seed=1, stop=[])
    short = types.SamplingParams(max_tokens=20, temperature=1.0, seed=2, stop=[])
    long_steps: list[int] = []
    abandoned = scheduler.submit(_ids(sampler, CHAT), 1, long, on_step=long_steps.append)
    # The short call cancels the long one (as a client going away does) at its 10th step.
    other = scheduler.submit(
        _ids(sampler, SHORT), 1, short, on_step=_on_step(10, abandoned.future().cancel)
    )
    _assert_same_samples(other.result(), _alone(sampler, SHORT, 1, short))
    with pytest.raises(CancelledError):
        abandoned.result()
    scheduler.submit(_ids(sampler, SHORT), 1, short).result()  # after the long call has left
    assert scheduler.outcomes == {"done": 2, "cancelled": 1}
    assert len(long_steps) <= 12  # stopped within a step of the cancel, not at 800


def test_an_error_in_a_callback_ends_that_call_alone(sampler: LocalSamplingClient) -> None:
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8)
    params = types.SamplingParams(max_tokens=30, temperature=1.0, seed=9, stop=[])

    def reader_gone() -> None:
        raise InterruptedError("reader went away")

    failing = scheduler.submit(_ids(sampler, CHAT), 1, params, on_step=_on_step(3, reader_gone))
    other = scheduler.submit(_ids(sampler, LONG), 1, params)
    with pytest.raises(InterruptedError):
        failing.result()
    _assert_same_samples(other.result(), _alone(sampler, LONG, 1, params))
    assert scheduler.outcomes == {"done": 1, "failed": 1}


def test_a_full_queue_refuses_and_one_row_decodes_one_call_at_a_time(
    sampler: LocalSamplingClient,
) -> None:
    """max_rows=1: the second call waits for the first; queue_size=1: a third is refused."""
    scheduler = DecodeScheduler(sampler, max_rows=1, queue_size=1)
    params = types.SamplingParams(max_tokens=10, temperature=1.0, seed=4, stop=[])
    running, release = threading.Event(), threading.Event()

    def hold() -> None:
        running.set()
        assert release.wait(timeout=60)

    first = scheduler.submit(_ids(sampler, CHAT), 1, params, on_step=_on_step(1, hold))
    assert running.wait(timeout=60)  # the first call is decoding, held at its first step
    second = scheduler.submit(_ids(sampler, SHORT), 1, params)
    with pytest.raises(OverloadedError, match="queue of this model is full"):
        scheduler.submit(_ids(sampler, SHORT), 1, params)
    release.set()
    _assert_same_samples(first.result(), _alone(sampler, CHAT, 1, params))
    _assert_same_samples(second.result(), _alone(sampler, SHORT, 1, params))
    assert set(scheduler.batch_sizes) == {1}


def test_a_cache_that_cannot_be_padded_decodes_one_call_at_a_time() -> None:
    """Sliding-window layers keep only the window: left padding would misalign them, so such a
    model never mixes calls, and each still samples as it would alone."""
    config = Qwen3Config(
        vocab_size=384,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        use_sliding_window=True,
        sliding_window=8,
        max_window_layers=0,
        eos_token_id=1,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).eval()
    sampler = LocalSamplingClient(model, ByT5Tokenizer(), "test/sliding", None, torch.device("cpu"))
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8)
    params = types.SamplingParams(max_tokens=20, temperature=1.0, seed=8, stop=[])
    joined: list[object] = []

    def join() -> None:
        joined.append(scheduler.submit(_ids(sampler, CHAT), 1, params))

    first = scheduler.submit(_ids(sampler, LONG), 1, params, on_step=_on_step(2, join))
    _assert_same_samples(first.result(), _alone(sampler, LONG, 1, params))
    _assert_same_samples(joined[0].result(), _alone(sampler, CHAT, 1, params))  # type: ignore[attr-defined]
    assert set(scheduler.batch_sizes) == {1}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_a_solo_graph_decode_hands_over_to_the_batch(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """On CUDA (bf16, the Qwen3-0.6B shape) a call alone runs the CUDA-graph decode and gives
    what `sample` gives; calls that join it move its cache into the dynamic batch and all
    agree with their lone runs to bf16 rounding (tokens until a near-tie, then logprobs)."""
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("cuda"), device="cuda")
    sampler = service.create_sampling_client(base_model="thinker/random-qwen3-0.6b").result()
    scheduler = DecodeScheduler(sampler, max_rows=32, queue_size=8)
    first = types.SamplingParams(max_tokens=40, temperature=1.0, seed=5, stop=[])
    joiner = types.SamplingParams(max_tokens=30, temperature=0.8, seed=6, stop=[])
    alone = scheduler.submit(_ids(sampler, CHAT), 2, first).result()
    assert _tokens(alone) == _tokens(_alone(sampler, CHAT, 2, first))
    joined: list[object] = []

    def join() -> None:
        joined.append(scheduler.submit(_ids(sampler, LONG), 1, joiner))

    got = scheduler.submit(_ids(sampler, CHAT), 2, first, on_step=_on_step(5, join)).result()
    _assert_close_in_bf16(got, alone)
    lone_joiner = scheduler.submit(_ids(sampler, LONG), 1, joiner).result()
    _assert_close_in_bf16(joined[0].result(), lone_joiner)  # type: ignore[attr-defined]
    assert max(scheduler.batch_sizes) == 3


def _assert_close_in_bf16(got: types.SampleResponse, alone: types.SampleResponse) -> None:
    """Same tokens for a good stretch (bf16 may flip a near-tie later), logprobs close there."""
    for seq, ref in zip(got.sequences, alone.sequences, strict=True):
        pairs = zip(seq.tokens, ref.tokens, strict=True)
        same = next((i for i, (a, b) in enumerate(pairs) if a != b), len(seq.tokens))
        assert same >= 10
        np.testing.assert_allclose(seq.logprobs[:same], ref.logprobs[:same], atol=0.1)
