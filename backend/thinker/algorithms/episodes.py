"""Episodes: a group of environment episodes per problem, sampled turn by turn, as token rows.

An episode's tokens are one row: its first prompt, then each policy message exactly as sampled
(trained: mask 1, with the sampler's logprobs) and each environment reply as the renderer
writes it, with the next assistant header (not trained: mask 0, logprob 0). Later turns are
prompted with that row itself, so the policy sees its own tokens, never a re-rendering of them,
and the trainer scores the row the sampler saw. A single-turn episode is its prompt and one
completion: the row single-turn RL has always trained on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tinker import types

from thinker.engine.protocols import APIFuture, SamplingClient, together
from thinker.envs.base import Env, EnvFactory, EnvStep
from thinker.envs.tools import ToolCallError, parse_tool_calls
from thinker.errors import ConfigError
from thinker.renderers import Renderer
from thinker.renderers.base import Message, TrainOnWhat
from thinker.rewards import Completion, Problem


@dataclass
class Rollout:
    """One episode of one problem (one sampled completion in single-turn RL), with what
    training needs from it."""

    prompt_tokens: list[int]  # the first prompt
    tokens: list[int]  # everything after it: sampled tokens and environment replies
    logprobs: list[float]  # the sampler's log q of each of `tokens` (0.0 where not sampled)
    prompt_logprobs: list[float] | None  # only for the dro loss (its penalty covers all tokens)
    completion: Completion  # the last policy message: what a reward function scores
    reward: float = 0.0
    advantage: float = 0.0
    base_logprobs: list[float] | None = None  # log p_base of each of `tokens`
    token_advantages: list[float] | None = None  # per token, once the KL penalty is folded in
    mask: list[float] | None = None  # 1: sampled by the policy (trained), 0: an observation
    turns: list[dict[str, Any]] = field(default_factory=list)  # the conversation, for the record
    truncated: bool = False  # ended by a token or turn budget, not by the policy or environment
    version: int = 0  # the policy version (optimizer steps taken) that sampled it
    metrics: dict[str, float] = field(default_factory=dict)  # the environment's, last step's

    @property
    def sampled(self) -> list[bool]:
        """Which of `tokens` the policy sampled."""
        return [True] * len(self.tokens) if self.mask is None else [m > 0 for m in self.mask]

    @property
    def sampled_count(self) -> int:
        return len(self.tokens) if self.mask is None else int(sum(self.mask))


@dataclass
class Budget:
    """What bounds an episode."""

    max_tokens: int  # per policy message
    max_turns: int = 1
    max_episode_tokens: int | None = None  # sampled tokens over the episode; None: no bound


@dataclass
class _Live:
    """An episode being played."""

    env: Env
    messages: list[Message]  # the conversation so far (as the environment and policy wrote it)
    prompt: list[int]
    row: list[int] = field(default_factory=list)  # tokens after the prompt
    logprobs: list[float] = field(default_factory=list)
    mask: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    sampled: int = 0
    done: bool = False
    truncated: bool = False
    last: Completion = field(default_factory=lambda: Completion(text="", terminated=False))
    metrics: dict[str, float] = field(default_factory=dict)
    prompt_logprobs: list[float] | None = None


async def sample_groups(  # noqa: PLR0913
    policy: SamplingClient,
    renderer: Renderer,
    factory: EnvFactory,
    problems: list[Problem],
    size: int,
    params: list[types.SamplingParams],
    budget: Budget,
    seeds: list[int],
    version: int = 0,
    prompt_logprobs: bool = False,
) -> list[list[Rollout]]:
    """`size` episodes of each of `problems`, problem i's environments seeded `seeds[i]` and
    sampled with `params[i]`. The episodes play turn by turn together: each turn's requests,
    every group's, are made in one burst (`together`), so the local engine decodes the same
    batches whatever the timing. A group's first turn is one request when all its episodes
    open alike (as single-turn RL samples a group); later turns, one request per episode.
    `params[i].seed` seeds the first turn; turn t of episode j adds t * 7919 + j."""
    groups = []
    for problem, seed in zip(problems, seeds, strict=True):
        live = []
        for env in factory.group(problem, size, seed):
            messages = env.initial_messages()
            live.append(_Live(env, messages, renderer.build_generation_prompt(messages).to_ints()))
        groups.append(live)
    with together(policy):
        first = [
            _first_requests(policy, live, p, budget, prompt_logprobs)
            for live, p in zip(groups, params, strict=True)
        ]
    for live, requests in zip(groups, first, strict=True):
        responses = [await r for r in requests]
        if len(responses) == 1:  # one request for the whole group
            sequences = list(responses[0].sequences)
            if prompt_logprobs:
                got = responses[0].prompt_logprobs
                assert got is not None, "asked for with include_prompt_logprobs"
                for e in live:
                    e.prompt_logprobs = [0.0 if v is None else v for v in got]
        else:
            sequences = [r.sequences[0] for r in responses]
        for e, seq in zip(live, sequences, strict=True):
            _take(e, seq, renderer, budget, 0)
    for turn in range(1, budget.max_turns):
        playing = [
            (e, p, j)
            for live, p in zip(groups, params, strict=True)
            for j, e in enumerate(live)
            if not e.done
        ]
        if not playing:
            break
        with together(policy):
            requests = [_request(policy, e, p, budget, turn, j) for e, p, j in playing]
        for (e, _, _), response in zip(playing, await asyncio.gather(*requests), strict=True):
            _take(e, response.sequences[0], renderer, budget, turn)
    rollouts = []
    for problem, live in zip(problems, groups, strict=True):
        finals = factory.final_rewards(problem, [e.last for e in live])
        rollouts.append([_rollout(e, f, version) for e, f in zip(live, finals, strict=True)])
    return rollouts


def _first_requests(
    policy: SamplingClient,
    live: list[_Live],
    params: types.SamplingParams,
    budget: Budget,
    prompt_logprobs: bool,
) -> list[APIFuture[types.SampleResponse]]:
    """A group's first turn: one request for all its episodes when they open alike."""
    if len({tuple(e.prompt) for e in live}) == 1:
        prompt = types.ModelInput.from_ints(live[0].prompt)
        return [policy.sample(prompt, len(live), params, include_prompt_logprobs=prompt_logprobs)]
    if prompt_logprobs:
        raise ConfigError("the dro loss needs every episode of a group to open alike")
    return [_request(policy, e, params, budget, 0, j) for j, e in enumerate(live)]


def _request(  # noqa: PLR0913
    policy: SamplingClient,
    e: _Live,
    params: types.SamplingParams,
    budget: Budget,
    turn: int,
    j: int,
) -> APIFuture[types.SampleResponse]:
    left = budget.max_tokens
    if budget.max_episode_tokens is not None:
        left = min(left, budget.max_episode_tokens - e.sampled)
    seed = None if params.seed is None else params.seed + turn * 7919 + j
    turn_params = params.model_copy(update={"max_tokens": left, "seed": seed})
    return policy.sample(types.ModelInput.from_ints(e.prompt + e.row), 1, turn_params)


def _take(
    e: _Live, seq: types.SampledSequence, renderer: Renderer, budget: Budget, turn: int
) -> None:
    """Add one sampled policy message to episode `e`, and the environment's reply."""
    tokens = list(seq.tokens)
    assert seq.logprobs is not None, "every backend gives the sampled tokens' logprobs"
    e.row += tokens
    e.logprobs += [float(v) for v in seq.logprobs]
    e.mask += [1.0] * len(tokens)
    e.sampled += len(tokens)
    message, reason = renderer.parse_response(tokens)
    cut = reason == "length"
    e.last = Completion(text=message["content"], terminated=not cut)
    e.turns.append(_assistant_turn(message, renderer))
    step = e.env.step(message, cut)
    e.reward += float(step.reward)
    e.metrics = dict(step.metrics)
    out_of_turns = turn + 1 >= budget.max_turns
    out_of_tokens = budget.max_episode_tokens is not None and e.sampled >= budget.max_episode_tokens
    if step.error is not None and e.turns:
        e.turns[-1]["error"] = step.error
    e.turns += [{"role": m["role"], "content": m["content"]} for m in step.messages]
    if step.done or cut or out_of_turns or out_of_tokens:
        e.done = True
        e.truncated = cut or (not step.done and (out_of_turns or out_of_tokens))
        return
    observation = reply_tokens(renderer, message, step)
    e.messages += [message, *step.messages]
    e.row += observation
    e.logprobs += [0.0] * len(observation)
    e.mask += [0.0] * len(observation)


def reply_tokens(renderer: Renderer, message: Message, step: EnvStep) -> list[int]:
    """The tokens that follow a finished policy message: the environment's messages and the
    next assistant header, as the renderer writes them after an assistant turn (worked out on a
    two-message conversation: what a generation prompt adds to a supervised example that ends
    with the assistant)."""
    opened = [Message(role="user", content="x"), Message(role="assistant", content="y")]
    ended, _ = renderer.build_supervised_example(opened, TrainOnWhat.LAST_ASSISTANT_MESSAGE)
    following = renderer.build_generation_prompt([*opened, *step.messages]).to_ints()
    if following[: len(ended)] != ended:
        raise ConfigError(
            f"renderer {renderer.name!r} does not write a conversation turn by turn (a reply "
            "after an assistant message changes the tokens before it), so multi-turn episodes "
            "cannot keep the sampled tokens; use another renderer"
        )
    return following[len(ended) :]


def _assistant_turn(message: Message, renderer: Renderer) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    try:
        calls = parse_tool_calls(message["content"], renderer.name)
    except ToolCallError:
        calls = []  # the environment reports it (EnvStep.error)
    if calls:
        turn["tool_call"] = {"name": calls[0].name, "arguments": calls[0].arguments}
    return turn


def _rollout(e: _Live, final: float, version: int) -> Rollout:
    single = all(m == 1.0 for m in e.mask)
    return Rollout(
        prompt_tokens=e.prompt,
        tokens=e.row,
        logprobs=e.logprobs,
        prompt_logprobs=e.prompt_logprobs,
        completion=e.last,
        reward=e.reward + float(final),
        mask=None if single else e.mask,
        turns=e.turns,
        truncated=e.truncated,
        version=version,
        metrics=e.metrics,
    )
