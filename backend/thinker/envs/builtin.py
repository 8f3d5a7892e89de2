"""The built-in environments: single-turn problems, tool use, and the guess-the-number game."""

from __future__ import annotations

import random
import re

from thinker.envs.base import Env, EnvFactory, EnvStep, RewardedFactory
from thinker.envs.tools import (
    Tool,
    ToolCallError,
    format_instructions,
    parse_tool_calls,
    run_call,
    tool_role,
)
from thinker.errors import ConfigError
from thinker.renderers.base import Message
from thinker.rewards.base import Problem, RewardFn


class SingleTurnEnv(Env):
    """The problem's conversation, one answer, done: today's RL datasets unchanged."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem

    def initial_messages(self) -> list[Message]:
        return list(self.problem.messages)

    def step(self, message: Message, truncated: bool) -> EnvStep:
        return EnvStep(done=True)


class SingleTurnFactory(RewardedFactory):
    def group(self, problem: Problem, size: int, seed: int) -> list[Env]:
        return [SingleTurnEnv(problem) for _ in range(size)]


class ToolEnv(Env):
    """The problem with tools offered in a system message. A message with tool calls gets their
    results (or what was wrong with them) back; a message without one is the final answer,
    which the run's reward scores."""

    def __init__(
        self,
        problem: Problem,
        tools: dict[str, Tool],
        renderer: str,
        instructions: str | None = None,
    ) -> None:
        """`instructions`: the system text that offers the tools; None: the built-in one
        (format_instructions); "": none, for a policy already tuned to the call format (a
        custom environment's choice: every token of it is in every episode)."""
        self.problem, self.tools, self.renderer = problem, tools, renderer
        self.instructions = instructions
        self.calls = self.errors = 0

    def initial_messages(self) -> list[Message]:
        system = self.instructions
        if system is None:
            system = format_instructions(list(self.tools.values()), self.renderer)
        messages = list(self.problem.messages)
        if not system:
            return messages
        if messages and messages[0]["role"] == "system":  # the dataset's own system prompt first
            first = messages.pop(0)
            system = f"{first['content']}\n\n{system}"
        return [Message(role="system", content=system), *messages]

    def step(self, message: Message, truncated: bool) -> EnvStep:
        role = tool_role(self.renderer)
        try:
            calls = parse_tool_calls(message["content"], self.renderer)
            if not calls:
                return EnvStep(done=True, metrics=self._metrics())
            replies = []
            for call in calls:
                replies.append(Message(role=role, content=run_call(call, self.tools)))
                self.calls += 1  # calls that ran
        except ToolCallError as e:
            self.errors += 1
            return EnvStep(
                messages=[Message(role=role, content=f"tool error: {e}")],
                error=str(e),
                metrics=self._metrics(),
            )
        return EnvStep(messages=replies, metrics=self._metrics())

    def _metrics(self) -> dict[str, float]:
        return {"tool_calls": float(self.calls), "tool_errors": float(self.errors)}


class ToolFactory(RewardedFactory):
    def __init__(self, reward_fn: RewardFn, tools: list[Tool], renderer: str) -> None:
        super().__init__(reward_fn)
        self.tools, self.renderer = {t.name: t for t in tools}, renderer

    def group(self, problem: Problem, size: int, seed: int) -> list[Env]:
        return [ToolEnv(problem, self.tools, self.renderer) for _ in range(size)]


_NUMBER = re.compile(r"-?\d+")


class GuessNumberEnv(Env):
    """Find a secret integer in [low, high]: the policy guesses, the environment answers
        "higher", "lower" or "correct". Reward 1 for finding it, less `turn_penalty` for each guess
        after the first; 0 if the turns run out or a guess is cut off by the token budget (so
    that ending a message counts). A reply without a number is told so."""

    def __init__(
        self, problem: Problem, secret: int, low: int, high: int, turn_penalty: float
    ) -> None:
        self.problem, self.secret, self.low, self.high = problem, secret, low, high
        self.turn_penalty, self.turns = turn_penalty, 0

    def initial_messages(self) -> list[Message]:
        if self.problem.messages:
            return list(self.problem.messages)
        text = f"I am thinking of a number from {self.low} to {self.high}. Guess it."
        return [Message(role="user", content=text)]

    def step(self, message: Message, truncated: bool) -> EnvStep:
        self.turns += 1
        if truncated:  # cut by the token budget: not a guess, and the episode ends
            return EnvStep(
                done=True, error="the guess was cut off", metrics=self._metrics(won=False)
            )
        numbers = _NUMBER.findall(message["content"])
        if not numbers:
            return EnvStep(
                messages=[
                    Message(
                        role="user", content=f"Answer with a number from {self.low} to {self.high}."
                    )
                ],
                error="no number in the guess",
                metrics=self._metrics(won=False),
            )
        guess = int(numbers[-1])
        if guess == self.secret:
            reward = 1.0 - self.turn_penalty * (self.turns - 1)
            return EnvStep(reward=max(reward, 0.0), done=True, metrics=self._metrics(won=True))
        hint = "higher" if guess < self.secret else "lower"
        return EnvStep(
            messages=[Message(role="user", content=hint)], metrics=self._metrics(won=False)
        )

    def _metrics(self, won: bool) -> dict[str, float]:
        return {"won": float(won), "turns": float(self.turns)}


class GuessNumberFactory(EnvFactory):
    """Each problem's secret is its row's "secret" (else its "answer"); each episode of a group
    plays the same secret."""

    def __init__(self, low: int, high: int, turn_penalty: float) -> None:
        if not low < high:
            raise ConfigError(f"guess_number needs low < high, got low={low}, high={high}")
        self.low, self.high, self.turn_penalty = low, high, turn_penalty

    def group(self, problem: Problem, size: int, seed: int) -> list[Env]:
        secret = self._secret(problem, seed)
        return [
            GuessNumberEnv(problem, secret, self.low, self.high, self.turn_penalty)
            for _ in range(size)
        ]

    def _secret(self, problem: Problem, seed: int) -> int:
        value = problem.row.get("secret", problem.answer)
        if value is None:
            return random.Random(seed).randint(self.low, self.high)
        try:
            secret = int(str(value))
        except ValueError as e:
            raise ConfigError(f"guess_number: the row's secret {value!r} is not an integer") from e
        if not self.low <= secret <= self.high:
            raise ConfigError(f"guess_number: secret {secret} is outside [{self.low}, {self.high}]")
        return secret
