"""Token streaming: the local sampler's `sample_stream`, and the server's text assembly.

A stream must give exactly what `sample` gives for the same seed, one token at a time while
the model is still decoding; its text deltas must add up to the whole sequence's text.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import numpy as np
import pytest
import torch
from tinker import types
from transformers import ByT5Tokenizer

import thinker
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.server.pool import LoadedModel, ModelRef, Prompt, StopReason, TextAssembler

torch.set_num_threads(1)  # the tiny model gains nothing from threads; other tests share the CPU

PROMPT = "User: 3+4\n\nAssistant:"


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> LocalSamplingClient:
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("storage"), device="cpu")
    return service.create_sampling_client(base_model="thinker/tiny").result()  # type: ignore[no-any-return]


def _prompt(sampler: LocalSamplingClient, text: str = PROMPT) -> types.ModelInput:
    return types.ModelInput.from_ints(
        sampler.get_tokenizer().encode(text, add_special_tokens=False)
    )


@pytest.mark.parametrize(
    "params",
    [
        types.SamplingParams(max_tokens=40, temperature=1.0, seed=11, stop=[]),
        types.SamplingParams(max_tokens=40, temperature=0.7, top_k=20, seed=3, stop=["e"]),
        types.SamplingParams(max_tokens=30, temperature=0.0),
    ],
    ids=["no-stop", "stop-string", "greedy"],
)
def test_stream_gives_what_sample_gives_for_the_same_seed(
    sampler: LocalSamplingClient, params: types.SamplingParams
) -> None:
    streamed: list[int] = []
    response = sampler.sample_stream(_prompt(sampler), params, streamed.append).result()
    (expected,) = sampler.sample(_prompt(sampler), 1, params).result().sequences
    (seq,) = response.sequences
    assert streamed == seq.tokens == expected.tokens
    assert seq.logprobs == expected.logprobs
    assert seq.stop_reason == expected.stop_reason


def test_stop_string_case_really_stops_early(sampler: LocalSamplingClient) -> None:
    """Guards the parametrized case above: its stop string must end the sample early."""
    params = types.SamplingParams(max_tokens=40, temperature=0.7, top_k=20, seed=3, stop=["e"])
    streamed: list[int] = []
    (seq,) = sampler.sample_stream(_prompt(sampler), params, streamed.append).result().sequences
    assert seq.stop_reason == "stop" and len(streamed) < 40


def test_tokens_arrive_while_the_model_is_still_decoding(sampler: LocalSamplingClient) -> None:
    """The first callback blocks until this thread has seen its token: had the tokens been
    delivered after decoding, the future would already be done at that point."""
    arrived: queue.Queue[int] = queue.Queue()
    seen = threading.Event()

    def on_token(token: int) -> None:
        arrived.put(token)
        seen.wait(timeout=30)

    params = types.SamplingParams(max_tokens=20, stop=[], seed=0)
    future = sampler.sample_stream(_prompt(sampler), params, on_token)
    first = arrived.get(timeout=30)
    assert not future.done()
    seen.set()
    assert future.result().sequences[0].tokens[0] == first


def test_an_error_in_the_callback_stops_the_decode(sampler: LocalSamplingClient) -> None:
    calls: list[int] = []

    def on_token(token: int) -> None:
        calls.append(token)
        if len(calls) == 3:
            raise InterruptedError("reader went away")

    params = types.SamplingParams(max_tokens=50, stop=[], seed=0)
    with pytest.raises(InterruptedError):
        sampler.sample_stream(_prompt(sampler), params, on_token).result()
    assert len(calls) == 3


def _tiny_tokenizer() -> ByT5Tokenizer:
    return ByT5Tokenizer()


def _deltas(
    assembler: TextAssembler, tokens: list[int], stop_reason: StopReason = "stop"
) -> list[str]:
    return [assembler.push(t) for t in tokens] + [assembler.finish(stop_reason)]


def test_text_deltas_hold_back_a_partial_character_and_add_up() -> None:
    tok = _tiny_tokenizer()
    tokens = tok.encode("né!", add_special_tokens=False)  # "é" is two byte tokens
    deltas = _deltas(TextAssembler(tok, [], chat=False), tokens)
    assert deltas == ["n", "", "é", "!", ""]


def test_text_deltas_never_show_a_stop_string_or_its_start() -> None:
    tok = _tiny_tokenizer()
    tokens = tok.encode(" 7\n\nUser:", add_special_tokens=False)
    assembler = TextAssembler(tok, ["\n\nUser:"], chat=True)
    deltas = _deltas(assembler, tokens)
    # Leading space dropped (chat), "\n\nUser:" held back char by char, then cut.
    assert "".join(deltas) == "7"
    assert deltas[:2] == ["", "7"] and set(deltas[2:]) == {""}
    assert TextAssembler(tok, ["\n\nUser:"], chat=True).whole(tokens, "stop") == "7"


def test_a_held_back_stop_prefix_is_released_when_the_stop_does_not_come() -> None:
    tok = _tiny_tokenizer()
    tokens = tok.encode("a\n\nb", add_special_tokens=False)
    deltas = _deltas(TextAssembler(tok, ["\n\nUser:"], chat=False), tokens)
    assert deltas == ["a", "", "", "\n\nb", ""]
    ended = tok.encode("a\n\nUs", add_special_tokens=False)  # stopped by EOS: the model's text
    assert "".join(_deltas(TextAssembler(tok, ["\n\nUser:"], chat=False), ended)) == "a\n\nUs"


@pytest.mark.parametrize("chat", [True, False])
def test_a_stop_string_cut_by_max_tokens_is_not_shown(chat: bool) -> None:
    """ "7\n\nUser:" cut after "7\n\nUs": the start of the stop string is dropped from the text,
    in a stream and in a whole sequence; any stop string counts, the user's too."""
    tok = _tiny_tokenizer()
    tokens = tok.encode("7\n\nUs", add_special_tokens=False)
    stops = ["\n\nUser:", "END"]
    assert "".join(_deltas(TextAssembler(tok, stops, chat), tokens, "length")) == "7"
    assert TextAssembler(tok, stops, chat).whole(tokens, "length") == "7"
    user_stop = tok.encode("7 E", add_special_tokens=False)
    assert TextAssembler(tok, stops, chat).whole(user_stop, "length") == "7 "


def test_a_sample_cut_inside_a_stop_string_keeps_its_tokens_and_loses_the_text(
    sampler: LocalSamplingClient,
) -> None:
    """Through the pool as the routes use it: only the text is trimmed; the tokens and
    logprobs are the engine's (as on Tinker), the stop string's start included."""
    tok = sampler.get_tokenizer()
    model = LoadedModel(ModelRef("thinker/tiny", "thinker/tiny", "local"), sampler)
    params = types.SamplingParams(max_tokens=8, temperature=1.0, seed=5)
    (seq,) = sampler.sample(_prompt(sampler), 1, params).result().sequences
    text = tok.decode(seq.tokens, skip_special_tokens=True)
    stop = text[-3:] + "~never sampled~"  # the sample ends inside this stop string
    prompt = Prompt(_prompt(sampler).to_ints(), [stop], [stop], chat=False)
    with_stop = types.SamplingParams(max_tokens=8, temperature=1.0, seed=5, stop=prompt.stop)
    samples = asyncio.run(model.sample(prompt, 1, with_stop, False))
    (sample,) = samples.samples
    assert sample.tokens == seq.tokens
    # The pool's scheduler decodes per call; `sample` shares the prompt's cache: rounding.
    np.testing.assert_allclose(sample.logprobs, seq.logprobs, atol=1e-5)
    assert (sample.text, sample.stop_reason) == (text[:-3], "length")


def test_a_server_stream_yields_its_first_token_long_before_the_last(
    sampler: LocalSamplingClient,
) -> None:
    """Through the pool's LoadedModel, as the routes use it: events come as tokens are made."""
    model = LoadedModel(ModelRef("thinker/tiny", "thinker/tiny", "local"), sampler)
    prompt = Prompt(_prompt(sampler).to_ints(), [], [], chat=False)
    params = types.SamplingParams(max_tokens=300, stop=[], seed=1)

    async def arrival_times() -> list[float]:
        start, times = time.monotonic(), []
        async for _ in model.stream(prompt, params):
            times.append(time.monotonic() - start)
        return times

    times = asyncio.run(arrival_times())
    assert len(times) == 300 + 1  # one event per token, then the final one
    assert times[0] < 0.25 * times[-1]


def test_a_closed_server_stream_stops_the_decode(sampler: LocalSamplingClient) -> None:
    """A reader that leaves after 3 events cancels its call: the decode drops it at its next
    step (the scheduler counts it cancelled, not done) instead of making 900 unread tokens."""
    model = LoadedModel(ModelRef("thinker/tiny", "thinker/tiny", "local"), sampler)
    assert model.scheduler is not None
    prompt = Prompt(_prompt(sampler).to_ints(), [], [], chat=False)
    long = types.SamplingParams(max_tokens=900, stop=[], seed=1)

    async def read_three_then_sample() -> None:
        events = model.stream(prompt, long)
        for _ in range(3):
            await anext(events)
        await events.aclose()
        # This call joins at the next step boundary, where the abandoned one is dropped.
        await model.sample(prompt, 1, types.SamplingParams(max_tokens=2), False)

    asyncio.run(read_three_then_sample())
    assert model.scheduler.outcomes == {"cancelled": 1, "done": 1}
