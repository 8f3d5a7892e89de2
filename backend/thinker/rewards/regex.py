"""A format check: 1.0 if the completion matches a regular expression, else 0.0."""

from __future__ import annotations

import re

from thinker.errors import ConfigError
from thinker.rewards.base import Completion, Problem


class RegexReward:
    """1.0 where `re.search(pattern, text)` finds a match (use inline flags such as `(?s)`)."""

    def __init__(self, pattern: str) -> None:
        try:
            self.regex = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"invalid regex reward pattern {pattern!r}: {exc}") from exc

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        return [1.0 if self.regex.search(c.text) else 0.0 for c in completions]
