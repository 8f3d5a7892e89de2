"""One job across the GPUs of one machine: data-parallel correctness, SL scaling, an RL step and
the platform path, each against one GPU in the same run.

    PYTHONPATH=backend python tests/perf/bench_multi_gpu.py --json out.json   # every part
    PYTHONPATH=backend python tests/perf/bench_multi_gpu.py --parts correctness,rl
    PYTHONPATH=backend python tests/perf/bench_multi_gpu.py --cpu   # the script itself, gloo

N is every GPU the machine has (torch.cuda.device_count()). Each side runs in fresh processes,
one a GPU, joined by NCCL (NVLink multicast left off: NCCL_NVLS_ENABLE=0), through the local
engine's data parallelism (engine/local/data_parallel.py), exactly as a job of `gpus: N` trains.

Parts:
- correctness: two steps (a cross-entropy call on 8 chats of 256-1,024 tokens, then AdamW) of
  the Qwen3-0.6B shape with the fast path, on N GPUs and on one; the largest relative
  difference of the loss, the per-token logprobs, the LoRA gradients (summed over the ranks) and
  the adapter after the steps. bf16 arithmetic differs with the shape of the work (N GPUs pack
  other datums together), so the same batch on one GPU in another order is the floor the N-GPU
  figures are read against. Then the N-GPU checkpoint resumes on one GPU: the adapter it loads
  against the one saved, and the third step's loss against the N-GPU run's third step.
- scaling-qwen3 / scaling-llama8b: the engine benchmark's SL step (bench_engine.py: rank 16,
  output layer not adapted) on its data (random tokens, 8 x 1,024 / 2 x 2,048 per GPU), on one
  GPU and on N, at the one-GPU batch and at N times it. Efficiency at a global batch = tokens/s
  on N / (N x tokens/s on one GPU); weak scaling holds the per-GPU batch (N GPUs at N times
  the batch against one GPU at the batch), strong scaling the global one. Peak memory per GPU.
- rl: GRPO steps on the Qwen3-0.6B shape: 8 prompts of 128 tokens x 32 samples x 256 tokens,
  group-relative advantages, one importance-sampling forward_backward and optim_step. On N GPUs
  each samples 1/N of the groups and gets the others' (SampleSharing); the sampler-learner
  logprob gap of the gathered rollouts is reported.
- platform: a real `thinker serve` on this machine; a default SL job (3,000 chats of ~500-1,000
  tokens, 25 steps, no evaluation) created through the REST API with `gpus: N`, then with
  `gpus: 1`; their placement and steady trained tokens/s.
- sharded-correctness: `correctness` with the N GPUs' model sharded (FSDP2,
  engine/local/sharding.py, THINKER_SHARDING=fsdp): each GPU holds 1/N of each layer.
- sharded-8b: the Llama-3.1-8B shape's SL step (rank 16, output layer not adapted, 2 x 2,048
  per GPU) on one GPU, on N whole (data parallel) and on N sharded: what sharding costs where
  it is not needed.
- rl-sharded: the `rl` steps on N GPUs with the model whole and sharded (FSDP2): the sharded
  ranks sample in lockstep (data_parallel.Lockstep), each decode step gathering every layer.
- rl-70b: GRPO steps (4 prompts x 4 samples x 32 tokens) of the Llama-3.1-70B shape sharded
  over N GPUs: RL on a model no one GPU holds.
- sharded-70b: the Llama-3.1-70B shape (141 GB of bf16 weights: no one GPU holds it) sharded
  over 2 and over N GPUs, 1 x 2,048 tokens per GPU: tokens/s, the shards' memory and the peak
  per GPU, and the model FLOPs utilisation (4 x parameters x tokens/s, LoRA's forward and
  input-gradient matmuls, over the GPUs' dense bf16 peak, 989 TFLOP/s each on an H100/H200).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import bench_engine as eng  # noqa: E402
from bench_common import free_port, stop_server, wait_up  # noqa: E402

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast (KINDS.md)
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

CPU = os.environ.get("THINKER_BENCH_CPU") == "1"  # --cpu: gloo, thinker/tiny, small sizes
QWEN = "thinker/tiny" if CPU else eng.QWEN
LLAMA = "thinker/tiny" if CPU else eng.LLAMA
LLAMA70 = "thinker/tiny" if CPU else "thinker/random-llama3.1-70b"
PEAK_BF16_FLOPS = 989.4e12  # dense, per H100 SXM / H200 GPU


SPAWN_TIMEOUT_S = 300  # one side's processes; a hang ends the part, not the run


def _scale(n: int) -> int:
    return max(8, n // 32) if CPU else n


# ---- ranks ----------------------------------------------------------------------------------
def _spawn(world: int, fn: Callable[..., dict], *args: Any) -> dict:
    """`fn(*args)` in `world` fresh processes, one GPU each, joined in one process group; rank
    0's result."""
    with tempfile.TemporaryDirectory() as work:
        port = free_port()
        ranks = mp.spawn(_rank, args=(world, port, work, fn, args), nprocs=world, join=False)
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while not ranks.join(timeout=5):
            if time.monotonic() > deadline:
                for process in ranks.processes:
                    process.kill()
                raise TimeoutError(f"{fn.__name__} on {world} GPU(s): over {SPAWN_TIMEOUT_S} s")
        return json.loads((Path(work) / "result.json").read_text())  # type: ignore[no-any-return]


def _rank(
    rank: int, world: int, port: int, work: str, fn: Callable[..., dict], args: tuple
) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    if not CPU:
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(1)
    dist.init_process_group(
        "gloo" if CPU else "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=240),  # a collective one rank never joins fails
        device_id=None if CPU else torch.device("cuda", rank),
    )
    try:
        result = fn(*args)
        if rank == 0:
            (Path(work) / "result.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _sync() -> None:
    if not CPU:
        torch.cuda.synchronize()
    dist.barrier()


def _peak_gib() -> float:
    """The largest peak of allocated GPU memory over the ranks."""
    if CPU:
        return 0.0
    peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**30], device="cuda")
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    return float(peak.item())


def _client(model: str, storage: str, seed: int = 0):  # noqa: ANN202
    import thinker

    service = thinker.ServiceClient(backend="local", storage_dir=storage)
    client = service.create_lora_training_client(
        model, rank=eng.RANK, seed=seed, train_unembed=False
    ).result()
    if not CPU:  # the engine's worker thread computes on this rank's GPU
        on = client._executor.submit(torch.cuda.current_device).result()
        assert on == dist.get_rank(), f"rank {dist.get_rank()}'s engine thread is on GPU {on}"
    return client


# ---- correctness ----------------------------------------------------------------------------
def _chats(step: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(100 + step)
    lengths = torch.randint(_scale(256), _scale(1024) + 1, (8,), generator=g).tolist()
    return eng.random_rows(QWEN, lengths, seed=step)


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    from thinker.engine.local.sharding import full

    return torch.cat([full(t.detach()).float().reshape(-1) for t in tensors])


def _summed_gradients(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """The gradient of the whole batch: a sharded parameter's (FSDP averaged it over the
    ranks) times the ranks, a whole one's summed over the ranks."""
    from torch.distributed.tensor import DTensor

    world, parts = dist.get_world_size(), []
    for p in params:
        if isinstance(p.grad, DTensor):
            parts.append(p.grad.full_tensor().float().reshape(-1) * world)
        else:
            g = p.grad.detach().float().reshape(-1).clone()
            if world > 1:
                dist.all_reduce(g)
            parts.append(g)
    return torch.cat(parts)


def _train_steps(storage: str, steps: list[int], order: list[int], resume: str = "") -> dict:
    """Cross-entropy steps on `_chats(step)` (datums in `order`); per step the loss, the
    logprobs (back in the batch's order), the gradients summed over the ranks and grad_norm;
    the adapter after, and a checkpoint's path. Saved on rank 0 for the comparisons."""
    from tinker import types

    client = _client(QWEN, storage, seed=3)
    if resume:
        client.load_state_with_optimizer(resume).result()
    else:  # B off zero (the same on every rank), so that every LoRA weight has a gradient
        from thinker.engine.local.sharding import like

        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in client._model.named_parameters():
                if "lora_B" in name:
                    p.copy_(like(torch.randn(p.shape, generator=g).to(p.dtype) * 0.01, p))
    loaded = _flat(client._params).cpu()
    seen = []
    for step in steps:
        data = eng.datums(_chats(step))
        data = [data[i] for i in order]
        ce = client.forward_backward(data, "cross_entropy").result()
        grads = _summed_gradients(client._params)
        optim = client.optim_step(types.AdamParams(learning_rate=1e-3)).result()
        logprobs = [None] * len(order)
        for out, i in zip(ce.loss_fn_outputs, order, strict=True):
            logprobs[i] = out["logprobs"].to_torch().float()
        seen.append(
            {
                "loss": ce.metrics["loss:sum"],
                "grad_norm": optim.metrics["grad_norm"],
                "logprobs": torch.cat(logprobs),
                "grads": grads.cpu(),
            }
        )
    path = client.save_state(f"after-{dist.get_world_size()}-{len(steps)}-{steps[0]}").result().path
    return {"seen": seen, "adapter": _flat(client._params).cpu(), "loaded": loaded, "path": path}


def _correctness_side(
    storage: str, steps: list[int], order: list[int], resume: str, sharding: str = "off"
) -> dict:
    os.environ["THINKER_SHARDING"] = sharding
    result = _train_steps(storage, steps, order, resume)
    out = Path(storage) / f"side-{dist.get_world_size()}-{steps[0]}-{order[0]}.pt"
    if dist.get_rank() == 0:
        torch.save(result, out)
    return {"file": str(out), "path": result["path"]}


def _relative(a: torch.Tensor, b: torch.Tensor) -> dict:
    """The largest elementwise difference over b's largest magnitude, and the norm of the
    difference over b's norm."""
    return {
        "max_over_max": float((a - b).abs().max() / b.abs().max()),
        "norm": float((a - b).norm() / b.norm()),
    }


def _compare(got: dict, want: dict) -> dict:
    steps = []
    for g, w in zip(got["seen"], want["seen"], strict=True):
        steps.append(
            {
                "loss": abs(g["loss"] - w["loss"]) / abs(w["loss"]),
                "grad_norm": abs(g["grad_norm"] - w["grad_norm"]) / w["grad_norm"],
                "logprobs": _relative(g["logprobs"], w["logprobs"]),
                "logprobs_max_abs": float((g["logprobs"] - w["logprobs"]).abs().max()),
                "grads": _relative(g["grads"], w["grads"]),
            }
        )
    return {"steps": steps, "adapter": _relative(got["adapter"], want["adapter"])}


def run_correctness(world: int, sharding: str = "off") -> dict:
    """`sharding` for the N-GPU sides (THINKER_SHARDING)."""
    return _correctness(world, [sharding])[sharding]


def run_correctness_both(world: int) -> dict:
    """`correctness` and `sharded-correctness` against the same one-GPU sides."""
    return _correctness(world, ["off", "fsdp"])


def _correctness(world: int, shardings: list[str]) -> dict:
    storage = tempfile.mkdtemp(prefix="thinker-dp-")
    forward, backward = list(range(8)), list(range(7, -1, -1))
    ones = {
        name: _spawn(1, _correctness_side, storage, [0, 1], order, "")
        for name, order in (("one", forward), ("one-rev", backward))
    }
    one, rev = (torch.load(ones[k]["file"]) for k in ("one", "one-rev"))
    return {s: _correctness_n(world, s, storage, one, rev) for s in shardings}


def _correctness_n(world: int, sharding: str, storage: str, one: dict, rev: dict) -> dict:
    forward = list(range(8))
    files = {"n": _spawn(world, _correctness_side, storage, [0, 1], forward, "", sharding)}
    n = torch.load(files["n"]["file"])
    # The N-GPU checkpoint on one GPU, one more step; and the N-GPU run's own third step.
    resumed = _spawn(1, _correctness_side, storage, [2], forward, files["n"]["path"])
    third_n = _spawn(
        world, _correctness_side, storage, [2], list(range(8)), files["n"]["path"], sharding
    )
    resumed, third_n = torch.load(resumed["file"]), torch.load(third_n["file"])
    result = {
        "world": world,
        "sharding": sharding,
        "n_vs_one": _compare(n, one),
        "one_reordered_vs_one": _compare(rev, one),
        "checkpoint": {
            "loaded_vs_saved_max_abs": float((resumed["loaded"] - n["adapter"]).abs().max()),
            "third_step_on_one_vs_on_n": _compare(resumed, third_n),
        },
        "loss": [s["loss"] for s in one["seen"]],
    }
    return result


# ---- SL scaling -----------------------------------------------------------------------------
def _sl_speed(model: str, batches: list[int], seq: int, steps: int, sharding: str = "off") -> dict:
    """The benchmark's SL step at each global batch (rows of `seq` tokens), here and on the
    other ranks: median seconds a step and the peak memory per GPU. `sharding`: the
    THINKER_SHARDING setting."""
    os.environ["THINKER_SHARDING"] = sharding
    began = time.perf_counter()
    client = _client(model, tempfile.mkdtemp(prefix="thinker-bench-"))
    _sync()
    out: dict[str, Any] = {
        "load_s": time.perf_counter() - began,
        "sharded": client._sharded,
        "weights_gib_per_gpu": 0.0 if CPU else torch.cuda.memory_allocated() / 2**30,
    }
    for batch in batches:
        step = eng.engine_sl_step(client, eng.datums(eng.random_rows(model, [seq] * batch)))
        for _ in range(2):
            step()
        _sync()
        if not CPU:
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(steps):
            _sync()
            began = time.perf_counter()
            step()
            _sync()
            times.append(time.perf_counter() - began)
        seconds = statistics.median(times)
        out[str(batch)] = {
            "s_per_step": seconds,
            "tokens_per_s": batch * seq / seconds,
            "peak_gib_per_gpu": _peak_gib(),
            "times": times,
            "checkpointing": client._checkpointing.describe(client._layers()),
        }
    return out


def run_scaling(world: int, model: str, per_gpu: int, seq: int, steps: int = 5) -> dict:
    seq = _scale(seq)
    batches = [per_gpu, per_gpu * world]
    sides = {str(w): _spawn(w, _sl_speed, model, batches, seq, steps) for w in (1, world)}
    one, n = sides["1"], sides[str(world)]
    rows = {}
    for batch in batches:
        key = str(batch)
        rows[key] = {
            "tokens_per_s_1": one[key]["tokens_per_s"],
            f"tokens_per_s_{world}": n[key]["tokens_per_s"],
            "efficiency": n[key]["tokens_per_s"] / (world * one[key]["tokens_per_s"]),
        }
    # Weak scaling: N GPUs at N x the batch against one GPU at the batch (the same per GPU).
    weak = n[str(per_gpu * world)]["tokens_per_s"] / (world * one[str(per_gpu)]["tokens_per_s"])
    return {
        "model": model,
        "seq": seq,
        "per_gpu_batch": per_gpu,
        "world": world,
        "sides": sides,
        "by_global_batch": rows,
        "strong_efficiency": rows[str(per_gpu)]["efficiency"],
        "weak_efficiency": weak,
    }


# ---- sharded (FSDP2) ------------------------------------------------------------------------
def run_sharded_8b(world: int, per_gpu: int = 2, seq: int = 2048, steps: int = 5) -> dict:
    """One GPU at the per-GPU batch; N GPUs whole and N sharded at N times it."""
    seq, batch = _scale(seq), per_gpu * world
    one = _spawn(1, _sl_speed, LLAMA, [per_gpu], seq, steps)
    whole = _spawn(world, _sl_speed, LLAMA, [batch], seq, steps, "off")
    sharded = _spawn(world, _sl_speed, LLAMA, [batch], seq, steps, "fsdp")
    base = world * one[str(per_gpu)]["tokens_per_s"]
    return {
        "model": LLAMA,
        "seq": seq,
        "per_gpu_batch": per_gpu,
        "world": world,
        "sides": {"1": one, "whole": whole, "sharded": sharded},
        "weak_efficiency_whole": whole[str(batch)]["tokens_per_s"] / base,
        "weak_efficiency_sharded": sharded[str(batch)]["tokens_per_s"] / base,
        "sharded_over_whole": sharded[str(batch)]["tokens_per_s"]
        / whole[str(batch)]["tokens_per_s"],
    }


def run_sharded_70b(world: int, per_gpu: int = 1, seq: int = 2048, steps: int = 3) -> dict:
    """The 70B shape sharded over 2 GPUs and over all of them, the same batch per GPU."""
    from thinker.engine.local.models import skeleton

    seq = _scale(seq)
    params = sum(p.numel() for p in skeleton(LLAMA70, torch.bfloat16).parameters())
    sides = {}
    for w in sorted({2, world}):
        side = _spawn(w, _sl_speed, LLAMA70, [per_gpu * w], seq, steps, "fsdp")
        row = side[str(per_gpu * w)]
        row["mfu"] = 4 * params * row["tokens_per_s"] / (w * PEAK_BF16_FLOPS)
        sides[str(w)] = side
    out: dict[str, Any] = {
        "model": LLAMA70,
        "parameters": params,
        "seq": seq,
        "per_gpu_batch": per_gpu,
        "sides": sides,
    }
    if world > 2:
        many, two = sides[str(world)], sides["2"]
        out["weak_efficiency_2_to_n"] = (
            many[str(per_gpu * world)]["tokens_per_s"]
            * 2
            / (world * two[str(per_gpu * 2)]["tokens_per_s"])
        )
    return out


# ---- RL -------------------------------------------------------------------------------------
def _grpo_steps(  # noqa: PLR0913
    groups: int,
    n: int,
    new_tokens: int,
    prompt_len: int,
    steps: int,
    model: str = QWEN,
    sharding: str = "off",
) -> dict:
    from tinker import types

    from thinker.algorithms import rl
    from thinker.rewards import Completion

    os.environ["THINKER_SHARDING"] = sharding
    began_load = time.perf_counter()
    client = _client(model, tempfile.mkdtemp(prefix="thinker-bench-"))
    load_s = time.perf_counter() - began_load
    prompts = eng.random_rows(model, [prompt_len - 1] * groups, seed=1)
    timings = []
    for step in range(steps + 1):  # the first compiles
        _sync()
        began = time.perf_counter()
        sampler = client.save_weights_and_get_sampling_client().result()
        futures = [
            sampler.sample(
                types.ModelInput.from_ints(p),
                n,
                types.SamplingParams(
                    max_tokens=new_tokens, temperature=1.0, stop=[], seed=step * 1009 + i
                ),
            )
            for i, p in enumerate(prompts)
        ]
        rollouts = []
        for prompt, future in zip(prompts, futures, strict=True):
            rollouts.append(
                [
                    rl.Rollout(
                        prompt, list(s.tokens), list(s.logprobs or []), None, Completion("", False)
                    )
                    for s in future.result().sequences
                ]
            )
        sampled = time.perf_counter()
        for group in rollouts:  # reward: the share of even token ids
            for r in group:
                r.reward = sum(t % 2 == 0 for t in r.tokens) / len(r.tokens)
        rl.group_advantages(rollouts)
        flat = [r for g in rollouts for r in g]
        data = [rl._datum(r, "importance_sampling") for r in flat]
        fb = client.forward_backward(data, "importance_sampling")
        client.optim_step(types.AdamParams(learning_rate=1e-5)).result()
        gaps, _ = rl._sampler_learner_gaps(flat, fb.result())
        _sync()
        ended = time.perf_counter()
        tokens = sum(len(r.tokens) for g in rollouts for r in g)
        timings.append(
            {
                "sample_s": sampled - began,
                "train_s": ended - sampled,
                "step_s": ended - began,
                "sampled_tokens": tokens,
                "sampled_here": client._sharing.sampled_here if client._sharing else None,
                "sampler_learner_gap": statistics.fmean(gaps),
                "sampler_learner_gap_abs": statistics.fmean(abs(x) for x in gaps),
            }
        )
    timed = timings[1:]
    median = {k: statistics.median(t[k] for t in timed) for k in ("sample_s", "train_s", "step_s")}
    return {
        **median,
        "sampled_tokens_per_s": timed[0]["sampled_tokens"] / median["sample_s"],
        "steps": timings,
        "peak_gib_per_gpu": _peak_gib(),
        "load_s": load_s,
        "sharding": sharding,
    }


def run_rl(world: int, groups: int = 8, n: int = 32, new_tokens: int = 256, steps: int = 2) -> dict:
    new_tokens, prompt_len = _scale(new_tokens), _scale(128)
    args = (groups, n, new_tokens, prompt_len, steps)
    sides = {str(w): _spawn(w, _grpo_steps, *args) for w in (1, world)}
    one, many = sides["1"], sides[str(world)]
    return {
        "groups": groups,
        "samples_per_group": n,
        "new_tokens": new_tokens,
        "world": world,
        "sides": sides,
        "step_speedup": one["step_s"] / many["step_s"],
        "sample_speedup": one["sample_s"] / many["sample_s"],
        "train_speedup": one["train_s"] / many["train_s"],
    }


def run_rl_sharded(world: int, groups: int = 8, n: int = 32, new_tokens: int = 256) -> dict:
    """The `rl` steps on N GPUs holding the model whole and on N sharding it (FSDP2): sharded,
    the ranks sample in lockstep, each decode step gathering every layer."""
    new_tokens, prompt_len = _scale(new_tokens), _scale(128)
    args = (groups, n, new_tokens, prompt_len, 2)
    whole = _spawn(world, _grpo_steps, *args, QWEN, "off")
    sharded = _spawn(world, _grpo_steps, *args, QWEN, "fsdp")
    return {
        "model": QWEN,
        "groups": groups,
        "samples_per_group": n,
        "new_tokens": new_tokens,
        "world": world,
        "sides": {"whole": whole, "sharded": sharded},
        "sharded_over_whole_step": whole["step_s"] / sharded["step_s"],
    }


def run_rl_70b(world: int, groups: int = 4, n: int = 4, new_tokens: int = 32) -> dict:
    """GRPO steps of the Llama-3.1-70B shape, which no one GPU holds, sharded over N GPUs."""
    args = (groups, n, _scale(new_tokens), _scale(128), 1, LLAMA70, "fsdp")
    side = _spawn(world, _grpo_steps, *args)
    return {"model": LLAMA70, "groups": groups, "samples_per_group": n, "world": world,
            "new_tokens": _scale(new_tokens), "side": side}  # fmt: skip


# ---- the platform ---------------------------------------------------------------------------
def run_platform(world: int, steps: int = 25) -> dict:
    """A `gpus: world` SL job and a `gpus: 1` one through the REST API of a real server."""
    import httpx

    work = Path(tempfile.mkdtemp(prefix="thinker-platform-"))
    port = free_port()
    env = {
        **os.environ,
        "THINKER_DATA_DIR": str(work / "data"),
        "THINKER_PORT": str(port),
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("RANK", None)
    model = QWEN if CPU else eng.QWEN
    config = {"max_steps": _scale(steps) if CPU else steps, "eval_every": 0, "save_every": 0}
    chats = eng.chat_file(work / "chats.jsonl", 300 if CPU else 3000)
    repo = Path(__file__).resolve().parents[2]
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "thinker", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=repo,
    )
    result: dict = {"world": world, "steps": config["max_steps"], "model": model, "jobs": {}}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            wait_up(client, server, 180)
            with chats.open("rb") as f:
                up = client.post(
                    "/api/datasets", files={"file": f}, data={"kind": "chat", "name": "chats"}
                )
            up.raise_for_status()
            dataset = up.json()["id"]
            for gpus in (world, 1):
                body = {
                    "algorithm": "sl",
                    "dataset_id": dataset,
                    "base_model": model,
                    "config": config,
                    "gpus": gpus,
                }
                created = client.post("/api/jobs", json=body)
                created.raise_for_status()
                job = _wait_done(client, created.json()["id"])
                metrics = work / "data" / "runs" / job["id"] / "metrics.jsonl"
                rows = [json.loads(line) for line in metrics.read_text().splitlines()]
                rows = [r for r in rows if "num_tokens" in r]
                steady = rows[1:]  # after the first step (compiling)
                seconds = steady[-1]["time"] - rows[0]["time"]
                result["jobs"][str(gpus)] = {
                    "id": job["id"],
                    "state": job["state"],
                    "placement": job.get("placement"),
                    "device": job.get("device"),
                    "steps": len(rows),
                    "first_step_s": rows[0]["time"] - _created(job),
                    "steady_trained_tokens_per_s": sum(r["num_tokens"] for r in steady) / seconds,
                    "losses": [r["train_mean_nll"] for r in rows],
                }
    finally:
        stop_server(server)
        log.close()
        result["server_log_tail"] = (work / "server.log").read_text()[-2000:]
    jobs = result["jobs"]
    if len(jobs) == 2:
        n, one = jobs[str(world)], jobs["1"]
        result["speedup"] = n["steady_trained_tokens_per_s"] / one["steady_trained_tokens_per_s"]
        result["efficiency"] = result["speedup"] / world
    return result


def _created(job: dict) -> float:
    return datetime.datetime.fromisoformat(job["created_at"]).timestamp()


def _wait_done(client: Any, job_id: str, timeout: float = 900) -> dict:
    deadline = time.time() + timeout
    while True:
        job: dict = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
            if job["state"] != "succeeded":
                raise RuntimeError(
                    f"job {job_id} {job['state']}: {job['reason']}\n{job.get('log_tail')}"
                )
            return job
        if time.time() > deadline:
            raise TimeoutError(f"job {job_id} still {job['state']} after {timeout} s")
        time.sleep(1)


# ---- main -----------------------------------------------------------------------------------
PARTS: dict[str, Callable[[int], dict]] = {
    "correctness": run_correctness,
    "scaling-qwen3": lambda w: run_scaling(w, QWEN, 8, 1024),
    "scaling-llama8b": lambda w: run_scaling(w, LLAMA, 2, 2048),
    "rl": run_rl,
    "platform": run_platform,
    "sharded-correctness": lambda w: run_correctness(w, "fsdp"),
    "correctness-both": run_correctness_both,
    "sharded-8b": run_sharded_8b,
    "sharded-70b": run_sharded_70b,
    "rl-sharded": run_rl_sharded,
    "rl-70b": run_rl_70b,
}


def summary(name: str, r: dict) -> str:  # noqa: PLR0911
    if name == "correctness-both":
        return "\n".join(
            summary("correctness" if s == "off" else "sharded-correctness", part)
            for s, part in r.items()
            if isinstance(part, dict)
        )
    if name in ("correctness", "sharded-correctness"):
        n, floor = r["n_vs_one"], r["one_reordered_vs_one"]
        lines = [f"{name} ({r['world']} GPUs vs 1; floor: 1 GPU, datums reordered):"]
        for i, (s, f) in enumerate(zip(n["steps"], floor["steps"], strict=True)):
            lines.append(
                f"  step {i + 1}: loss {s['loss']:.1e} (floor {f['loss']:.1e}), logprobs "
                f"{s['logprobs']['max_over_max']:.1e} ({f['logprobs']['max_over_max']:.1e}), "
                f"grads max {s['grads']['max_over_max']:.1e} ({f['grads']['max_over_max']:.1e}) "
                f"norm {s['grads']['norm']:.1e} ({f['grads']['norm']:.1e})"
            )
        lines.append(
            f"  adapter after 2 steps: {n['adapter']['max_over_max']:.1e} "
            f"(floor {floor['adapter']['max_over_max']:.1e})"
        )
        c = r["checkpoint"]
        third = c["third_step_on_one_vs_on_n"]["steps"][0]
        lines.append(
            f"  checkpoint of {r['world']} GPUs on 1: loaded adapter max |diff| "
            f"{c['loaded_vs_saved_max_abs']:.1e}; next step's loss {third['loss']:.1e}"
        )
        return "\n".join(lines)
    if name.startswith("scaling"):
        w = r["world"]
        lines = [f"{name} ({r['model']}, {r['seq']} tokens a row, {w} GPUs):"]
        for batch, row in r["by_global_batch"].items():
            lines.append(
                f"  global batch {batch}: 1 GPU {row['tokens_per_s_1']:,.0f} tok/s, {w} GPUs "
                f"{row[f'tokens_per_s_{w}']:,.0f} tok/s, efficiency {row['efficiency']:.2f}"
            )
        lines.append(
            f"  weak scaling (per-GPU batch {r['per_gpu_batch']}): {r['weak_efficiency']:.2f}; "
            f"strong: {r['strong_efficiency']:.2f}"
        )
        return "\n".join(lines)
    if name == "rl":
        one, many = r["sides"]["1"], r["sides"][str(r["world"])]
        return (
            f"rl (GRPO step, {r['groups']} x {r['samples_per_group']} x {r['new_tokens']}): step "
            f"{one['step_s']:.2f} s on 1 GPU, {many['step_s']:.2f} s on {r['world']} "
            f"({r['step_speedup']:.2f}x; sampling {r['sample_speedup']:.2f}x, training "
            f"{r['train_speedup']:.2f}x); sampler-learner gap "
            f"{many['steps'][-1]['sampler_learner_gap']:.1e}"
        )
    if name == "rl-sharded":
        w, s_ = r["sides"]["whole"], r["sides"]["sharded"]
        return (
            f"rl-sharded ({r['world']} GPUs, {r['groups']} x {r['samples_per_group']} x "
            f"{r['new_tokens']}): whole step {w['step_s']:.2f} s (sampling {w['sample_s']:.2f}, "
            f"training {w['train_s']:.2f}), sharded {s_['step_s']:.2f} s (sampling "
            f"{s_['sample_s']:.2f}, training {s_['train_s']:.2f}); peak {w['peak_gib_per_gpu']:.1f}"
            f" / {s_['peak_gib_per_gpu']:.1f} GiB/GPU; sampler-learner gap whole "
            f"{w['steps'][-1]['sampler_learner_gap']:.1e}, sharded "
            f"{s_['steps'][-1]['sampler_learner_gap']:.1e}"
        )
    if name == "rl-70b":
        s_ = r["side"]
        return (
            f"rl-70b ({r['world']} GPUs sharded, {r['groups']} x {r['samples_per_group']} x "
            f"{r['new_tokens']}): step {s_['step_s']:.1f} s (sampling {s_['sample_s']:.1f}, "
            f"training {s_['train_s']:.1f}), loaded in {s_['load_s']:.0f} s, peak "
            f"{s_['peak_gib_per_gpu']:.1f} GiB/GPU, sampler-learner gap "
            f"{s_['steps'][-1]['sampler_learner_gap']:.1e} "
            f"(|gap| {s_['steps'][-1]['sampler_learner_gap_abs']:.1e})"
        )
    if name == "sharded-8b":
        b = str(r["per_gpu_batch"] * r["world"])
        lines = [f"sharded-8b ({r['seq']} tokens a row, {r['per_gpu_batch']} a GPU):"]
        for side in ("whole", "sharded"):
            row = r["sides"][side][b]
            lines.append(
                f"  {r['world']} GPUs {side}: {row['tokens_per_s']:,.0f} tok/s, peak "
                f"{row['peak_gib_per_gpu']:.1f} GiB/GPU, {row['checkpointing']}"
            )
        lines.append(
            f"  1 GPU {r['sides']['1'][str(r['per_gpu_batch'])]['tokens_per_s']:,.0f} tok/s; weak "
            f"efficiency whole {r['weak_efficiency_whole']:.2f}, sharded "
            f"{r['weak_efficiency_sharded']:.2f}; sharded / whole {r['sharded_over_whole']:.2f}"
        )
        return "\n".join(lines)
    if name == "sharded-70b":
        lines = [f"sharded-70b ({r['parameters'] / 1e9:.1f}B parameters, {r['seq']} tokens a GPU):"]
        for w, side in r["sides"].items():
            row = side[str(r["per_gpu_batch"] * int(w))]
            lines.append(
                f"  {w} GPUs: {row['tokens_per_s']:,.0f} tok/s ({row['s_per_step']:.2f} s a step), "
                f"MFU {row['mfu']:.2f}, shards {side['weights_gib_per_gpu']:.1f} GiB/GPU, peak "
                f"{row['peak_gib_per_gpu']:.1f} GiB/GPU, loaded in {side['load_s']:.0f} s, "
                f"{row['checkpointing']}"
            )
        if "weak_efficiency_2_to_n" in r:
            lines.append(f"  weak scaling 2 -> N GPUs: {r['weak_efficiency_2_to_n']:.2f}")
        return "\n".join(lines)
    if name == "platform":
        lines = [f"platform ({r['steps']}-step SL jobs via REST):"]
        for gpus, job in r["jobs"].items():
            lines.append(
                f"  gpus {gpus}: {job['steady_trained_tokens_per_s']:,.0f} trained tok/s, first "
                f"step {job['first_step_s']:.0f} s, placement {job['placement']}"
            )
        if "speedup" in r:
            lines.append(f"  speedup {r['speedup']:.2f}x, efficiency {r['efficiency']:.2f}")
        return "\n".join(lines)
    return json.dumps(r)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=",".join(PARTS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU: the script itself")
    args = parser.parse_args()
    if args.cpu and not CPU:  # the module constants read the variable: start again with it
        os.environ["THINKER_BENCH_CPU"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    world = 2 if CPU else torch.cuda.device_count()
    if world < 2:
        sys.exit(f"{world} GPU(s) here: this benchmark needs 2 or more")
    results: dict = {
        "device": "cpu" if CPU else torch.cuda.get_device_name(0),
        "world": world,
        "torch": torch.__version__,
    }
    for name in args.parts.split(","):
        began = time.perf_counter()
        try:
            results[name] = PARTS[name](world)
            print(summary(name, results[name]), flush=True)
        except Exception as e:  # noqa: BLE001 - one part's failure is reported, the others run
            results[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
        results[name]["part_s"] = time.perf_counter() - began
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
