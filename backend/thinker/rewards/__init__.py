"""Reward functions for RL (see base.py for the interface, registry.py for the config types)."""

from thinker.rewards.base import Completion, Problem, RewardFn
from thinker.rewards.code import CodeExecutionReward, extract_code
from thinker.rewards.exact_match import ExactMatchReward, answers_match, extract_answer
from thinker.rewards.python_fn import PythonFunctionReward
from thinker.rewards.regex import RegexReward
from thinker.rewards.registry import build_reward
from thinker.rewards.sandbox import SandboxError, SandboxResult, run_sandboxed

__all__ = [
    "CodeExecutionReward",
    "Completion",
    "ExactMatchReward",
    "Problem",
    "PythonFunctionReward",
    "RegexReward",
    "RewardFn",
    "SandboxError",
    "SandboxResult",
    "answers_match",
    "build_reward",
    "extract_answer",
    "extract_code",
    "run_sandboxed",
]
