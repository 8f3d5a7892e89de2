"""What RL rewards are computed on: a problem (prompt + reference) and a group of completions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from thinker.renderers.base import Message


@dataclass(frozen=True)
class Problem:
    """One RL prompt and what its completions are judged against."""

    messages: list[Message]  # the conversation so far; the policy writes the next assistant turn
    answer: str | None = None  # reference final answer (exact-match rewards)
    tests: list[str] | None = None  # code rewards: test snippets (e.g. assert statements)
    row: dict[str, Any] = field(default_factory=dict)  # the whole dataset row, for user rewards


@dataclass(frozen=True)
class Completion:
    """One sampled answer, as the renderer parsed it."""

    text: str  # the assistant message's content
    terminated: bool  # True if it ended with the renderer's stop sequence (not cut by max_tokens)


class RewardFn(Protocol):
    """Scores a group of completions of one problem: one float per completion.

    Group-wise, so that a pairwise judge can compare completions with each other.
    """

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]: ...
