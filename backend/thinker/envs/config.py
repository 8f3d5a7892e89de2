"""The `env` block of an RL config: which environment runs the episodes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictInt, model_validator

from thinker.bounds import MAX_SANDBOX_MB, MAX_SANDBOX_S, STRICT_NUMBERS, Number

ToolName = Literal["calculator", "python"]


class EnvConfig(BaseModel):
    """Which environment the policy acts in (see thinker.envs)."""

    model_config = STRICT_NUMBERS

    type: Literal["single_turn", "tools", "guess_number", "custom"] = Field(
        "single_turn",
        description="single_turn: one answer per problem scored by the reward (classic RL); "
        "tools: the policy may call tools before its final answer; guess_number: a dialogue "
        "game (find a secret number from higher/lower replies); custom: your class.",
    )
    max_turns: StrictInt = Field(
        1,
        ge=1,
        le=64,
        description="Policy messages per episode at most (tools, guess_number, custom).",
    )
    max_episode_tokens: StrictInt | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Sampled tokens per episode at most, over every turn; null: max_tokens * "
        "max_turns.",
    )
    tools: list[ToolName] = Field(
        default_factory=lambda: list[ToolName](["calculator"]),
        description="tools: the tools offered (calculator: arithmetic; python: runs code in "
        "the sandbox and returns its output).",
    )
    class_path: str | None = Field(
        None,
        description="custom: 'module:Class', an EnvFactory subclass found next to the config "
        "or on the Python path; it runs in the trainer's process (trusted code).",
    )
    options: dict[str, Number | str | bool] = Field(
        default_factory=dict,
        description="Settings passed to the environment: guess_number's low/high; a custom "
        "factory's keyword arguments.",
    )
    timeout_s: Number = Field(10.0, gt=0, le=MAX_SANDBOX_S)  # python tool: wall clock per call
    cpu_s: Number = Field(5.0, gt=0, le=MAX_SANDBOX_S)  # python tool: CPU time per call
    memory_mb: StrictInt = Field(256, gt=0, le=MAX_SANDBOX_MB)  # python tool: address space

    @model_validator(mode="after")
    def _fits_the_type(self) -> EnvConfig:
        if self.type == "custom" and not self.class_path:
            raise ValueError("env type 'custom' needs class_path: 'module:Class'")
        if self.type != "custom" and self.class_path:
            raise ValueError(f"class_path is read only by env type 'custom', not {self.type!r}")
        if self.type == "single_turn" and self.max_turns != 1:
            raise ValueError("env type 'single_turn' has one turn: leave max_turns at 1")
        if self.type == "tools" and not self.tools:
            raise ValueError("env type 'tools' needs at least one tool")
        if self.type == "tools" and self.max_turns < 2:
            raise ValueError("env type 'tools' needs max_turns >= 2 (a call, then an answer)")
        return self
