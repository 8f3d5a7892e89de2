"""Multi-turn environments on thinker/tiny: episode rows line up with what the model scores,
RL raises the win rate of a two-turn game, and RL raises the use of a tool a task needs.

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
from tests.support import forecast_env, rl_example
from tests.support.forecast_env import WEATHER
from tinker import types

import thinker
from thinker.algorithms.episodes import Budget, reply_tokens, sample_groups
from thinker.algorithms.loop_config import LrSchedule
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.envs import EnvConfig, EnvStep, build_env_factory
from thinker.renderers import TrainOnWhat, renderer_for
from thinker.renderers.base import Message
from thinker.rewards import ExactMatchReward, Problem
from thinker.runs import RunDir, RunLogger, read_metrics

LOW, HIGH = 1, 4
TURNS = 3
ASK = "What will the weather be tomorrow?"
CALL = '<tool_call>{"name": "forecast", "arguments": {}}</tool_call>'


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _games(
    n: int, seed: int, high: int = HIGH, turns: int = TURNS, well: float = 0.5
) -> list[dict]:
    """Conversations of up to `turns` guesses from LOW to `high`, answered as the game answers
    them: a share `well` played well (each guess one the hints so far allow; 0.5: every other
    game), the rest at random (hints ignored, guesses repeated)."""
    rng, rows = random.Random(seed), []
    for k in range(n):
        secret, messages = rng.randint(LOW, high), [{"role": "user", "content": _opening(high)}]
        allowed = list(range(LOW, high + 1))
        good = k % 2 == 0 if well == 0.5 else rng.random() < well
        for _turn in range(turns):
            guess = rng.choice(allowed) if good else rng.randint(LOW, high)
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


def _opening(high: int) -> str:
    return f"I am thinking of a number from {LOW} to {high}. Guess it."


def _warm_start(  # noqa: PLR0913
    root: Path,
    name: str,
    rows: list[dict],
    steps: int,
    schedule: LrSchedule = "linear",
    batch_size: int = 32,
) -> str:
    config = SLConfig(
        dataset=_write(root / f"{name}.jsonl", rows),
        train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES,
        eval_fraction=0.0,
        learning_rate=3e-3,
        lr_schedule=schedule,
        batch_size=batch_size,
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
    problem = Problem(messages=[Message(role="user", content=_opening(HIGH))], answer="3")
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


def _series(run: Path, *keys: str) -> list[list[float]]:
    """Each metric of `keys` over the run's steps, in the order logged."""
    metrics = read_metrics(RunDir(run).metrics)
    return [[m[key] for m in metrics if key in m] for key in keys]


def _unsampled_runs(tokens: list[int], sampled: list[bool]) -> list[list[int]]:
    runs: list[list[int]] = []
    for k, (t, s) in enumerate(zip(tokens, sampled, strict=True)):
        if not s:
            if k == 0 or sampled[k - 1]:
                runs.append([])
            runs[-1].append(t)
    return runs


def test_rl_raises_the_win_rate_of_a_two_turn_game(tmp_path: Path) -> None:
    """Guess a number from 1 to 2 in two turns: a second-turn win takes using the game's reply
    (after "higher" say 2, after "lower" 1). The warm start, 180 SL steps at a constant rate on
    games 15% played well and the rest at random, follows hints only in part (thinker/tiny
    learns to look back at a hint only after ~150 steps); 20 RL steps of 16 games x 8 make it
    follow them. Observed: training win rate 0.75 at step 1, 0.848 over the last five steps;
    held-out reward on 128 games 0.749, then 0.758 / 0.818 / 0.800 / 0.843 (steps 5-20).
    About 75 s."""
    rows = _games(400, 0, high=2, turns=2, well=0.15)
    state = _warm_start(tmp_path, "warm", rows, 180, "constant")
    rng = random.Random(5)

    def games(n: int) -> Path:
        problems = [{"prompt": _opening(2), "secret": rng.randint(LOW, 2)} for _ in range(n)]
        return _write(tmp_path / f"games{n}.jsonl", problems)

    config = rl_example.rl_config(  # the RL example's groups, other data and settings
        tmp_path,
        state,
        "rl",
        dataset=games(64),
        eval_dataset=games(128),
        env=EnvConfig(type="guess_number", max_turns=2, options={"low": LOW, "high": 2}),
        max_tokens=12,
        learning_rate=2e-3,
        max_steps=20,
    )
    rl_example.run_rl(tmp_path, config)
    won, held_out = _series(config.log_path, "env/won", "eval_reward_mean")
    assert len(won) == 20 and len(held_out) == 5
    assert sum(won[-5:]) / 5 > won[0] + 0.04, won
    assert sum(held_out[1:]) / 4 > held_out[0] + 0.02, held_out


def test_rl_raises_the_use_of_a_tool_the_task_needs(tmp_path: Path) -> None:
    """Tomorrow's forecast, which only a tool knows (tests/support/forecast_env.py): one of four
    words at random per problem, so without a call a policy is right a quarter of the time.
    The warm start, 250 SL steps on transcripts half of which call the tool (each call also a
    row of its own, so that the policy learns to end it) and read its answer right 70% of the
    time, the rest answering at random, calls it in about two episodes of three; RL makes it
    call more and read better. Observed (10 RL steps of 8 x 8 at lr 5e-4): tool calls 0.656
    at step 1, 0.885 over the last three steps; training reward 0.463 -> 0.665; held-out
    reward on 64 problems 0.526, then 0.601 / 0.743 (steps 5, 10)."""
    rng = random.Random(0)
    rows = []
    for _ in range(400):
        forecast, messages = rng.choice(WEATHER), [{"role": "user", "content": ASK}]
        if rng.random() < 0.5:
            read = forecast if rng.random() < 0.7 else rng.choice(WEATHER)
            messages.append({"role": "assistant", "content": CALL})
            # The call as a row's last message too: only there does role_colon train the
            # "User:" that completes its stop sequence (TRAINING_GUIDE, tools).
            rows.append({"messages": list(messages)})
            messages += [
                {"role": "user", "content": forecast},  # the base-model format's tool turn
                {"role": "assistant", "content": read},
            ]
        else:
            messages.append({"role": "assistant", "content": rng.choice(WEATHER)})
        rows.append({"messages": messages})
    state = _warm_start(tmp_path, "warm", rows, 250, "constant", batch_size=16)

    def problems(n: int) -> Path:
        rows = [{"prompt": ASK, "answer": rng.choice(WEATHER)} for _ in range(n)]
        return _write(tmp_path / f"forecasts{n}.jsonl", rows)

    config = rl_example.rl_config(
        tmp_path,
        state,
        "rl",
        dataset=problems(64),
        eval_dataset=problems(64),
        env=EnvConfig(
            type="custom", class_path=f"{forecast_env.__name__}:ForecastFactory", max_turns=2
        ),
        groups_per_batch=8,
        max_tokens=80,  # the call is 61 tokens, then the stop sequence
        learning_rate=5e-4,
        max_steps=10,
    )
    rl_example.run_rl(tmp_path, config)
    calls, reward, held_out = _series(
        config.log_path, "env/tool_calls", "reward_mean", "eval_reward_mean"
    )
    assert len(calls) == 10 and len(held_out) == 3
    assert sum(calls[-3:]) / 3 > calls[0] + 0.05, calls
    assert sum(reward[-3:]) / 3 > reward[0] + 0.08, reward
    assert sum(held_out[1:]) / 2 > held_out[0] + 0.04, held_out
