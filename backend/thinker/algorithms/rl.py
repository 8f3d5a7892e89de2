"""RL: policy-gradient training on groups of sampled completions scored by a reward.

What it computes. Each step takes `groups_per_batch` problems and samples `group_size`
completions of each from a frozen snapshot of the current policy (with `max_steps_off_policy`
k > 0, of the policy k steps before, sampled while those steps train: rl_pipeline.py); an
environment (thinker.envs) makes each completion an episode of one or more turns. Each completion's
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

import dataclasses
import json
import os
import random
import statistics
import time
from functools import partial
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
from thinker.algorithms.episodes import Budget, Rollout, sample_groups
from thinker.algorithms.rl_config import AdvantageNorm, KLEstimator, RLConfig
from thinker.algorithms.rl_pipeline import (
    Lookahead,
    Sampled,
    load_buffer,
    save_buffer,
    stale_groups,
)
from thinker.algorithms.rl_variants import (
    KL_ESTIMATORS,
    advantages_G,
    loss_units,
    refill,
    shape_rewards,
    variant_metrics,
    weigh_tokens,
)
from thinker.data import split_train_eval
from thinker.data.problems import load_problems
from thinker.engine import ServiceClient
from thinker.engine.protocols import SamplingClient, TrainingClient, together
from thinker.envs import EnvFactory, build_env_factory
from thinker.errors import ConfigError
from thinker.files import records_here
from thinker.renderers import Renderer, renderer_for
from thinker.renderers.turns import Tokenizer
from thinker.rewards import Problem, RewardFn
from thinker.rewards.registry import build_reward
from thinker.runs import MetricsLogger

__all__ = ["RLConfig", "group_advantages", "main"]


async def main(
    config: RLConfig,
    service: ServiceClient | None = None,
    logger: MetricsLogger | None = None,
    reward_fn: RewardFn | None = None,
) -> RunResult:
    k = config.max_steps_off_policy
    if k and os.environ.get("WORLD_SIZE", "1") != "1":  # torchrun's ranks of a gpus: N job
        raise ConfigError(
            "max_steps_off_policy: asynchronous RL runs as one process: the ranks of a "
            "data-parallel run must call the engine in one order, which overlapping sampling "
            "with training does not keep; use 0"
        )
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
    base_dir = Path(config.dataset).parent
    factory = build_env_factory(config.env, reward_fn, renderer.name, base_dir)
    base = await service.create_sampling_client(base_model=config.base_model)
    run.rollouts.mkdir(exist_ok=True)

    # Loop: sample groups from a snapshot of the policy (k steps ahead: rl_pipeline), score,
    # train, log.
    result, metrics = start.result, {}
    if start.step == 0:  # the starting point, for comparison with every later evaluation
        eval_reward = await _eval_reward(client, renderer, held_out, factory, config)
        logger.log_metrics({"eval_reward_mean": eval_reward}, step=0)
    logger.log_event("plan", {"total_steps": config.max_steps, "start_step": start.step})
    lookahead, warned = Lookahead(k, config.max_steps - 1), False
    lookahead.load(load_buffer(run.sample_buffer(start.step), start.step) if start.step else [])
    try:
        for step in range(start.step, config.max_steps):
            started = time.monotonic()
            policy = await client.save_weights_and_get_sampling_client()
            lookahead.fill(step, partial(_collect, policy, step, train, renderer, factory, config))
            sampled = await lookahead.take(step)
            waited = time.monotonic() - started
            stale = stale_groups(sampled, step, k)
            if stale:  # kept by a checkpoint of a run with a larger k: sampled again
                sampled = await _resample(sampled, stale, policy, step, renderer, factory, config)
            batch, groups = sampled.batch, sampled.groups
            kept = [g for g in groups if not (config.drop_constant_groups and _constant(g))]
            group_advantages(kept, config.advantage_norm)
            await _base_logprobs(base, [r for g in groups for r in g])
            for group in kept:
                _apply_kl_penalty(group, config.kl_coef, config.kl_estimator)
            trained = [r for g in kept for r in g]
            weigh_tokens(trained, config)  # the loss aggregation's weights; overlong filter
            datums = [_datum(r, config.loss_fn) for r in trained]
            train_metrics, learner = await _train(client, datums, config, step, trained)
            _write_rollouts(run.rollout_file(step + 1), batch, groups, kept, learner, tokenizer)
            metrics = {
                **_rollout_metrics(groups, kept, sampled.seconds),
                **variant_metrics(groups, config, sampled.rounds),
                **train_metrics,
                **(_staleness_metrics(groups, step, len(stale), waited) if k else {}),
                "step_time_s": time.monotonic() - started,
            }
            done = step + 1
            if is_due(done, config.eval_every, config.max_steps):
                metrics["eval_reward_mean"] = await _eval_reward(
                    client, renderer, held_out, factory, config
                )
            logger.log_metrics(metrics, step=done)
            if not warned and (warning := gap_warning(metrics, config)):
                print(f"[thinker] warning: step {done}: {warning}", flush=True)
                warned = True  # once a run: the dashboard shows it on every step it holds
            stop_if_diverged(metrics, done, "loss", config)
            if is_due(done, config.save_every, config.max_steps):
                if k:  # the batches sampled ahead, from weights no checkpoint holds
                    save_buffer(run.sample_buffer(done), done, k, await lookahead.ahead())
                result = await save_checkpoint(client, run, done, logger)
    finally:
        await lookahead.close()
    result.steps = config.max_steps
    result.final_metrics = metrics
    return result


async def _collect(  # noqa: PLR0913
    policy: SamplingClient,
    version: int,
    train: list[Problem],
    renderer: Renderer,
    factory: EnvFactory,
    config: RLConfig,
    step: int,
) -> Sampled:
    """The batch of `step`, sampled from `policy` (the weights after `version` steps) and
    scored: rewards shaped, and refilled under dynamic sampling."""
    batch = _problems_of_step(train, step, config.groups_per_batch, config.seed)
    started = time.monotonic()
    seeds = _seeds(config, step, len(batch))
    dro = config.loss_fn == "dro"
    groups = await _play(policy, renderer, factory, batch, config, seeds, version, dro)
    sample_s = time.monotonic() - started
    shape_rewards(groups, config)

    async def play(
        problems: list[Problem], config: RLConfig, seeds: list[int], _: int, dro: bool
    ) -> list[list[Rollout]]:
        return await _play(policy, renderer, factory, problems, config, seeds, version, dro)

    more = await refill(train, batch, groups, config, step, play)  # dynamic sampling
    return Sampled(step, more.batch, more.groups, more.rounds, sample_s + more.seconds)


async def _resample(  # noqa: PLR0913
    sampled: Sampled,
    stale: list[int],
    policy: SamplingClient,
    step: int,
    renderer: Renderer,
    factory: EnvFactory,
    config: RLConfig,
) -> Sampled:
    """`sampled` with its `stale` groups sampled again from `policy` (version `step`), with
    the seeds they had."""
    problems = [sampled.batch[i] for i in stale]
    every = _seeds(config, step, len(sampled.batch))
    seeds = [every[i] for i in stale]
    dro = config.loss_fn == "dro"
    fresh = await _play(policy, renderer, factory, problems, config, seeds, step, dro)
    shape_rewards(fresh, config)
    groups = list(sampled.groups)
    for i, group in zip(stale, fresh, strict=True):
        groups[i] = group
    return dataclasses.replace(sampled, groups=groups)


def _seeds(config: RLConfig, step: int, n: int) -> list[int]:
    """The sampling seed of each of a step's n groups."""
    return [config.seed * 1_000_003 + step * 1009 + i for i in range(n)]


def _staleness_metrics(
    groups: list[list[Rollout]], step: int, stale: int, waited: float
) -> dict[str, float]:
    """How old the step's samples were (in steps), how many groups were too old (dropped and
    sampled again), and how long training waited for them."""
    ages = [step - g[0].version for g in groups if g]
    return {
        "staleness_mean": statistics.fmean(ages) if ages else 0.0,
        "staleness_max": float(max(ages, default=0)),
        "frac_groups_stale": stale / max(len(groups), 1),
        "batch_wait_s": waited,
    }


# The sampler-learner gap's healthy bound (TRAINING_GUIDE.md, Metrics): synchronous with one
# substep the two score the same weights; sampling k steps ahead, the learner has moved on.
GAP_ON_POLICY, GAP_OFF_POLICY = 0.01, 0.3


def gap_warning(metrics: dict[str, float], config: RLConfig) -> str | None:
    """Why a step's `kl_sample_train` is out of its healthy range, or None."""
    gap = abs(metrics.get("kl_sample_train", 0.0))
    if config.max_steps_off_policy > 0 and gap > GAP_OFF_POLICY:
        return (
            f"kl_sample_train {gap:.3g} > {GAP_OFF_POLICY}: the samples are too stale for this "
            "learning rate; lower max_steps_off_policy or learning_rate"
        )
    if config.max_steps_off_policy == 0 and config.num_substeps == 1 and gap > GAP_ON_POLICY:
        return (
            f"kl_sample_train {gap:.3g} > {GAP_ON_POLICY}: the sampler and the learner disagree "
            "on the same weights (a numerics mismatch or a bug); importance ratios correct "
            "for it, but report it with the run directory"
        )
    return None


def group_advantages(groups: list[list[Rollout]], norm: AdvantageNorm = "none") -> None:
    """Advantage = reward - the group's mean reward (as the cookbook); with `norm` "std",
    divided by the group's std + 1e-6 (GRPO's)."""
    for group in groups:
        for r, advantage in zip(group, advantages_G([r.reward for r in group], norm), strict=True):
            r.advantage = advantage


def _problems_of_step(problems: list[Problem], step: int, n: int, seed: int) -> list[Problem]:
    """The problems of `step`: a fixed shuffle per pass over the data (resumes see the same)."""
    per_pass = max(1, len(problems) // n)
    epoch, index = divmod(step, per_pass)
    order = list(range(len(problems)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    chosen = order[index * n : (index + 1) * n] or order[:n]
    return [problems[i] for i in chosen]


async def _play(  # noqa: PLR0913
    policy: SamplingClient,
    renderer: Renderer,
    factory: EnvFactory,
    problems: list[Problem],
    config: RLConfig,
    seeds: list[int],
    version: int = 0,
    prompt_logprobs: bool = False,
) -> list[list[Rollout]]:
    """A group of `config.group_size` episodes of each problem, problem i seeded `seeds[i]`,
    every group's requests of a turn made together (`prompt_logprobs`: for the dro loss)."""
    params = [_params(config, renderer, seed) for seed in seeds]
    return await sample_groups(
        policy, renderer, factory, problems, config.group_size, params, _budget(config),
        seeds, version, prompt_logprobs,
    )  # fmt: skip


def _params(config: RLConfig, renderer: Renderer, seed: int) -> types.SamplingParams:
    return types.SamplingParams(
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        stop=renderer.get_stop_sequences(),
        seed=seed,
    )


def _budget(config: RLConfig) -> Budget:
    return Budget(config.max_tokens, config.env.max_turns, config.env.max_episode_tokens)


def _constant(group: list[Rollout]) -> bool:
    return len({r.reward for r in group}) == 1


async def _base_logprobs(base: SamplingClient, rollouts: list[Rollout]) -> None:
    """log p_base of every sampled token (for the KL estimate and the optional penalty)."""
    with together(base):  # scored in the same batches whatever the timing
        futures = [
            base.compute_logprobs(types.ModelInput.from_ints(r.prompt_tokens + r.tokens))
            for r in rollouts
        ]
    for r, future in zip(rollouts, futures, strict=True):
        logprobs = (await future)[len(r.prompt_tokens) :]
        r.base_logprobs = [float(v) for v in logprobs if v is not None]
        assert len(r.base_logprobs) == len(logprobs), "no logprob is None past position 0"


def _apply_kl_penalty(group: list[Rollout], kl_coef: float, estimator: KLEstimator = "k1") -> None:
    """Fold -kl_coef * the `estimator`'s per-token KL estimate (k1: log q - log p_base) into
    each token's advantage (kept per token)."""
    if kl_coef <= 0:
        return
    kl = KL_ESTIMATORS[estimator]
    for r in group:
        assert r.base_logprobs is not None
        r.token_advantages = [
            r.advantage - kl_coef * kl(q, b)
            for q, b in zip(r.logprobs, r.base_logprobs, strict=True)
        ]


def _datum(r: Rollout, loss_fn: str) -> types.Datum:
    """Prompt + completion; targets shifted by one; advantages on completion tokens only."""
    full = r.prompt_tokens + r.tokens
    n_prompt = len(r.prompt_tokens) - 1  # target positions that predict prompt tokens
    token_adv = r.token_advantages or [r.advantage] * len(r.tokens)
    if r.mask is not None:  # environment replies are not the policy's: no gradient
        token_adv = [a * m for a, m in zip(token_adv, r.mask, strict=True)]
    prompt_lp = r.prompt_logprobs[1:] if r.prompt_logprobs is not None else [0.0] * n_prompt
    # As the SDK would convert these lists itself (int64 targets, float32 others), but typed.
    inputs = {
        "target_tokens": types.TensorData.from_numpy(np.asarray(full[1:], dtype=np.int64)),
        "logprobs": _float32(prompt_lp + r.logprobs),
        "advantages": _float32([0.0] * n_prompt + list(token_adv)),
    }
    if loss_fn in SEQUENCE_LOSSES:  # the completion is the sequence its ratio averages over
        sampled = r.mask if r.mask is not None else [1.0] * len(r.tokens)
        inputs["sequence_ratio_mask"] = _float32([0.0] * n_prompt + list(sampled))
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
    rollouts: list[Rollout],
) -> tuple[dict[str, float], list[list[float]]]:
    """`num_substeps` optimizer steps over the batch (none if every group was dropped), datum
    i being `rollouts[i]`'s; the metrics, and the learner's log p of each rollout's tokens
    (from the substep that trained it, before its optimizer step)."""
    if not datums:
        return {"num_datums": 0.0}, []
    chunk = -(-len(datums) // config.num_substeps)
    submitted, parts = [], []
    for k in range(config.num_substeps):
        part = datums[k * chunk : (k + 1) * chunk]
        if not part:
            break
        parts.append(part)
        units = loss_units(rollouts[k * chunk : k * chunk + len(part)], config)
        adam = adam_params(config, step, config.max_steps, units)
        fb = client.forward_backward(part, config.loss_fn, config.loss_fn_config or None)
        submitted.append((fb, client.optim_step(adam), adam))
    losses, norms, clipped, gaps = [], [], [], []
    learner: list[list[float]] = []
    optimizer: dict[str, float] = {}
    for k, ((fb, opt, adam), part) in enumerate(zip(submitted, parts, strict=True)):
        out = await fb
        losses.append(out.metrics["loss:sum"])
        part_gaps, part_learner = _sampler_learner_gaps(
            rollouts[k * chunk : k * chunk + len(part)], out
        )
        gaps += part_gaps
        learner += part_learner
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
    return metrics, learner


def _sampler_learner_gaps(
    rollouts: list[Rollout], out: types.ForwardBackwardOutput
) -> tuple[list[float], list[list[float]]]:
    """log q - log p of every token the policy sampled (whatever its advantage; not the
    prompt's, not an environment's reply), and the learner's log p of each rollout's tokens."""
    gaps, learner = [], []
    for r, result in zip(rollouts, out.loss_fn_outputs, strict=True):
        p = result["logprobs"].to_torch()[len(r.prompt_tokens) - 1 :].tolist()
        learner.append(p)
        gaps += [q - lp for q, lp, s in zip(r.logprobs, p, r.sampled, strict=True) if s]
    return gaps, learner


def _rollout_metrics(
    groups: list[list[Rollout]], kept: list[list[Rollout]], sample_s: float
) -> dict[str, float]:
    """Over every sampled token of every episode (environment replies are not sampled)."""
    rollouts = [r for g in groups for r in g]
    rewards = [r.reward for r in rollouts]
    tokens = sum(r.sampled_count for r in rollouts)
    sampled_lp = [q for r in rollouts for q, s in zip(r.logprobs, r.sampled, strict=True) if s]
    kl = [
        q - b
        for r in rollouts
        for q, b, s in zip(r.logprobs, r.base_logprobs or [], r.sampled, strict=False)
        if s
    ]
    metrics = {
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "frac_groups_dropped": 1.0 - len(kept) / len(groups),
        "kl_to_base": statistics.fmean(kl) if kl else 0.0,
        "entropy": -statistics.fmean(sampled_lp) if sampled_lp else 0.0,
        "completion_len_mean": tokens / len(rollouts),
        "frac_terminated": statistics.fmean(float(r.completion.terminated) for r in rollouts),
        "sample_tokens_per_s": tokens / max(sample_s, 1e-9),
    }
    if any(r.mask is not None or r.metrics for r in rollouts):  # an environment's episodes
        turns = [sum(t["role"] == "assistant" for t in r.turns) for r in rollouts]
        metrics["turns_mean"] = statistics.fmean(turns)
        metrics["frac_truncated"] = statistics.fmean(float(r.truncated) for r in rollouts)
        for key in sorted({k for r in rollouts for k in r.metrics}):
            values = [r.metrics[key] for r in rollouts if key in r.metrics]
            metrics[f"env/{key}"] = statistics.fmean(values)
    return metrics


async def _eval_reward(
    client: TrainingClient,
    renderer: Renderer,
    problems: list[Problem],
    factory: EnvFactory,
    config: RLConfig,
) -> float:
    """Mean episode reward on held-out problems, sampled as training samples (same group size,
    temperature and budgets, fixed seeds), so it is comparable with `reward_mean` from step
    to step."""
    if not problems:
        return float("nan")
    policy = await client.save_weights_and_get_sampling_client()
    seeds = [config.seed * 7919 + i for i in range(len(problems))]
    groups = await _play(policy, renderer, factory, problems, config, seeds)
    return statistics.fmean(r.reward for g in groups for r in g)


def _write_rollouts(  # noqa: PLR0913
    path: Path,
    batch: list[Problem],
    groups: list[list[Rollout]],
    kept: list[list[Rollout]],
    learner: list[list[float]],
    tokenizer: Tokenizer,
) -> None:
    """One line a group: its prompt, completions, rewards and advantages, and each episode's
    turns and sampled tokens with the sampler's and the learner's logprobs (the rollout
    inspector's data). `learner` follows the kept groups' rollouts in order."""
    if not records_here():  # rank 0 of a data-parallel run writes them
        return
    kept_ids = {id(g) for g in kept}
    trained = iter(learner)
    with open(path, "w", encoding="utf-8") as f:
        for problem, group in zip(batch, groups, strict=True):
            was_kept = id(group) in kept_ids
            record = {
                "prompt": problem.messages[-1]["content"],
                "answer": problem.answer,
                "completions": [r.completion.text for r in group],
                "rewards": [r.reward for r in group],
                "advantages": [r.advantage for r in group],
                "dropped": not was_kept,
                "episodes": [
                    _episode_record(r, next(trained) if was_kept and learner else None, tokenizer)
                    for r in group
                ],
            }
            f.write(json.dumps(record) + "\n")


def _episode_record(
    r: Rollout, learner: list[float] | None, tokenizer: Tokenizer
) -> dict[str, object]:
    turns = r.turns or [{"role": "assistant", "content": r.completion.text}]
    turn_of_token, turn, previous = [], -1, False
    assistant_turns = [i for i, t in enumerate(turns) if t["role"] == "assistant"]
    for sampled in r.sampled:  # each run of sampled tokens is the next assistant turn
        if sampled and not previous:
            turn += 1
        turn_of_token.append(assistant_turns[min(turn, len(assistant_turns) - 1)])
        previous = sampled
    tokens = [
        {
            "text": tokenizer.decode([t]),
            "logprob": q,
            "trainer_logprob": None if learner is None else learner[k],
            "turn": turn_of_token[k],
        }
        for k, (t, q, s) in enumerate(zip(r.tokens, r.logprobs, r.sampled, strict=True))
        if s
    ]
    return {
        "turns": turns,
        "tokens": tokens,
        "truncated": r.truncated,
        "version": r.version,
        "reward": r.reward,
        "advantage": r.advantage,
    }
