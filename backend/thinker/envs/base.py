"""The environment interface: an episode of turns, and a factory of groups of episodes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from thinker.renderers.base import Message
from thinker.rewards.base import Completion, Problem, RewardFn


@dataclass
class EnvStep:
    """The environment's answer to one policy message."""

    messages: list[Message] = field(default_factory=list)  # its reply, shown to the policy next
    reward: float = 0.0  # this turn's reward; an episode's reward is the sum of its turns'
    done: bool = False  # the episode is over (its reply, if any, is only recorded)
    error: str | None = None  # what was wrong with the policy's message (a malformed tool call)
    metrics: dict[str, float] = field(default_factory=dict)  # averaged over a step's episodes


class Env(ABC):
    """One episode. `initial_messages` opens it; `step` answers each policy message."""

    @abstractmethod
    def initial_messages(self) -> list[Message]:
        """The conversation the policy answers first (system, user, ... turns)."""

    @abstractmethod
    def step(self, message: Message, truncated: bool) -> EnvStep:
        """The environment's reply to the policy's `message`; `truncated`: the message was cut
        by the token budget (the loop ends the episode after this step whatever `done` says)."""


class EnvFactory(ABC):
    """Makes the episodes of a problem, and may score a finished group as a whole."""

    @abstractmethod
    def group(self, problem: Problem, size: int, seed: int) -> list[Env]:
        """`size` fresh episodes of `problem` (`seed` for any randomness of their own)."""

    def final_rewards(self, problem: Problem, finals: list[Completion]) -> list[float]:
        """Rewards added at the end, from each episode's last policy message (0 by default):
        how the reward functions of single-turn RL score an episode."""
        return [0.0] * len(finals)


class RewardedFactory(EnvFactory):
    """A factory whose episodes end with the run's reward function scoring the final answer."""

    def __init__(self, reward_fn: RewardFn) -> None:
        self.reward_fn = reward_fn

    def final_rewards(self, problem: Problem, finals: list[Completion]) -> list[float]:
        return [float(r) for r in self.reward_fn(problem, finals)]
