"""Multi-turn environments on thinker/tiny: episode rows line up with what the model scores.

The policy is a short SL warm start on games of guess-the-number, half played well and half at
random, so that it follows the format (guesses that end their turn) and RL has a better way of
playing to reinforce.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from tinker import types

import thinker
from thinker.algorithms.episodes import Budget, reply_tokens, sample_groups
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.envs import EnvConfig, EnvStep, build_env_factory
from thinker.renderers import TrainOnWhat, renderer_for
from thinker.renderers.base import Message
from thinker.rewards import ExactMatchReward, Problem
from thinker.runs import RunLogger

LOW, HIGH = 1, 4
TURNS = 3
OPENING = f"I am thinking of a number from {LOW} to {HIGH}. Guess it."


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _games(n: int, seed: int) -> list[dict]:
    """Conversations of up to TURNS guesses, answered as the game answers them: half played
    well (each guess one the hints so far allow), half at random (hints ignored, guesses
    repeated), so the warm policy plays well about half the time."""
    rng, rows = random.Random(seed), []
    for k in range(n):
        secret, messages = rng.randint(LOW, HIGH), [{"role": "user", "content": OPENING}]
        allowed = list(range(LOW, HIGH + 1))
        for _turn in range(TURNS):
            guess = rng.choice(allowed) if k % 2 == 0 else rng.randint(LOW, HIGH)
            messages.append({"role": "assistant", "content": str(guess)})
            if guess == secret:
                break
            hint = "higher" if guess < secret else "lower"
            allowed = [a for a in allowed if (a > guess if hint == "higher" else a < guess)]
            messages.append({"role": "user", "content": hint})
        if messages[-1]["role"] == "user":
            messages.pop()
        rows.append({"messages": messages})
    return rows


def _warm_start(root: Path, name: str, rows: list[dict], steps: int) -> str:
    config = SLConfig(
        dataset=_write(root / f"{name}.jsonl", rows),
        train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES,
        eval_fraction=0.0,
        learning_rate=3e-3,
        batch_size=32,
        max_steps=steps,
        save_every=0,
        eval_every=0,
        log_path=root / name,
    )
    service = thinker.ServiceClient(storage_dir=root)
    result = asyncio.run(sl_main(config, service, RunLogger(root / name)))
    assert result.state_path is not None
    return result.state_path


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("game")
    return root, _warm_start(root, "warm", _games(400, seed=0), steps=150)


def test_episode_rows_line_up_with_what_the_model_scores(game: tuple[Path, str]) -> None:
    """Guess-the-number episodes of up to 3 turns: each row is the prompt, then sampled runs
    (mask 1) and the renderer's replies (mask 0) exactly; the sampler's logprob of every
    sampled token is the model's own log p at its place in the row, which the trainer scores."""
    root, state = game
    service = thinker.ServiceClient(storage_dir=root)
    client = service.create_lora_training_client("thinker/tiny", rank=32, seed=0).result()
    client.load_state(state).result()
    policy = client.save_weights_and_get_sampling_client().result()
    renderer = renderer_for(None, "thinker/tiny", client.get_tokenizer())
    env = EnvConfig(type="guess_number", max_turns=3, options={"low": LOW, "high": HIGH})
    factory = build_env_factory(env, ExactMatchReward(), renderer.name)
    params = types.SamplingParams(max_tokens=12, stop=renderer.get_stop_sequences(), seed=5)
    problem = Problem(messages=[Message(role="user", content=OPENING)], answer="3")
    (rollouts,) = asyncio.run(
        sample_groups(policy, renderer, factory, [problem], 8, [params], Budget(12, 3), [1])
    )
    assert any(r.mask is not None for r in rollouts), "some episode went past its first turn"
    for r in rollouts:
        assert len(r.tokens) == len(r.logprobs) == len(r.sampled)
        row = r.prompt_tokens + r.tokens
        scored = policy.compute_logprobs(types.ModelInput.from_ints(row)).result()
        for k, (q, sampled) in enumerate(zip(r.logprobs, r.sampled, strict=True)):
            if sampled:
                assert q == pytest.approx(scored[len(r.prompt_tokens) + k], abs=1e-4), k
            else:
                assert q == 0.0
        replies = [t for t in r.turns if t["role"] != "assistant"]
        for tokens, reply in zip(_unsampled_runs(r.tokens, r.sampled), replies, strict=False):
            step = EnvStep(messages=[Message(role=reply["role"], content=reply["content"])])
            assert tokens == reply_tokens(renderer, Message(role="assistant", content=""), step)
        policy_turns = sum(t["role"] == "assistant" for t in r.turns)
        assert policy_turns == 1 + len(_unsampled_runs(r.tokens, r.sampled))
        won = r.metrics.get("won") == 1.0
        assert r.reward == pytest.approx(1.0 - 0.1 * (policy_turns - 1) if won else 0.0)


def _unsampled_runs(tokens: list[int], sampled: list[bool]) -> list[list[int]]:
    runs: list[list[int]] = []
    for k, (t, s) in enumerate(zip(tokens, sampled, strict=True)):
        if not s:
            if k == 0 or sampled[k - 1]:
                runs.append([])
            runs[-1].append(t)
    return runs
