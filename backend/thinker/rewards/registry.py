"""Config -> reward function."""

from __future__ import annotations

from pathlib import Path

from thinker.errors import ConfigError
from thinker.rewards.base import RewardFn
from thinker.rewards.code import CodeExecutionReward
from thinker.rewards.config import RewardConfig
from thinker.rewards.exact_match import ExactMatchReward
from thinker.rewards.python_fn import PythonFunctionReward
from thinker.rewards.regex import RegexReward


def build_reward(
    config: RewardConfig, *, base_dir: Path | None = None, judge: RewardFn | None = None
) -> RewardFn:
    """The reward `config` names. `base_dir` (the config file's directory, else the working
    directory) is where a "python" reward's module is looked up; `judge` is the reward model
    the RLHF pipeline trained, returned for type "reward_model"."""
    limits = {"timeout_s": config.timeout_s, "cpu_s": config.cpu_s, "memory_mb": config.memory_mb}
    match config.type:
        case "exact_match":
            return ExactMatchReward(format_weight=config.format_weight)
        case "regex":
            if config.pattern is None:
                raise ConfigError("reward type 'regex' needs `pattern`")
            return RegexReward(config.pattern)
        case "code":
            return CodeExecutionReward(**limits)
        case "python":
            if not config.function:
                raise ConfigError("reward type 'python' needs `function: module:function`")
            return PythonFunctionReward(config.function, search_path=base_dir, **limits)
        case "reward_model":
            if judge is None:
                raise ConfigError(
                    "reward type 'reward_model' is supplied by the RLHF pipeline (its reward-model "
                    "stage); use algorithm 'rlhf', or pick another reward type for plain RL"
                )
            return judge
    raise ConfigError(f"unknown reward type {config.type!r}")
