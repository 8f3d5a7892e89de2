"""A tool the policy cannot do without: tomorrow's forecast, which only the tool knows.

Each problem's answer is its forecast (a dataset row {"prompt": ..., "answer": "rainy"}); the
`forecast` tool, run by the built-in tool environment (its parsing of calls in the renderer's
format, its errors as observations), returns it. Without a call the policy can only
guess one of the four. The call takes no argument: thinker/tiny does not learn to copy a
problem's numbers into a call within a test's budget (a calculator's 4-digit sums: no call
right after 300 SL steps), while it learns to read a reply a few tokens back. A custom
environment as users write them (TRAINING_GUIDE, "Your own tools"); tests/unit/test_envs.py
loads it by its class path.
"""

from __future__ import annotations

from thinker.envs.base import Env, RewardedFactory
from thinker.envs.builtin import ToolEnv
from thinker.envs.tools import Tool
from thinker.rewards.base import Problem, RewardFn

WEATHER = ("sunny", "rainy", "cloudy", "windy")


class ForecastFactory(RewardedFactory):
    def __init__(self, reward_fn: RewardFn, renderer: str) -> None:
        super().__init__(reward_fn)
        self.renderer = renderer

    def group(self, problem: Problem, size: int, seed: int) -> list[Env]:
        forecast = Tool("forecast", "Tomorrow's weather.", {}, lambda _: str(problem.answer))
        tools = {"forecast": forecast}
        # No system text offering the tool: the warm start taught the call, and a 200-token
        # system message in every episode would triple the test's time.
        return [ToolEnv(problem, tools, self.renderer, instructions="") for _ in range(size)]
