"""Which reward scores an RL run's completions, as its config names it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictInt

from thinker.bounds import MAX_SANDBOX_MB, MAX_SANDBOX_S, STRICT_NUMBERS, Number


class RewardConfig(BaseModel):
    """Which reward scores the completions (see thinker.rewards.build_reward)."""

    model_config = STRICT_NUMBERS

    type: Literal["exact_match", "regex", "code", "python", "reward_model"] = "exact_match"
    format_weight: Number = Field(0.1, ge=0, le=1)  # exact_match: reward -= format_weight if
    # the answer is unparseable
    pattern: str | None = None  # regex: the pattern a good completion matches
    function: str | None = None  # python: "module:function", run sandboxed like code
    timeout_s: Number = Field(10.0, gt=0, le=MAX_SANDBOX_S)  # code / python: wall clock per
    # completion
    cpu_s: Number = Field(5.0, gt=0, le=MAX_SANDBOX_S)  # code / python: CPU-time limit
    memory_mb: StrictInt = Field(512, gt=0, le=MAX_SANDBOX_MB)  # code / python: address space
