"""Environments: tool calls read and run, malformed ones answered, the guessing game's rules,
custom classes loaded (episodes on the engine: tests/integration/test_envs_learn.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from thinker.algorithms.rl import RLConfig
from thinker.envs import EnvConfig, EnvStep, build_env_factory
from thinker.envs.builtin import GuessNumberEnv, ToolEnv
from thinker.envs.tools import CALCULATOR, ToolCallError, calculate, parse_tool_calls
from thinker.errors import ConfigError
from thinker.renderers.base import Message
from thinker.rewards import Completion, ExactMatchReward, Problem


def test_the_calculator_does_arithmetic_and_nothing_else() -> None:
    assert calculate("1234 + 5678") == "6912"
    assert calculate("(2 + 3) * -4") == "-20"
    assert calculate("7 / 2") == "3.5"
    assert calculate("2 ** 10 // 3 % 5") == str(2**10 // 3 % 5)
    for bad, why in [
        ("__import__('os')", "only numbers"),
        ("1 / 0", "division by zero"),
        ("2 ** 1000", "exponents are limited"),
        ("1 +", "not an arithmetic expression"),
    ]:
        with pytest.raises(ToolCallError, match=why):
            calculate(bad)


def test_tool_calls_are_read_in_each_format() -> None:
    call_json = '{"name": "calculator", "arguments": {"expression": "1+2"}}'
    text = f"Let me add. <tool_call>{call_json}</tool_call>"
    (call,) = parse_tool_calls(text, "qwen3")
    assert (call.name, call.arguments) == ("calculator", {"expression": "1+2"})
    two = text + ' <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
    assert [c.name for c in parse_tool_calls(two, "role_colon")] == ["calculator", "python"]
    llama = '<|python_tag|>{"name": "calculator", "parameters": {"expression": "3*3"}}'
    assert parse_tool_calls(llama, "llama3")[0].arguments == {"expression": "3*3"}
    assert parse_tool_calls("The answer is 3.", "qwen3") == []
    assert parse_tool_calls("The answer is 3.", "llama3") == []
    for bad, why in [
        ('<tool_call>{"name": "calculator", "arguments": {</tool_call>', "not valid JSON"),
        ('<tool_call>{"name": "calculator"', "never closed"),
        ('<tool_call>["calculator"]</tool_call>', 'string "name"'),
        ('<tool_call>{"name": "c", "arguments": [1]}</tool_call>', "must be a JSON object"),
    ]:
        with pytest.raises(ToolCallError, match=why):
            parse_tool_calls(bad, "qwen3")


def _assistant(text: str) -> Message:
    return Message(role="assistant", content=text)


def test_a_malformed_call_is_an_observation_and_a_good_one_runs() -> None:
    problem = Problem(messages=[Message(role="user", content="1234 + 5678?")], answer="6912")
    env = ToolEnv(problem, {"calculator": CALCULATOR}, "qwen3")
    opening = env.initial_messages()
    assert opening[0]["role"] == "system" and "calculator" in opening[0]["content"]
    assert opening[1:] == problem.messages
    bad = env.step(_assistant("<tool_call>{oops}</tool_call>"), truncated=False)
    assert not bad.done and bad.error is not None and "not valid JSON" in bad.error
    assert bad.messages[0]["role"] == "tool" and "tool error" in bad.messages[0]["content"]
    unknown = env.step(
        _assistant('<tool_call>{"name": "search", "arguments": {}}</tool_call>'), False
    )
    assert unknown.error == "no tool 'search'; the tools are: calculator"
    good = env.step(
        _assistant(
            '<tool_call>{"name": "calculator", "arguments": {"expression": "1234+5678"}}'
            "</tool_call>"
        ),
        False,
    )
    assert good.messages == [Message(role="tool", content="6912")] and good.error is None
    final = env.step(_assistant("6912"), False)
    assert final.done and final.metrics == {"tool_calls": 1.0, "tool_errors": 2.0}
    # the base-model format has no tool role: results come back as the user's turn
    assert ToolEnv(problem, {"calculator": CALCULATOR}, "role_colon").step(
        _assistant(
            '<tool_call>{"name": "calculator", "arguments": {"expression": "2"}}</tool_call>'
        ),
        False,
    ).messages == [Message(role="user", content="2")]


def test_the_guessing_game_answers_higher_lower_and_scores_the_win() -> None:
    env = GuessNumberEnv(Problem(messages=[]), secret=7, low=1, high=10, turn_penalty=0.1)
    assert "from 1 to 10" in env.initial_messages()[0]["content"]
    assert env.step(_assistant("3"), False).messages[0]["content"] == "higher"
    assert env.step(_assistant("I guess 9"), False).messages[0]["content"] == "lower"
    vague = env.step(_assistant("hmm"), False)
    assert vague.error == "no number in the guess" and not vague.done
    won = env.step(_assistant("7"), False)
    assert won.done and won.reward == pytest.approx(1.0 - 0.1 * 3)
    assert won.metrics == {"won": 1.0, "turns": 4.0}


def test_env_configs_are_checked_when_they_load(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="needs class_path"):
        EnvConfig(type="custom")
    with pytest.raises(ValidationError, match="max_turns >= 2"):
        EnvConfig(type="tools")
    with pytest.raises(ValidationError, match="leave max_turns at 1"):
        EnvConfig(max_turns=3)
    with pytest.raises(ValidationError, match="env type single_turn"):
        RLConfig(
            dataset=tmp_path / "p.jsonl",
            env=EnvConfig(type="guess_number", max_turns=4),
            loss_fn="dro",
            loss_fn_config={"beta": 0.1},
        )
    with pytest.raises(ConfigError, match="low < high"):
        build_env_factory(
            EnvConfig(type="guess_number", max_turns=3, options={"low": 5, "high": 5}),
            ExactMatchReward(),
            "role_colon",
        )


def test_a_custom_environment_class_is_loaded_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "my_env.py").write_text(
        textwrap.dedent(
            """
            from thinker.envs import Env, EnvFactory, EnvStep

            class Echo(Env):
                def __init__(self, word):
                    self.word = word
                def initial_messages(self):
                    return [{"role": "user", "content": "say " + self.word}]
                def step(self, message, truncated):
                    return EnvStep(reward=float(self.word in message["content"]), done=True)

            class EchoFactory(EnvFactory):
                def __init__(self, word="hi"):
                    self.word = word
                def group(self, problem, size, seed):
                    return [Echo(self.word) for _ in range(size)]
            """
        )
    )
    config = EnvConfig(type="custom", class_path="my_env:EchoFactory", options={"word": "yo"})
    factory = build_env_factory(config, ExactMatchReward(), "role_colon", base_dir=tmp_path)
    (env,) = factory.group(Problem(messages=[]), 1, seed=0)
    assert env.initial_messages()[0]["content"] == "say yo"
    assert env.step(_assistant("yo!"), False) == EnvStep(reward=1.0, done=True)
    for path, why in [
        ("my_env:Nope", "not an EnvFactory subclass"),
        ("nowhere:X", "cannot import"),
    ]:
        with pytest.raises(ConfigError, match=why):
            build_env_factory(
                EnvConfig(type="custom", class_path=path),
                ExactMatchReward(),
                "role_colon",
                tmp_path,
            )


def test_a_custom_tool_environment_gets_the_renderer_and_may_drop_the_tool_text() -> None:
    """A factory whose constructor takes `renderer` gets the run's chat format (its episodes
    read calls in it), as it gets `reward_fn`; `instructions=""` opens without the system
    message that offers the tools."""
    config = EnvConfig(type="custom", class_path="tests.support.forecast_env:ForecastFactory")
    factory = build_env_factory(config, ExactMatchReward(), "qwen3")
    problem = Problem(messages=[Message(role="user", content="Tomorrow?")], answer="rainy")
    (env,) = factory.group(problem, 1, seed=0)
    assert env.initial_messages() == problem.messages  # no system text
    call = env.step(
        _assistant('<tool_call>{"name": "forecast", "arguments": {}}</tool_call>'), False
    )
    assert call.messages == [Message(role="tool", content="rainy")]  # qwen3's tool role
    assert factory.final_rewards(problem, [Completion(text="rainy", terminated=True)]) == [1.0]
    offered = ToolEnv(problem, {"calculator": CALCULATOR}, "qwen3", instructions="Use tools.")
    assert offered.initial_messages()[0] == Message(role="system", content="Use tools.")
