"""The RL config: GRPO-style groups against a reward, one pydantic schema for CLI, YAML and API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt, model_validator

from thinker.bounds import (
    MAX_BATCH,
    MAX_GROUP,
    MAX_LORA_RANK,
    MAX_SEED,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    STRICT_NUMBERS,
    Number,
)
from thinker.engine.losses import CONFIG_KEYS
from thinker.rewards.config import RewardConfig


class RLConfig(BaseModel):
    """Everything one RL run needs. Paths are absolute once a pipeline config resolved them."""

    model_config = STRICT_NUMBERS  # extra keys refused, and NaN or infinities (see bounds.py)

    base_model: str = "thinker/tiny"
    backend: Literal["local", "tinker"] = "local"
    quantization: Literal["4bit"] | None = None  # local + CUDA only
    init_from: str | None = None  # a state path to start from (e.g. the SL warm start)
    dataset: Path  # JSONL of problems: {"prompt" | "messages", "answer"?, "tests"?}
    eval_dataset: Path | None = None  # None = hold out `eval_fraction` of `dataset`
    eval_fraction: Number = Field(0.1, ge=0.0, lt=1.0)
    renderer: str | None = None  # None = the base model's default renderer
    reward: RewardConfig = Field(default_factory=RewardConfig)
    lora_rank: StrictInt = Field(32, gt=0, le=MAX_LORA_RANK)
    group_size: StrictInt = Field(8, ge=2, le=MAX_GROUP)  # completions per prompt
    groups_per_batch: StrictInt = Field(8, gt=0, le=MAX_BATCH)  # prompts per step
    max_tokens: StrictInt = Field(32, gt=0, le=MAX_TOKENS)  # per completion
    temperature: Number = Field(1.0, gt=0, le=MAX_TEMPERATURE)
    loss_fn: Literal["importance_sampling", "ppo", "cispo", "dro"] = "importance_sampling"
    loss_fn_config: dict[str, Number] = Field(default_factory=dict)  # e.g. clip thresholds, beta
    drop_constant_groups: bool = True  # groups whose rewards are all equal carry no signal
    kl_coef: Number = Field(0.0, ge=0, le=100)  # penalty on the sampled KL to the base; 0 = off
    num_substeps: StrictInt = Field(1, gt=0, le=100)  # optimizer steps per batch of rollouts
    max_steps: StrictInt = Field(20, gt=0, le=MAX_STEPS)
    learning_rate: Number = Field(1e-4, gt=0, le=1)
    lr_schedule: Literal["linear", "cosine", "constant"] = "constant"
    warmup_steps: StrictInt = Field(0, ge=0, le=MAX_STEPS)
    beta1: Number = Field(0.9, ge=0, lt=1)
    beta2: Number = Field(0.95, ge=0, lt=1)
    eps: Number = Field(1e-8, gt=0, le=1)
    weight_decay: Number = Field(0.0, ge=0, le=1)
    grad_clip_norm: Number = Field(1.0, ge=0)  # 0 = no clipping
    eval_every: StrictInt = Field(5, ge=0, le=MAX_STEPS)  # steps between held-out reward evals;
    # 0 = at the end
    save_every: StrictInt = Field(10, ge=0, le=MAX_STEPS)  # steps between checkpoints; 0 = at end
    seed: StrictInt = Field(0, ge=0, le=MAX_SEED)
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
