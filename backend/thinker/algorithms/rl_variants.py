"""The arithmetic of the RL variants (GRPO, Dr. GRPO, DAPO, GSPO): advantages, token weights,
KL estimators, reward shaping and dynamic sampling, as TRAINING_GUIDE.md's "RL variants" writes
them. Every term reaches the engine's losses through the rewards or the per-token advantages.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from thinker.algorithms.episodes import Rollout
from thinker.algorithms.rl_config import AdvantageNorm, KLEstimator, RLConfig
from thinker.rewards import Problem

STD_EPS = 1e-6  # GRPO's: a group of equal rewards gets advantages 0, not 0 / 0


def advantages_G(rewards_G: Sequence[float], norm: AdvantageNorm) -> list[float]:
    """Reward minus the group's mean; with `norm` "std", divided by the group's standard
    deviation (with Bessel's n - 1, as TRL and verl compute it) + 1e-6."""
    mean = statistics.fmean(rewards_G)
    centred_G = [x - mean for x in rewards_G]
    if norm == "none":
        return centred_G
    scale = statistics.stdev(rewards_G) + STD_EPS
    return [a / scale for a in centred_G]


def k1(logprob: float, base_logprob: float) -> float:
    """log q - log p_base: unbiased for KL(q || p_base) on tokens sampled from q; per token it
    may be negative."""
    return logprob - base_logprob


def k3(logprob: float, base_logprob: float) -> float:
    """exp(x) - x - 1 with x = log p_base - log q (Schulman, "Approximating KL divergence",
    2020): also unbiased, never negative, of lower variance while p_base is near q."""
    x = base_logprob - logprob
    return math.expm1(x) - x


KL_ESTIMATORS: dict[KLEstimator, Callable[[float, float], float]] = {"k1": k1, "k3": k3}


def overlong_penalty(length: int, max_len: int, cache: int) -> float:
    """DAPO's soft overlong punishment (arXiv:2503.14476, eq. 13): 0 up to max_len - cache
    tokens, then (max_len - cache - length) / cache, reaching -1 at max_len (and beyond)."""
    start = max_len - cache
    if length <= start:
        return 0.0
    return max(-1.0, (start - length) / cache)


def overlong_cache(config: RLConfig) -> int:
    """L_cache: the config's, else a quarter of the token budget (at least one token)."""
    return config.overlong_cache or max(1, config.token_budget() // 4)


def shaping_term(r: Rollout, config: RLConfig) -> float:
    """What reward shaping adds to `r`'s reward: the format bonus, the length penalty and the
    soft overlong penalty, each 0 when off. Lengths are the policy's sampled tokens."""
    term = 0.0
    if config.format_reward is not None and re.search(
        config.format_reward.pattern, r.completion.text
    ):
        term += config.format_reward.weight
    if config.length_penalty is not None:
        beyond = max(0, r.sampled_count - config.length_penalty.target)
        term -= config.length_penalty.coef * beyond
    if config.overlong == "soft":
        term += overlong_penalty(r.sampled_count, config.token_budget(), overlong_cache(config))
    return term


def shapes_rewards(config: RLConfig) -> bool:
    return (
        config.format_reward is not None
        or config.length_penalty is not None
        or config.overlong == "soft"
    )


def shape_rewards(groups: list[list[Rollout]], config: RLConfig) -> None:
    """Add each rollout's shaping term to its reward, before advantages (rewards untouched when
    shaping is off)."""
    if not shapes_rewards(config):
        return
    for group in groups:
        for r in group:
            r.reward += shaping_term(r, config)


def masked(r: Rollout, config: RLConfig) -> bool:
    """Left out of the loss: a completion cut at its token budget, under overlong filter."""
    return config.overlong == "filter" and not r.completion.terminated


def token_weight(r: Rollout, config: RLConfig) -> float:
    """The weight of each of `r`'s token terms, the loss being the weighted sum divided by
    `loss_units`: token 1 (over the batch's tokens), sequence 1 / |o| and constant 1 / L_max
    (over the batch's completions)."""
    if config.loss_aggregation == "sequence":
        return 1.0 / max(r.sampled_count, 1)
    if config.loss_aggregation == "constant":
        return 1.0 / config.token_budget()
    return 1.0


def weigh_tokens(rollouts: list[Rollout], config: RLConfig) -> None:
    """Fold the aggregation's weight into each rollout's per-token advantages, and zero those
    of masked rollouts. Exact for the losses RLConfig allows non-token aggregations with: each
    is linear or positively homogeneous in the advantage, so loss(w * A) = w * loss(A) for
    w > 0. Token aggregation leaves every advantage as it was."""
    for r in rollouts:
        if masked(r, config):
            r.advantage = 0.0
            r.token_advantages = [0.0] * len(r.tokens)
            continue
        weight = token_weight(r, config)
        if weight != 1.0:
            advantages = r.token_advantages or [r.advantage] * len(r.tokens)
            r.token_advantages = [a * weight for a in advantages]


def loss_units(rollouts: list[Rollout], config: RLConfig) -> int:
    """What the loss of `rollouts` is divided by to be its variant's mean (so that
    grad_clip_norm bounds that mean's gradient): their sampled tokens for token aggregation,
    their number for sequence and constant; masked rollouts count in neither."""
    counted = [r for r in rollouts if not masked(r, config)]
    if config.loss_aggregation == "token":
        return sum(r.sampled_count for r in counted)
    return len(counted)


# Plays a group of episodes of each problem: (problems, config, seeds, version, prompt logprobs).
Play = Callable[[list[Problem], RLConfig, list[int], int, bool], Awaitable[list[list[Rollout]]]]


@dataclass
class Refilled:
    """A step's problems and groups after dynamic sampling, and what the refills took."""

    batch: list[Problem]
    groups: list[list[Rollout]]
    rounds: int = 0
    seconds: float = 0.0


async def refill(  # noqa: PLR0913
    train: list[Problem],
    batch: list[Problem],
    groups: list[list[Rollout]],
    config: RLConfig,
    step: int,
    play: Play,
) -> Refilled:
    """DAPO's dynamic sampling: while fewer than groups_per_batch groups have unequal rewards,
    play groups of more problems (the missing number over the share kept so far, at most
    groups_per_batch; drawn from a per-step shuffle of the problems not in the batch, so no
    problem repeats in a step), at most max_refill_rounds times. No-op when it is off."""
    if not config.dynamic_sampling:
        return Refilled(batch, groups)
    started, rounds = time.monotonic(), 0
    in_batch = {id(p) for p in batch}
    others = [p for p in train if id(p) not in in_batch]
    random.Random(f"refill {config.seed} {step}").shuffle(others)
    while rounds < config.max_refill_rounds and others:
        kept = sum(not _constant(g) for g in groups)
        missing = config.groups_per_batch - kept
        if missing <= 0:
            break
        wanted = min(config.groups_per_batch, math.ceil(missing * len(groups) / max(kept, 1)))
        extra, others = others[:wanted], others[wanted:]
        # seeded as groups len(groups), len(groups) + 1, ... of the step would be
        seeds = [config.seed * 1_000_003 + step * 1009 + len(groups) + i for i in range(len(extra))]
        new = await play(extra, config, seeds, step, config.loss_fn == "dro")
        shape_rewards(new, config)
        batch, groups, rounds = batch + extra, groups + new, rounds + 1
    return Refilled(batch, groups, rounds, time.monotonic() - started)


def _constant(group: list[Rollout]) -> bool:
    return len({r.reward for r in group}) == 1


def variant_metrics(groups: list[list[Rollout]], config: RLConfig, rounds: int) -> dict[str, float]:
    """`refill_rounds` under dynamic sampling; `reward_shaping_mean` (what shaping added to the
    mean reward: the task's own is reward_mean minus it) when shaping is on."""
    metrics = {}
    if config.dynamic_sampling:
        metrics["refill_rounds"] = float(rounds)
    if shapes_rewards(config):
        terms = [shaping_term(r, config) for g in groups for r in g]
        metrics["reward_shaping_mean"] = statistics.fmean(terms)
    return metrics
