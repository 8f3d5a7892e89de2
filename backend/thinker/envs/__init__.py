"""RL environments: episodes of one or more turns between the policy and an environment.

An episode opens with the environment's messages; the policy writes an assistant message; the
environment replies (a tool result, a user turn, a judge's verdict) with a reward, until it
says done or a turn or token budget ends the episode. Written against messages and the
renderer only, so an environment runs the same on the local engine and on Tinker.
"""

from thinker.envs.base import Env, EnvFactory, EnvStep
from thinker.envs.config import EnvConfig
from thinker.envs.registry import build_env_factory

__all__ = ["Env", "EnvConfig", "EnvFactory", "EnvStep", "build_env_factory"]
