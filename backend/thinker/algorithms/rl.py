"""RL: policy-gradient training on groups of sampled completions scored by a reward.

What it computes. Each step takes `groups_per_batch` problems and samples `group_size`
completions of each from a frozen snapshot of the current policy. Each completion's
reward minus its group's mean reward is its advantage (no division by the std: this is
REINFORCE with a per-group baseline, the "GRPO" of the Tinker cookbook, not PPO with a
critic). Groups whose rewards are all equal carry no signal and are dropped (configurable).
With `kl_coef > 0`, each completion token's advantage is lowered by kl_coef * (log q - log
p_base), the sampled estimate of the KL to the base model. The datums (prompt + completion,
the sampler's logprobs, per-token advantages; zero advantage on prompt tokens) go to
`forward_backward` with the configured loss (`importance_sampling` by default: on-policy,
its ratio starts at 1) in `num_substeps` optimizer steps.

Logged per step: reward mean/std, fraction of groups dropped, sampled KL to the base, the
sampled entropy estimate (-mean log q), mean completion length, sampling tokens/s; and every
`eval_every` steps (and at step 0) the held-out mean reward of completions sampled as in
training. Each step's rollouts (prompt, completions, rewards, advantages) go to
`rollouts/step_NNNNNN.jsonl` in the run directory.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tinker import types

from thinker.algorithms.common import (
    RunResult,
    adam_params,
    is_due,
    optimizer_metrics,
    prepare_run,
    save_checkpoint,
    start_or_resume,
    stop_if_diverged,
)
from thinker.algorithms.rl_config import RLConfig
from thinker.data import split_train_eval
from thinker.data.problems import load_problems
from thinker.engine import ServiceClient
from thinker.engine.protocols import SamplingClient, TrainingClient
from thinker.files import records_here
from thinker.renderers import Renderer, renderer_for
from thinker.rewards import Completion, Problem, RewardFn
from thinker.rewards.registry import build_reward
from thinker.runs import MetricsLogger

__all__ = ["RLConfig", "group_advantages", "main"]


@dataclass
class Rollout:
    """One sampled completion of one problem, with what training needs from it."""

    prompt_tokens: list[int]
    tokens: list[int]
    logprobs: list[float]  # the sampler's log q of each completion token
    prompt_logprobs: list[float] | None  # only for the dro loss (its penalty covers all tokens)
    completion: Completion
    reward: float = 0.0
    advantage: float = 0.0
    base_logprobs: list[float] | None = None  # log p_base of each completion token
    token_advantages: list[float] | None = None  # per token, once the KL penalty is folded in


async def main(
    config: RLConfig,
    service: ServiceClient | None = None,
    logger: MetricsLogger | None = None,
    reward_fn: RewardFn | None = None,
) -> RunResult:
    run, service, logger = prepare_run(config, service, logger)

    # Set up: client, renderer, reward, problems, and the base model for the KL estimate.
    start = await start_or_resume(config, service, run, logger)
    client = start.client
    tokenizer = client.get_tokenizer()
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    reward_fn = reward_fn or build_reward(config.reward, base_dir=Path(config.dataset).parent)
    problems = load_problems(config.dataset)
    if config.eval_dataset is not None:
        train, held_out = problems, load_problems(config.eval_dataset)
    else:
        train, held_out = split_train_eval(problems, config.eval_fraction, config.seed)
    base = await service.create_sampling_client(base_model=config.base_model)
    run.rollouts.mkdir(exist_ok=True)

    # Loop: sample groups from a snapshot of the policy, score, train, log.
    result, metrics = start.result, {}
    if start.step == 0:  # the starting point, for comparison with every later evaluation
        eval_reward = await _eval_reward(client, renderer, held_out, reward_fn, config)
        logger.log_metrics({"eval_reward_mean": eval_reward}, step=0)
    logger.log_event("plan", {"total_steps": config.max_steps, "start_step": start.step})
    for step in range(start.step, config.max_steps):
        started = time.monotonic()
        policy = await client.save_weights_and_get_sampling_client()
        batch = _problems_of_step(train, step, config.groups_per_batch, config.seed)
        groups, sample_s = await _sample_groups(policy, renderer, batch, config, step)
        _score(groups, batch, reward_fn)
        kept = [g for g in groups if not (config.drop_constant_groups and _constant(g))]
        group_advantages(kept)
        await _base_logprobs(base, [r for g in groups for r in g])
        for group in kept:
            _apply_kl_penalty(group, config.kl_coef)
        _write_rollouts(run.rollout_file(step + 1), batch, groups, kept, renderer)
        trained = [r for g in kept for r in g]
        datums = [_datum(r, config.loss_fn) for r in trained]
        starts = [len(r.prompt_tokens) - 1 for r in trained]
        train_metrics = await _train(client, datums, config, step, starts)
        metrics = {
            **_rollout_metrics(groups, kept, sample_s),
            **train_metrics,
            "step_time_s": time.monotonic() - started,
        }
        done = step + 1
        if is_due(done, config.eval_every, config.max_steps):
            metrics["eval_reward_mean"] = await _eval_reward(
                client, renderer, held_out, reward_fn, config
            )
        logger.log_metrics(metrics, step=done)
        stop_if_diverged(metrics, done, "loss", config)
        if is_due(done, config.save_every, config.max_steps):
            result = await save_checkpoint(client, run, done, logger)
    result.steps = config.max_steps
    result.final_metrics = metrics
    return result


def group_advantages(groups: list[list[Rollout]]) -> None:
    """Advantage = reward - the group's mean reward (no std normalisation, as the cookbook)."""
    for group in groups:
        mean = statistics.fmean(r.reward for r in group)
        for r in group:
            r.advantage = r.reward - mean


def _problems_of_step(problems: list[Problem], step: int, n: int, seed: int) -> list[Problem]:
    """The problems of `step`: a fixed shuffle per pass over the data (resumes see the same)."""
    per_pass = max(1, len(problems) // n)
    epoch, index = divmod(step, per_pass)
    order = list(range(len(problems)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    chosen = order[index * n : (index + 1) * n] or order[:n]
    return [problems[i] for i in chosen]


async def _sample_groups(
    policy: SamplingClient, renderer: Renderer, batch: list[Problem], config: RLConfig, step: int
) -> tuple[list[list[Rollout]], float]:
    started = time.monotonic()
    want_prompt_lp = config.loss_fn == "dro"
    futures = []
    for i, problem in enumerate(batch):
        prompt = renderer.build_generation_prompt(problem.messages)
        params = types.SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            stop=renderer.get_stop_sequences(),
            seed=config.seed * 1_000_003 + step * 1009 + i,
        )
        future = policy.sample(
            prompt, config.group_size, params, include_prompt_logprobs=want_prompt_lp
        )
        futures.append((prompt.to_ints(), future))
    groups = []
    for prompt_tokens, future in futures:
        response = await future
        prompt_lp = None
        if want_prompt_lp:
            assert response.prompt_logprobs is not None, "asked for with include_prompt_logprobs"
            prompt_lp = [0.0 if v is None else v for v in response.prompt_logprobs]
        groups.append(
            [_rollout(prompt_tokens, seq, prompt_lp, renderer) for seq in response.sequences]
        )
    return groups, time.monotonic() - started


def _rollout(
    prompt_tokens: list[int],
    seq: types.SampledSequence,
    prompt_lp: list[float] | None,
    renderer: Renderer,
) -> Rollout:
    completion = _completion(list(seq.tokens), renderer)
    assert seq.logprobs is not None, "every backend gives the sampled tokens' logprobs"
    return Rollout(prompt_tokens, list(seq.tokens), list(seq.logprobs), prompt_lp, completion)


def _completion(tokens: list[int], renderer: Renderer) -> Completion:
    message, reason = renderer.parse_response(tokens)
    return Completion(text=message["content"], terminated=reason == "stop")


def _score(groups: list[list[Rollout]], batch: list[Problem], reward_fn: RewardFn) -> None:
    for group, problem in zip(groups, batch, strict=True):
        rewards = reward_fn(problem, [r.completion for r in group])
        for r, reward in zip(group, rewards, strict=True):
            r.reward = float(reward)


def _constant(group: list[Rollout]) -> bool:
    return len({r.reward for r in group}) == 1


async def _base_logprobs(base: SamplingClient, rollouts: list[Rollout]) -> None:
    """log p_base of every sampled token (for the KL estimate and the optional penalty)."""
    futures = [
        base.compute_logprobs(types.ModelInput.from_ints(r.prompt_tokens + r.tokens))
        for r in rollouts
    ]
    for r, future in zip(rollouts, futures, strict=True):
        logprobs = (await future)[len(r.prompt_tokens) :]
        r.base_logprobs = [float(v) for v in logprobs if v is not None]
        assert len(r.base_logprobs) == len(logprobs), "no logprob is None past position 0"


def _apply_kl_penalty(group: list[Rollout], kl_coef: float) -> None:
    """Fold -kl_coef * (log q - log p_base) into each token's advantage (kept per token)."""
    if kl_coef <= 0:
        return
    for r in group:
        assert r.base_logprobs is not None
        r.token_advantages = [
            r.advantage - kl_coef * (q - b)
            for q, b in zip(r.logprobs, r.base_logprobs, strict=True)
        ]


def _datum(r: Rollout, loss_fn: str) -> types.Datum:
    """Prompt + completion; targets shifted by one; advantages on completion tokens only."""
    full = r.prompt_tokens + r.tokens
    n_prompt = len(r.prompt_tokens) - 1  # target positions that predict prompt tokens
    token_adv = r.token_advantages or [r.advantage] * len(r.tokens)
    prompt_lp = r.prompt_logprobs[1:] if r.prompt_logprobs is not None else [0.0] * n_prompt
    # As the SDK would convert these lists itself (int64 targets, float32 others), but typed.
    inputs = {
        "target_tokens": types.TensorData.from_numpy(np.asarray(full[1:], dtype=np.int64)),
        "logprobs": _float32(prompt_lp + r.logprobs),
        "advantages": _float32([0.0] * n_prompt + list(token_adv)),
    }
    if loss_fn in SEQUENCE_LOSSES:  # the completion is the sequence its ratio averages over
        inputs["sequence_ratio_mask"] = _float32([0.0] * n_prompt + [1.0] * len(r.tokens))
    return types.Datum(model_input=types.ModelInput.from_ints(full[:-1]), loss_fn_inputs=inputs)


# Losses with a sequence-level quantity (GSPO's ratio, stable_reinforce's KL term), told which
# tokens are the completion rather than left to infer it from non-zero advantages.
SEQUENCE_LOSSES = frozenset({"gspo", "stable_reinforce"})


def _float32(values: list[float]) -> types.TensorData:
    return types.TensorData.from_numpy(np.asarray(values, dtype=np.float32))


async def _train(
    client: TrainingClient,
    datums: list[types.Datum],
    config: RLConfig,
    step: int,
    starts: list[int],
) -> dict[str, float]:
    """`num_substeps` optimizer steps over the batch (none if every group was dropped);
    `starts[i]` is the target position of datum i's first sampled token."""
    if not datums:
        return {"num_datums": 0.0}
    chunk = -(-len(datums) // config.num_substeps)
    submitted, parts = [], []
    for k in range(config.num_substeps):
        part = datums[k * chunk : (k + 1) * chunk]
        if not part:
            break
        parts.append(part)
        first = starts[k * chunk : k * chunk + len(part)]
        sampled = sum(d.model_input.length - s for d, s in zip(part, first, strict=True))
        adam = adam_params(config, step, config.max_steps, sampled)
        fb = client.forward_backward(part, config.loss_fn, config.loss_fn_config or None)
        submitted.append((fb, client.optim_step(adam), adam))
    losses, norms, clipped, gaps = [], [], [], []
    optimizer: dict[str, float] = {}
    for k, ((fb, opt, adam), part) in enumerate(zip(submitted, parts, strict=True)):
        out = await fb
        losses.append(out.metrics["loss:sum"])
        gaps += _sampler_learner_gaps(part, out, starts[k * chunk : k * chunk + len(part)])
        optimizer = optimizer_metrics(await opt, adam.grad_clip_norm)
        if "grad_norm" in optimizer:
            norms.append(optimizer["grad_norm"])
            clipped.append(optimizer["grad_clipped"])
    metrics = {
        "loss": sum(losses) / len(datums),
        "num_datums": float(len(datums)),
        "learning_rate": submitted[-1][2].learning_rate,
        # mean of log q - log p over every sampled token (a zero advantage too): ~0
        # on-policy at the first substep; a large value means the sampler and the learner
        # disagree (a bug or stale weights)
        "kl_sample_train": statistics.fmean(gaps) if gaps else 0.0,
    }
    if norms:
        metrics["grad_norm"] = statistics.fmean(norms)
        metrics["grad_clipped"] = statistics.fmean(clipped)  # the share of substeps clipped
    if "param_norm" in optimizer:  # after the last substep
        metrics["param_norm"] = optimizer["param_norm"]
    return metrics


def _sampler_learner_gaps(
    part: list[types.Datum], out: types.ForwardBackwardOutput, starts: list[int]
) -> list[float]:
    """log q - log p of each sampled token of `part` (target positions from `starts[i]` on;
    the prompt's are not sampled), whatever its advantage."""
    gaps = []
    for datum, result, start in zip(part, out.loss_fn_outputs, starts, strict=True):
        q = datum.loss_fn_inputs["logprobs"].to_torch()[start:]
        p = result["logprobs"].to_torch()[start:]
        gaps += (q - p).tolist()
    return gaps


def _rollout_metrics(
    groups: list[list[Rollout]], kept: list[list[Rollout]], sample_s: float
) -> dict[str, float]:
    rollouts = [r for g in groups for r in g]
    rewards = [r.reward for r in rollouts]
    tokens = sum(len(r.tokens) for r in rollouts)
    sampled_lp = [q for r in rollouts for q in r.logprobs]
    kl = [q - b for r in rollouts for q, b in zip(r.logprobs, r.base_logprobs or [], strict=False)]
    return {
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "frac_groups_dropped": 1.0 - len(kept) / len(groups),
        "kl_to_base": statistics.fmean(kl) if kl else 0.0,
        "entropy": -statistics.fmean(sampled_lp) if sampled_lp else 0.0,
        "completion_len_mean": tokens / len(rollouts),
        "frac_terminated": statistics.fmean(float(r.completion.terminated) for r in rollouts),
        "sample_tokens_per_s": tokens / max(sample_s, 1e-9),
    }


async def _eval_reward(
    client: TrainingClient,
    renderer: Renderer,
    problems: list[Problem],
    reward_fn: RewardFn,
    config: RLConfig,
) -> float:
    """Mean reward on held-out problems, sampled as training samples (same group size and
    temperature, fixed seeds), so it is comparable with `reward_mean` from step to step."""
    if not problems:
        return float("nan")
    policy = await client.save_weights_and_get_sampling_client()
    futures = []
    for i, problem in enumerate(problems):
        params = types.SamplingParams(
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            stop=renderer.get_stop_sequences(),
            seed=config.seed * 7919 + i,
        )
        prompt = renderer.build_generation_prompt(problem.messages)
        futures.append(policy.sample(prompt, config.group_size, params))
    rewards: list[float] = []
    for problem, future in zip(problems, futures, strict=True):
        completions = [_completion(list(seq.tokens), renderer) for seq in (await future).sequences]
        rewards += reward_fn(problem, completions)
    return statistics.fmean(rewards)


def _write_rollouts(
    path: Path,
    batch: list[Problem],
    groups: list[list[Rollout]],
    kept: list[list[Rollout]],
    renderer: Renderer,
) -> None:
    if not records_here():  # rank 0 of a data-parallel run writes them
        return
    kept_ids = {id(g) for g in kept}
    with open(path, "w", encoding="utf-8") as f:
        for problem, group in zip(batch, groups, strict=True):
            record = {
                "prompt": problem.messages[-1]["content"],
                "answer": problem.answer,
                "completions": [r.completion.text for r in group],
                "rewards": [r.reward for r in group],
                "advantages": [r.advantage for r in group],
                "dropped": id(group) not in kept_ids,
            }
            f.write(json.dumps(record) + "\n")
