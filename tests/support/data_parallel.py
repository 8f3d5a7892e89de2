"""Data-parallel training runs for the tests (test_data_parallel.py on the CPU over gloo,
test_cuda_multi_gpu.py on GPUs over NCCL): two processes, each a rank holding the whole tiny
model (or, sharded, half of each layer: FSDP2), or one process, take the same steps on one
global batch."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tests.support.ports import free_port
from tinker import types

import thinker
from thinker.engine.local.sharding import full, like

STEPS = 2
ADAM = types.AdamParams(learning_rate=1e-2)


def _join(rank: int, world: int, port: int, device: str, sharding: str) -> None:
    """This process as rank `rank` of `world` (NCCL on GPU `rank`, else gloo), one thread,
    with THINKER_SHARDING=`sharding`."""
    torch.set_num_threads(1)
    os.environ["THINKER_SHARDING"] = sharding
    if device == "cuda":
        torch.cuda.set_device(rank)
    if world > 1:
        dist.init_process_group(
            "nccl" if device == "cuda" else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(minutes=5),  # a rank left waiting fails, not 30 min later
        )


def batch(step: int) -> list[types.Datum]:
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


def _train(  # noqa: PLR0913
    rank: int,
    world: int,
    port: int,
    work: str,
    steps: list[int],
    resume: str,
    device: str,
    sharding: str,
    reverse: bool,
    compile_layers: bool,
) -> None:
    """One rank's run: `steps` steps (after loading `resume`, if given); rank 0 saves what it
    saw and the adapter to work/result-<world>-<first step>.pt. On `device` "cuda", rank r
    trains on GPU r and the ranks join over NCCL (test_cuda_multi_gpu.py). `sharding`: the
    THINKER_SHARDING setting (engine/local/sharding.py). `reverse`: the cross-entropy call
    takes each batch in reverse order (its logprobs then come back reversed).
    `compile_layers` False: THINKER_COMPILE=0 (a sharded model's layers always run eagerly)."""
    os.environ["THINKER_COMPILE"] = "1" if compile_layers else "0"
    _join(rank, world, port, device, sharding)
    try:
        service = thinker.ServiceClient(storage_dir=Path(work) / "store", device=device)
        client = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
        if resume:
            client.load_state_with_optimizer(resume).result()
        else:  # B off zero, the same on every rank, so that every weight gets a gradient
            gen = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for name, p in client._model.named_parameters():
                    if "lora_" in name:
                        p.copy_(like(torch.randn(p.shape, generator=gen) * 0.05, p))
        seen = []
        for step in steps:
            data = batch(step)
            ce = client.forward_backward(data[::-1] if reverse else data, "cross_entropy").result()
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
        adapter = {  # whole on every rank (gathering shards takes every rank)
            n: full(p.detach()).float().cpu()
            for n, p in client._model.named_parameters()
            if p.requires_grad
        }
        if rank == 0:
            result = {"seen": seen, "adapter": adapter, "path": path, "step": client.step}
            torch.save(result, Path(work) / f"result-{world}-{steps[0]}.pt")
    finally:
        if world > 1:
            dist.destroy_process_group()


def run(  # noqa: PLR0913
    work: Path,
    world: int,
    steps: list[int],
    resume: str = "",
    device: str = "cpu",
    sharding: str = "off",
    reverse: bool = False,
    compile_layers: bool = True,
) -> dict:
    args = (world, free_port(), str(work), steps, resume, device, sharding, reverse, compile_layers)
    if world == 1:
        _train(0, *args)
    else:
        mp.spawn(_train, args=args, nprocs=world, join=True)
    return torch.load(work / f"result-{world}-{steps[0]}.pt")  # type: ignore[no-any-return]


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys() and a
    return max(float((a[k] - b[k]).abs().max() / b[k].abs().max()) for k in a)


def _sample(rank: int, world: int, port: int, work: str, device: str, sharding: str) -> None:
    """One rank's sampling after a training step: calls of different lengths (so the ranks'
    shares take different numbers of passes), greedy and seeded, scores of the policy and of
    the base (DPO's reference, the adapter off), then one more step. Rank 0 saves it all to
    work/sampled-<world>.pt."""
    _join(rank, world, port, device, sharding)
    try:
        service = thinker.ServiceClient(storage_dir=Path(work) / "store", device=device)
        client = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
        data = batch(0)
        client.forward_backward(data, "cross_entropy").result()
        client.optim_step(ADAM).result()
        sampler = client.save_weights_and_get_sampling_client().result()
        calls = []
        for k in range(5):  # 5 calls: rank 0 of 2 runs 3, rank 1 runs 2
            params = types.SamplingParams(
                max_tokens=3 + 2 * k, temperature=1.0 if k == 3 else 0.0, stop=[], seed=7 + k
            )
            prompt = types.ModelInput.from_ints(list(range(5, 9 + 3 * k)))
            calls.append(sampler.sample(prompt, 2, params))
        responses = [c.result() for c in calls]
        prompts = [d.model_input.to_ints() for d in data[:3]]
        policy = [sampler.compute_logprobs(types.ModelInput.from_ints(p)) for p in prompts]
        reference = service.create_sampling_client(base_model="thinker/tiny").result()
        base = [reference.compute_logprobs(types.ModelInput.from_ints(p)) for p in prompts]
        after = client.forward_backward(batch(1), "cross_entropy").result()
        sharing = client._sharing
        if rank == 0:
            result = {
                "tokens": [[list(s.tokens) for s in r.sequences] for r in responses],
                "logprobs": [[list(s.logprobs or []) for s in r.sequences] for r in responses],
                "policy": [f.result() for f in policy],
                "base": [f.result() for f in base],
                "after": after.metrics["loss:sum"],
                "here": sharing.sampled_here if sharing is not None else len(calls),
            }
            torch.save(result, Path(work) / f"sampled-{world}.pt")
        else:
            for f in policy + base:
                f.result()
    finally:
        if world > 1:
            dist.destroy_process_group()


def sample(work: Path, world: int, device: str = "cpu", sharding: str = "off") -> dict:
    work.mkdir(parents=True, exist_ok=True)
    args = (world, free_port(), str(work), device, sharding)
    if world == 1:
        _sample(0, *args)
    else:
        mp.spawn(_sample, args=args, nprocs=world, join=True)
    return torch.load(work / f"sampled-{world}.pt")  # type: ignore[no-any-return]
