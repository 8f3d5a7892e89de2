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
from tests.support.net import free_port
from tinker import types

import thinker

STEPS = 2
ADAM = types.AdamParams(learning_rate=1e-2)


def _batch(step: int) -> list[types.Datum]:
    """7 datums of 5-40 tokens (an odd count: the ranks' shares differ)."""
    gen = torch.Generator().manual_seed(100 + step)
    data = []
    for _ in range(7):
        tokens = torch.randint(
            3, 259, (int(torch.randint(6, 41, (1,), generator=gen)),), generator=gen
        )
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1].tolist()),
                loss_fn_inputs={
                    "target_tokens": tokens[1:],
                    "weights": torch.ones(len(tokens) - 1),
                },
            )
        )
    return data


def _pair_loss(data: list[types.Datum], logprobs: list[torch.Tensor]) -> tuple[torch.Tensor, dict]:
    """A DPO-shaped loss over consecutive pairs (datums 0-1 and 2-3 of 4): on two ranks each
    pair is split, one datum on each."""
    sums = [lp.sum() for lp in logprobs]
    margins = torch.stack([sums[0] - sums[1], sums[2] - sums[3]])
    loss = -torch.nn.functional.logsigmoid(0.1 * margins).sum()
    return loss, {"margin:mean": float(margins.detach().mean())}


def _train(rank: int, world: int, port: int, work: str, steps: list[int], resume: str) -> None:
    """One rank's run: `steps` steps (after loading `resume`, if given); rank 0 saves what it
    saw and the adapter to work/result-<world>-<first step>.pt."""
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
    try:
        service = thinker.ServiceClient(storage_dir=Path(work) / "store", device="cpu")
        client = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
        if resume:
            client.load_state_with_optimizer(resume).result()
        else:  # B off zero, the same on every rank, so that every weight gets a gradient
            gen = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for name, p in client._model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
        seen = []
        for step in steps:
            data = _batch(step)
            ce = client.forward_backward(data, "cross_entropy").result()
            pair = client.forward_backward_custom(data[:4], _pair_loss).result()
            optim = client.optim_step(ADAM).result()
            seen.append(
                {
                    "ce": ce.metrics["loss:sum"],
                    "pair": pair.metrics["loss:sum"],
                    "margin": pair.metrics["margin:mean"],
                    "grad_norm": optim.metrics["grad_norm"],
                    "logprobs": [o["logprobs"].to_torch() for o in ce.loss_fn_outputs],
                }
            )
        path = client.save_state(f"after-{world}-{steps[0]}").result().path
        if rank == 0:
            adapter = {
                n: p.detach().clone()
                for n, p in client._model.named_parameters()
                if p.requires_grad
            }
            result = {"seen": seen, "adapter": adapter, "path": path, "step": client.step}
            torch.save(result, Path(work) / f"result-{world}-{steps[0]}.pt")
    finally:
        if world > 1:
            dist.destroy_process_group()


def _run(work: Path, world: int, steps: list[int], resume: str = "") -> dict:
    args = (world, free_port(), str(work), steps, resume)
    if world == 1:
        _train(0, *args)
    else:
        mp.spawn(_train, args=args, nprocs=world, join=True)
    return torch.load(work / f"result-{world}-{steps[0]}.pt")  # type: ignore[no-any-return]


def _largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys() and a
    return max(float((a[k] - b[k]).abs().max() / b[k].abs().max()) for k in a)


@pytest.mark.slow
def test_two_ranks_step_as_one_process_and_resume_in_one(tmp_path: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    two = _run(tmp_path, 2, list(range(STEPS)))
    one = _run(tmp_path, 1, list(range(STEPS)))
    for got, want in zip(two["seen"], one["seen"], strict=True):
        for key in ("ce", "pair", "margin", "grad_norm"):
            assert got[key] == pytest.approx(want[key], rel=1e-5), key
        assert len(got["logprobs"]) == 7  # every rank's datums, in order
        for lp, ref in zip(got["logprobs"], want["logprobs"], strict=True):
            torch.testing.assert_close(lp, ref, rtol=1e-5, atol=1e-6)
    difference = _largest_difference(two["adapter"], one["adapter"])
    print(f"2 ranks vs 1 process after {STEPS} steps: adapter relative difference {difference:.1e}")
    assert difference < 1e-4
    # The two-rank checkpoint, written once, resumes in one process: one more step equals the
    # one-process run's third.
    assert two["step"] == STEPS
    resumed = _run(tmp_path, 1, [STEPS], resume=two["path"])
    straight = _run(tmp_path, 1, list(range(STEPS + 1)))
    assert resumed["step"] == straight["step"] == STEPS + 1
    assert resumed["seen"][0]["ce"] == pytest.approx(straight["seen"][-1]["ce"], rel=1e-5)
    difference = _largest_difference(resumed["adapter"], straight["adapter"])
    print(f"resumed on 1 vs straight: adapter relative difference {difference:.1e}")
    assert difference < 1e-4


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
