"""Data parallelism for the local engine's LoRA training: one process per device, each with the
whole model, through torch.distributed (NCCL on CUDA, gloo on the CPU).

A training client made in a process group of N ranks (torch.distributed initialised, by
torchrun or another launcher) takes every call with the whole batch, as the algorithms give it
on every rank alike, and:

- runs forward and backward on its share of the datums (datum i on rank i % N);
- gathers the per-datum logprobs of every rank, so that each rank returns the whole batch's
  output in order, and an algorithm's metrics are those one process would log;
- keeps its gradients to itself across calls and sums them over the ranks once, at
  optim_step, before clipping: the losses are sums over datums, so the sum of the shares'
  gradients is the batch's, and every rank takes the same AdamW step (DDP's arithmetic, with
  DDP's one all-reduce a step when gradients are accumulated without sync);
- gives a custom loss (DPO's) every datum's logprobs, gathered and detached, and pushes its
  gradient back through the datums this rank ran, so a pair split across ranks is still one
  term of one loss;
- writes checkpoints on rank 0 only, the others waiting for it, so a checkpoint is written
  once and resumes on any number of ranks;
- shares out its samplers' calls (`SampleSharing`): call k samples on rank k % N only, and the
  first wait for any of them exchanges every pending call's response, so each rank gets every
  group of an RL step having sampled 1/N of them. On a sharded model (sharding.py), whose every
  forward pass is a collective, the calls run at that exchange, in lockstep (`Lockstep`).

The adapter starts as rank 0's (broadcast), as DDP's does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from thinker.engine.futures import EngineFuture, Serial
from thinker.errors import BackendError

T = TypeVar("T")


@dataclass(frozen=True)
class Group:
    """This process's place among the ranks of one data-parallel run."""

    rank: int
    world: int
    device: torch.device  # where the collectives' own tensors live (NCCL: the rank's GPU)

    @classmethod
    def current(cls) -> Group | None:
        """The initialised default process group, if it has more than one rank."""
        if not dist.is_available() or not dist.is_initialized():
            return None
        world = dist.get_world_size()
        if world == 1:
            return None
        device = torch.device("cpu")
        if dist.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        return cls(dist.get_rank(), world, device)

    def share(self, items: Sequence[T]) -> list[T]:
        """This rank's items: i % world == rank."""
        return list(items[self.rank :: self.world])

    def gather(self, mine: list[Tensor], count: int) -> list[Tensor]:
        """Every rank's share (as `share` cut them), back in the order of the `count` items,
        on the host."""
        parts: list[list[Tensor] | None] = [None] * self.world
        dist.all_gather_object(parts, [t.detach().cpu() for t in mine])
        out: list[Tensor | None] = [None] * count
        for rank, part in enumerate(parts):
            assert part is not None
            for j, tensor in enumerate(part):
                out[rank + j * self.world] = tensor
        assert all(t is not None for t in out), "a rank gave fewer items than its share"
        return [t for t in out if t is not None]

    def sum(self, value: float) -> float:
        total = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(total)
        return float(total.item())

    def max(self, value: int) -> int:
        return self._reduce(value, dist.ReduceOp.MAX)

    def min(self, value: int) -> int:
        return self._reduce(value, dist.ReduceOp.MIN)

    def _reduce(self, value: int, op: dist.ReduceOp.RedOpType) -> int:
        found = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(found, op=op)
        return int(found.item())

    def sum_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Each parameter's gradient summed over the ranks (a rank with no datums adds 0),
        in one all-reduce of one flat buffer."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1).to(torch.float32) for g in grads])
        dist.all_reduce(flat)
        offset = 0
        for p, g in zip(params, grads, strict=True):
            p.grad = flat[offset : offset + g.numel()].view_as(p).to(p.dtype)
            offset += g.numel()

    def broadcast(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Rank 0's values on every rank."""
        with torch.no_grad():
            for p in params:
                dist.broadcast(p.data, src=0)

    def barrier(self) -> None:
        dist.barrier()


class Lockstep:
    """Calls of different lengths on the ranks of a sharded model, run in matching passes.

    Each forward pass of a sharded model gathers every layer from every rank, so the ranks
    must run the same number of passes; sampling calls stop when their sequences end, and each
    rank runs other calls. While `begin` .. `drain` is in force, every pass starts with a
    vote of the ranks (one all-reduce, in a pre-hook on the layers' parent): a rank that
    runs a pass votes 1. A rank whose calls are done votes 0 in `drain` instead, and while any
    rank voted 1 it joins that pass with an idle one (one token through every layer); when
    every rank votes 0 they all leave together. Sharded training passes need none of this (the
    ranks agree on their count beforehand, training.py), so the vote is off outside sampling.
    """

    def __init__(
        self, group: Group, passes: torch.nn.Module, idle_pass: Callable[[], object]
    ) -> None:
        """`passes`: the module every pass runs once (the layers' parent); its pre-hook votes
        before FSDP's own gathers the first layer."""
        self._group = group
        self._idle_pass = idle_pass
        self._voting = False
        self.idle_passes = 0  # passes this rank joined without work of its own (the last drain)
        passes.register_forward_pre_hook(self._before_pass, prepend=True)

    def _before_pass(self, module: torch.nn.Module, args: object) -> None:
        if self._voting:
            self._group.sum(1.0)

    def begin(self) -> None:
        """From now on each pass of this rank's calls is voted for (on the model's thread)."""
        self._voting = True

    def drain(self) -> None:
        """This rank's calls are done: join the others' passes until every rank's are."""
        self._voting = False
        self.idle_passes = 0
        while self._group.sum(0.0) > 0:
            self._idle_pass()
            self.idle_passes += 1


class SampleSharing:
    """The sampling calls of one data-parallel run's samplers, shared out over the ranks.

    Every rank makes the same calls in the same order (they run the same algorithm), so call
    k has the same number everywhere: it samples on rank k % world alone. The first wait for
    any pending call (`result()` or `await`) exchanges the responses of every call made so
    far, in one all-gather over a gloo group of its own (apart from the training's
    collectives, which run on another thread); all ranks wait at that same point. A call that
    failed on its rank fails on every rank, with that rank's error.

    With `lockstep` (a sharded model), a rank's calls start at the exchange rather than when
    made, on `executor` (the model's thread) between `lockstep.begin` and `drain`: all ranks
    are there together, and their calls' passes match.
    """

    def __init__(
        self, group: Group, lockstep: Lockstep | None = None, executor: Serial | None = None
    ) -> None:
        assert (lockstep is None) == (executor is None), "a lockstep runs on an executor"
        self._group = group
        self._lockstep, self._executor = lockstep, executor
        self._objects = dist.new_group(backend="gloo")  # collective: every rank makes one
        self._lock = threading.Lock()
        self._calls = 0
        self._pending: list[tuple[int, Callable[[], EngineFuture[Any]] | None, Future[Any]]] = []
        self.sampled_here = 0  # calls this rank sampled (the others came from its peers)

    @property
    def deferred(self) -> bool:
        """Whether a rank's calls start at the exchange (in lockstep), not when made."""
        return self._lockstep is not None

    def submit(self, sample: Callable[[], EngineFuture[T]]) -> EngineFuture[T]:
        """Call k: `sample()` here if this rank owns it (now, or at the exchange in lockstep);
        either way, a future of its response."""
        with self._lock:
            k = self._calls
            self._calls += 1
        own: Callable[[], EngineFuture[Any]] | None = None
        if k % self._group.world == self._group.rank:
            own = sample
            if self._lockstep is None:
                started = sample()
                own = lambda: started  # noqa: E731
            self.sampled_here += 1
        target: Future[T] = Future()
        with self._lock:
            self._pending.append((k, own, target))
        return _Exchanged(target, self)

    def exchange(self) -> None:
        """Every pending call's response, from the rank that sampled it."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        owned = [(k, own) for k, own, _ in pending if own is not None]
        if self._lockstep is not None and self._executor is not None:
            # The model's thread waits at a gate while this rank's calls are queued, so they
            # run as one batch (not as many as the timing would make); the drain, queued
            # after them, runs when they are done.
            gate = threading.Event()
            lockstep = self._lockstep

            def open_at_gate() -> None:
                lockstep.begin()
                gate.wait()

            opened = self._executor.submit(open_at_gate)
            try:
                started = [(k, _start(own)) for k, own in owned]
            finally:
                gate.set()
            opened.result()
            self._executor.submit(lockstep.drain).result()
        else:
            started = [(k, _start(own)) for k, own in owned]
        mine: dict[int, tuple[bool, Any]] = {}
        for k, future in started:
            try:
                mine[k] = (True, future.result())
            except Exception as e:  # noqa: BLE001 - sent to every rank, raised there
                mine[k] = (False, f"{type(e).__name__}: {e}")
        parts: list[dict[int, tuple[bool, Any]] | None] = [None] * self._group.world
        dist.all_gather_object(parts, mine, group=self._objects)
        answers = {k: v for part in parts if part is not None for k, v in part.items()}
        for k, _, target in pending:
            ok, value = answers[k]
            if ok:
                target.set_result(value)
            else:
                rank = k % self._group.world
                target.set_exception(BackendError(f"sampling on rank {rank} failed: {value}"))


def _start(call: Callable[[], EngineFuture[T]]) -> EngineFuture[T]:
    """`call()`, or a future of the error it raised."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the call's own error, for every rank
        failed: Future[T] = Future()
        failed.set_exception(e)
        return EngineFuture(failed)


class _Exchanged(EngineFuture[T]):
    """A shared-out call's future: waiting for it first exchanges the pending responses."""

    def __init__(self, future: Future[T], sharing: SampleSharing) -> None:
        super().__init__(future)
        self._sharing = sharing

    def result(self, timeout: float | None = None) -> T:
        self._sharing.exchange()
        return super().result(timeout)

    async def result_async(self, timeout: float | None = None) -> T:
        self._sharing.exchange()
        return await super().result_async(timeout)

    def __await__(self) -> Generator[Any, None, T]:
        self._sharing.exchange()
        return super().__await__()
