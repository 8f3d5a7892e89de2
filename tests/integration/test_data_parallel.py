"""Data-parallel LoRA training on the CPU (gloo): two processes, each a rank holding the whole
tiny model, take steps on one global batch (a cross-entropy call and a custom loss coupling
datums that the ranks split between them); after them the adapter equals one process's steps
on the same batch within fp32 rounding, as do the losses and logprobs every rank returns. A
checkpoint written by the two ranks (once, by rank 0) resumes in one process and continues as
the one-process run does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tests.support.data_parallel import STEPS, largest_difference, run, sample
from tests.support.net import free_port
from tinker import types

import thinker


@pytest.mark.slow
def test_two_ranks_step_as_one_process_and_resume_in_one(tmp_path: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    two = run(tmp_path, 2, list(range(STEPS)))
    one = run(tmp_path, 1, list(range(STEPS)))
    for got, want in zip(two["seen"], one["seen"], strict=True):
        for key in ("ce", "pair", "margin", "grad_norm"):
            assert got[key] == pytest.approx(want[key], rel=1e-5), key
        assert len(got["logprobs"]) == 7  # every rank's datums, in order
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-6)
    difference = largest_difference(two["adapter"], one["adapter"])
    print(f"2 ranks vs 1 process after {STEPS} steps: adapter relative difference {difference:.1e}")
    assert difference < 1e-4
    # The two-rank checkpoint, written once, resumes in one process: one more step equals the
    # one-process run's third.
    assert two["step"] == STEPS
    resumed = run(tmp_path, 1, [STEPS], resume=two["path"])
    straight = run(tmp_path, 1, list(range(STEPS + 1)))
    assert resumed["step"] == straight["step"] == STEPS + 1
    assert resumed["seen"][0]["ce"] == pytest.approx(straight["seen"][-1]["ce"], rel=1e-5)
    difference = largest_difference(resumed["adapter"], straight["adapter"])
    print(f"resumed on 1 vs straight: adapter relative difference {difference:.1e}")
    assert difference < 1e-4


@pytest.mark.slow
def test_two_ranks_sharded_step_as_one_process_and_resume_in_one(tmp_path: Path) -> None:
    """The same steps with the tiny model's layers sharded over the two ranks (FSDP2, forced
    by THINKER_SHARDING=fsdp): each rank holds half of each layer, gathers the layer for its
    passes and keeps half of the gradient; the output layer's adapter stays whole."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    two = run(tmp_path, 2, list(range(STEPS)), sharding="fsdp")
    one = run(tmp_path, 1, list(range(STEPS)))
    for got, want in zip(two["seen"], one["seen"], strict=True):
        for key in ("ce", "pair", "margin", "grad_norm"):
            assert got[key] == pytest.approx(want[key], rel=1e-5), key
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-6)
    difference = largest_difference(two["adapter"], one["adapter"])
    print(f"2 sharded ranks vs 1 process: adapter relative difference {difference:.1e}")
    assert difference < 1e-4
    # Written whole, once: one process resumes it; and two sharded ranks resume one
    # process's checkpoint. Either way the next step is the one-process run's third.
    straight = run(tmp_path, 1, list(range(STEPS + 1)))
    on_one = run(tmp_path, 1, [STEPS], resume=two["path"])
    on_two = run(tmp_path, 2, [STEPS], resume=one["path"], sharding="fsdp")
    for resumed in (on_one, on_two):
        assert resumed["step"] == straight["step"] == STEPS + 1
        assert resumed["seen"][0]["ce"] == pytest.approx(straight["seen"][-1]["ce"], rel=1e-5)
        assert largest_difference(resumed["adapter"], straight["adapter"]) < 1e-4


def _sample(rank: int, world: int, port: int, work: str) -> None:
    """Five sampling calls from a snapshot of the policy, made alike on every rank."""
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
    try:
        service = thinker.ServiceClient(storage_dir=Path(work) / f"store-{rank}", device="cpu")
        client = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
        sampler = client.save_weights_and_get_sampling_client().result()
        params = types.SamplingParams(max_tokens=6, temperature=0.0, stop=[])
        futures = [
            sampler.sample(types.ModelInput.from_ints(list(range(5, 10 + k))), 2, params)
            for k in range(5)
        ]
        tokens = [[list(s.tokens) for s in f.result().sequences] for f in futures]
        sharing = client._sharing
        here = sharing.sampled_here if sharing is not None else len(futures)
        torch.save({"tokens": tokens, "here": here}, Path(work) / f"sampled-{world}-{rank}.pt")
    finally:
        if world > 1:
            dist.destroy_process_group()


def test_two_ranks_share_out_sampling_calls(tmp_path: Path) -> None:
    """Call k samples on rank k % 2 only; every rank gets all five responses, the ones one
    process gives (greedy)."""
    mp.spawn(_sample, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    _sample(0, 1, 0, str(tmp_path))
    one = torch.load(tmp_path / "sampled-1-0.pt")
    ranks = [torch.load(tmp_path / f"sampled-2-{r}.pt") for r in (0, 1)]
    assert [r["here"] for r in ranks] == [3, 2] and one["here"] == 5
    assert ranks[0]["tokens"] == ranks[1]["tokens"] == one["tokens"]


def test_a_sharded_model_samples_and_scores_as_one_process(tmp_path: Path) -> None:
    """Two ranks each holding half of every layer (FSDP2) sample, in lockstep, what one
    process holding the whole model samples: the calls shared out, each rank's taking its own
    number of passes (the other joining them idle), greedy and seeded alike; the policy's and
    the base's scores (RL's and DPO's) too; and training goes on after."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    two = sample(tmp_path / "two", 2, sharding="fsdp")
    one = sample(tmp_path / "one", 1)
    # 11 calls (5 samples, 3 scores of the policy, 3 of the base): rank 0 ran 0, 2, ... 10.
    assert two["here"] == 6
    assert two["tokens"] == one["tokens"]
    assert [len(s) for r in two["tokens"] for s in r] == [3, 3, 5, 5, 7, 7, 9, 9, 11, 11]
    for got, want in zip(two["logprobs"], one["logprobs"], strict=True):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
    for key in ("policy", "base"):
        for got, want in zip(two[key], one[key], strict=True):
            assert got[0] is None and want[0] is None
            torch.testing.assert_close(
                torch.tensor(got[1:]), torch.tensor(want[1:]), rtol=1e-4, atol=1e-5
            )
    assert two["policy"] != two["base"]  # the adapter was on for one and off for the other
    assert two["after"] == pytest.approx(one["after"], rel=1e-5)
