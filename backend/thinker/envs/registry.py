"""The environment factory an RL config's `env` block names."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

from thinker.envs.base import EnvFactory
from thinker.envs.builtin import GuessNumberFactory, SingleTurnFactory, ToolFactory
from thinker.envs.config import EnvConfig
from thinker.envs.tools import CALCULATOR, Tool, python_tool
from thinker.errors import ConfigError
from thinker.rewards.base import RewardFn


def build_env_factory(
    config: EnvConfig, reward_fn: RewardFn, renderer: str, base_dir: Path | None = None
) -> EnvFactory:
    """The factory of `config`'s environment; `renderer` names the chat format (tool calls are
    read in it); `base_dir` is where a custom class's module is looked up first."""
    match config.type:
        case "single_turn":
            return SingleTurnFactory(reward_fn)
        case "tools":
            return ToolFactory(reward_fn, [_tool(name, config) for name in config.tools], renderer)
        case "guess_number":
            options = config.options
            return GuessNumberFactory(
                low=int(options.get("low", 1)),
                high=int(options.get("high", 10)),
                turn_penalty=float(options.get("turn_penalty", 0.1)),
            )
        case "custom":
            assert config.class_path is not None, "checked by EnvConfig"
            return _custom(config.class_path, config, reward_fn, renderer, base_dir)
    raise ConfigError(f"unknown env type {config.type!r}")


def _tool(name: str, config: EnvConfig) -> Tool:
    if name == "calculator":
        return CALCULATOR
    return python_tool(config.timeout_s, config.cpu_s, config.memory_mb)


def _custom(
    path: str, config: EnvConfig, reward_fn: RewardFn, renderer: str, base_dir: Path | None
) -> EnvFactory:
    """`module:Class`, an EnvFactory subclass, built with `options` as keyword arguments (and
    `reward_fn=` and `renderer=`, the chat format's name, if its constructor takes them)."""
    module_name, _, class_name = path.partition(":")
    if not module_name or not class_name:
        raise ConfigError(f"env class_path {path!r} is not 'module:Class'")
    if base_dir is not None and str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"env class_path {path!r}: cannot import {module_name!r}: {e}") from e
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, EnvFactory)):
        raise ConfigError(
            f"env class_path {path!r}: {class_name!r} is not an EnvFactory subclass in "
            f"{module_name!r} (thinker.envs.EnvFactory)"
        )
    kwargs: dict[str, object] = dict(config.options)
    takes = inspect.signature(cls).parameters  # the constructor's, not its local names
    if "reward_fn" in takes:
        kwargs["reward_fn"] = reward_fn
    if "renderer" in takes:  # a tool environment reads calls in the renderer's format
        kwargs["renderer"] = renderer
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(f"env class_path {path!r}: options do not fit {class_name}: {e}") from e
