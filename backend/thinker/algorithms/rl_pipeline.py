"""RL's batches in flight: sampling ahead of training by a fixed number of steps, and the
samples a checkpoint keeps so that a resumed run trains on exactly what it would have.

With `max_steps_off_policy` k, the batch of step b is sampled from the policy after
max(b - k, 0) steps (the snapshot taken at step b - k) while steps b - k .. b - 1 train: the
sampler runs k steps ahead of the learner, and every sample is exactly k steps old once the
pipeline is full (fewer in its first k steps). k = 0 is the synchronous loop: sample the step's
batch from the current weights, then train on it.

A fixed lag, rather than "the newest weights when a group starts" (the Tinker cookbook's
asynchronous loop), keeps a run deterministic: which weights sample which batch depends on the
step alone, never on timing, so two runs of one config sample the same rollouts and a resumed
run equals an uninterrupted one. Its cost: a sample is k steps old even when sampling could
have waited for newer weights.

A checkpoint after step s keeps the k batches already sampled for steps s .. s + k - 1 (from
weights no checkpoint holds) in `buffer/step_<s>.json` beside checkpoints.jsonl; a resume loads
them. A group older than the bound when its step trains (a resume with a smaller k) is dropped,
counted, and sampled again from the current weights.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinker.algorithms.episodes import Rollout
from thinker.errors import ConfigError
from thinker.files import write_json_atomically
from thinker.rewards import Completion, Problem

BUFFER_FORMAT = 1


@dataclass
class Sampled:
    """One step's batch, sampled and scored (reward shaping and dynamic sampling's refills
    done), waiting to be trained."""

    step: int
    batch: list[Problem]
    groups: list[list[Rollout]]
    rounds: int = 0  # dynamic sampling's refill rounds
    seconds: float = 0.0  # spent sampling it


# Samples the batch of a step from the weights at hand.
Collect = Callable[[int], Awaitable[Sampled]]


class Lookahead:
    """The batches sampled ahead of training, one asyncio task a step."""

    def __init__(self, k: int, last_step: int) -> None:
        self.k = k
        self.last_step = last_step  # the run's last step index (max_steps - 1)
        self._tasks: dict[int, asyncio.Task[Sampled]] = {}

    def load(self, batches: list[Sampled]) -> None:
        """Batches a checkpoint kept, as if sampled already."""
        for sampled in batches:
            if sampled.step <= self.last_step:
                self._tasks[sampled.step] = asyncio.ensure_future(_done(sampled))

    def fill(self, step: int, collect: Collect) -> None:
        """Start sampling every batch from `step` to `step + k` not started yet with
        `collect`, which samples from the weights after `step` steps (at step s only batch
        s + k is new, except at the start of a run or a resume)."""
        for b in range(step, min(step + self.k, self.last_step) + 1):
            if b not in self._tasks:
                self._tasks[b] = asyncio.ensure_future(collect(b))

    async def take(self, step: int) -> Sampled:
        """Step `step`'s batch, once it is sampled."""
        return await self._tasks.pop(step)

    async def ahead(self) -> list[Sampled]:
        """Every batch started for a later step, once sampled (what a checkpoint keeps)."""
        return [await self._tasks[b] for b in sorted(self._tasks)]

    async def close(self) -> None:
        """Cancel what is still sampling (a run that stops early or fails)."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()


async def _done(sampled: Sampled) -> Sampled:
    return sampled


def stale_groups(sampled: Sampled, step: int, k: int) -> list[int]:
    """The indices of `sampled`'s groups sampled more than `k` steps before `step`."""
    return [i for i, g in enumerate(sampled.groups) if g and step - g[0].version > k]


def save_buffer(path: Path, step: int, k: int, batches: list[Sampled]) -> None:
    """Write the batches sampled ahead of a checkpoint after `step` steps (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(
        path,
        {
            "format": BUFFER_FORMAT,
            "step": step,
            "max_steps_off_policy": k,
            "batches": [_batch_record(s) for s in batches],
        },
    )


def load_buffer(path: Path, step: int) -> list[Sampled]:
    """The batches a checkpoint after `step` steps kept; none if it kept none (a synchronous
    run's, or an older run's)."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != BUFFER_FORMAT or data.get("step") != step:
            raise ValueError(f"format {data.get('format')}, step {data.get('step')}")
        return [_batch_from(b) for b in data["batches"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(
            f"{path}: the samples kept with the checkpoint at step {step} cannot be read ({e}); "
            "delete the file to sample those steps again from the checkpoint's weights"
        ) from e


def _batch_record(sampled: Sampled) -> dict[str, Any]:
    return {
        "step": sampled.step,
        "problems": [dataclasses.asdict(p) for p in sampled.batch],
        "groups": [[dataclasses.asdict(r) for r in g] for g in sampled.groups],
        "rounds": sampled.rounds,
        "seconds": sampled.seconds,
    }


def _batch_from(record: dict[str, Any]) -> Sampled:
    return Sampled(
        step=int(record["step"]),
        batch=[Problem(**p) for p in record["problems"]],
        groups=[[_rollout(r) for r in g] for g in record["groups"]],
        rounds=int(record["rounds"]),
        seconds=float(record["seconds"]),
    )


def _rollout(record: dict[str, Any]) -> Rollout:
    return Rollout(**{**record, "completion": Completion(**record["completion"])})
