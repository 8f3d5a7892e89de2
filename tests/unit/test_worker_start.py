"""An engine worker thread that cannot start (its GPU cannot be made current, say) fails every
call handed to it with the reason, on each path that hands it work: a training call, a
sampling client's waiting calls and logprob requests (answered by a task the caller never
sees), the server's continuous batch, and a shared model's fair lanes. Before, the failure
broke the thread pool and the sampling paths waited forever (a CUDA test hung so, given the
device "cuda" without an index)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tinker import types

import thinker
from thinker.engine.futures import FairExecutor
from thinker.engine.local import sampling, service, training
from thinker.engine.local.scheduler import DecodeScheduler

torch.set_num_threads(1)
REASON = "no such GPU: cuda:7"
PROMPT = types.ModelInput.from_ints([72, 101, 108, 108, 111])
PARAMS = types.SamplingParams(max_tokens=4, temperature=1.0, seed=1, stop=[])


def _broken(device: torch.device) -> object:
    def start() -> None:
        raise RuntimeError(REASON)

    return start


def _fails_with_the_reason(call: object) -> None:
    with pytest.raises(RuntimeError, match="worker thread could not start: no such GPU"):
        call.result(timeout=120)  # type: ignore[attr-defined]


def test_training_sampling_and_logprobs_fail_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampling, "on_thread_start", _broken)
    monkeypatch.setattr(training, "on_thread_start", _broken)
    monkeypatch.setattr(service, "on_thread_start", _broken)
    client = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    trainer = client.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    _fails_with_the_reason(trainer.optim_step(types.AdamParams(learning_rate=1e-3)))
    sampler = client.create_sampling_client(base_model="thinker/tiny").result()
    _fails_with_the_reason(sampler.sample(PROMPT, 2, PARAMS))
    _fails_with_the_reason(sampler.compute_logprobs(PROMPT))
    with sampler.burst():  # handed over together when the block ends
        calls = [sampler.sample(PROMPT, 2, PARAMS), sampler.compute_logprobs(PROMPT)]
    for call in calls:
        _fails_with_the_reason(call)


def test_the_servers_batch_fails_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampling, "on_thread_start", _broken)
    client = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    sampler = client.create_sampling_client(base_model="thinker/tiny").result()
    scheduler = DecodeScheduler(sampler, max_rows=8, queue_size=4)
    _fails_with_the_reason(scheduler.submit(PROMPT.to_ints(), 1, PARAMS))
    assert scheduler.queued == 0  # nothing left waiting for a loop that never ran


def test_a_shared_models_lanes_fail_with_the_reason() -> None:
    executor = FairExecutor("broken", _broken(torch.device("cpu")))  # type: ignore[arg-type]
    first, second = executor.lane(), executor.lane()
    _fails_with_the_reason(first.submit(lambda: 1))
    _fails_with_the_reason(second.submit(lambda: 2))
