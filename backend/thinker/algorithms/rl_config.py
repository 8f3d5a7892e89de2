"""The RL config: GRPO-style groups against a reward, one pydantic schema for CLI, YAML and API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from thinker.engine.losses import CONFIG_KEYS


class RewardConfig(BaseModel):
    """Which reward scores the completions (see thinker.rewards.build_reward)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["exact_match", "regex", "code", "python", "reward_model"] = "exact_match"
    format_weight: float = 0.1  # exact_match: reward -= format_weight if the answer is unparseable
    pattern: str | None = None  # regex: the pattern a good completion matches
    function: str | None = None  # python: "module:function", run sandboxed like code
    timeout_s: float = 10.0  # code / python: wall-clock limit per completion
    cpu_s: float = 5.0  # code / python: CPU-time limit
    memory_mb: int = 512  # code / python: address-space limit


class RLConfig(BaseModel):
    """Everything one RL run needs. Paths are absolute once a pipeline config resolved them."""

    model_config = ConfigDict(extra="forbid")

    base_model: str = "thinker/tiny"
    backend: Literal["local", "tinker"] = "local"
    quantization: Literal["4bit"] | None = None  # local + CUDA only
    init_from: str | None = None  # a state path to start from (e.g. the SL warm start)
    dataset: Path  # JSONL of problems: {"prompt" | "messages", "answer"?, "tests"?}
    eval_dataset: Path | None = None  # None = hold out `eval_fraction` of `dataset`
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    renderer: str | None = None  # None = the base model's default renderer
    reward: RewardConfig = Field(default_factory=RewardConfig)
    lora_rank: int = Field(32, gt=0)
    group_size: int = Field(8, ge=2)  # completions per prompt
    groups_per_batch: int = Field(8, gt=0)  # prompts per step
    max_tokens: int = Field(32, gt=0)  # per completion
    temperature: float = Field(1.0, gt=0)
    loss_fn: Literal["importance_sampling", "ppo", "cispo", "dro"] = "importance_sampling"
    loss_fn_config: dict[str, float] = Field(default_factory=dict)  # e.g. clip thresholds, beta
    drop_constant_groups: bool = True  # groups whose rewards are all equal carry no signal
    kl_coef: float = Field(0.0, ge=0)  # penalty on the sampled KL to the base model; 0 = off
    num_substeps: int = Field(1, gt=0)  # optimizer steps per batch of rollouts
    max_steps: int = Field(20, gt=0)
    learning_rate: float = Field(1e-4, gt=0)
    lr_schedule: Literal["linear", "cosine", "constant"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 1.0  # 0 = no clipping
    eval_every: int = Field(5, ge=0)  # steps between held-out reward evaluations; 0 = at the end
    save_every: int = Field(10, ge=0)  # steps between checkpoints; 0 = only at the end
    seed: int = 0
    log_path: Path = Path("runs/rl")  # the run directory

    @model_validator(mode="after")
    def _loss_fn_config_fits_the_loss(self) -> RLConfig:
        """A misspelt or missing loss setting fails here, not after the first rollouts."""
        unknown = set(self.loss_fn_config) - CONFIG_KEYS[self.loss_fn]
        if unknown:
            allowed = ", ".join(sorted(CONFIG_KEYS[self.loss_fn])) or "none"
            raise ValueError(
                f"loss_fn_config: {sorted(unknown)} not read by {self.loss_fn!r} "
                f"(it reads: {allowed})"
            )
        if self.loss_fn == "dro" and "beta" not in self.loss_fn_config:
            raise ValueError("loss_fn_config: loss 'dro' needs {'beta': ...}")
        return self
