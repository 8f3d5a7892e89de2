"""The RL config: GRPO-style groups against a reward, one pydantic schema for CLI, YAML and API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from thinker.algorithms.loop_config import LoopConfig, LrSchedule
from thinker.bounds import (
    MAX_BATCH,
    MAX_GROUP,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    Number,
)
from thinker.engine.losses import CONFIG_KEYS
from thinker.envs.config import EnvConfig
from thinker.rewards.config import RewardConfig


class RLConfig(LoopConfig):
    """Everything one RL run needs. Paths are absolute once a pipeline config resolved them."""

    init_from: str | None = Field(
        None,
        description="A training state (tinker://.../weights/...) to start from, e.g. an SL "
        "warm start; null: a fresh adapter.",
    )
    dataset: Path = Field(
        description='JSONL of problems: {"prompt" | "messages", "answer"?, "tests"?} per line.'
    )
    reward: RewardConfig = Field(
        default_factory=RewardConfig,
        description="What scores a completion: its answer against the reference (exact_match), "
        "a pattern, unit tests, your function, or a reward model.",
    )
    env: EnvConfig = Field(
        default_factory=EnvConfig,
        description="The environment of the episodes: single_turn (one answer a problem, "
        "scored by the reward), tools, guess_number, or your own class.",
    )
    group_size: StrictInt = Field(
        8,
        ge=2,
        le=MAX_GROUP,
        description="Completions sampled per prompt; each one's advantage is its reward minus "
        "its group's mean.",
    )
    groups_per_batch: StrictInt = Field(
        8, gt=0, le=MAX_BATCH, description="Prompts per step, each sampled group_size times."
    )
    max_tokens: StrictInt = Field(
        32,
        gt=0,
        le=MAX_TOKENS,
        description="Tokens per completion; leave room above the longest good answer.",
    )
    temperature: Number = Field(
        1.0,
        gt=0,
        le=MAX_TEMPERATURE,
        description="Sampling temperature of the rollouts: 1.0, the only one RL trains on "
        "correctly (both sides' logprobs are at temperature 1).",
    )
    loss_fn: Literal["importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce"] = (
        Field("importance_sampling", description="The policy-gradient loss.")
    )
    loss_fn_config: dict[str, Number] = Field(
        default_factory=dict,
        description="The loss's own settings, e.g. clip thresholds; dro needs its beta.",
    )
    # A group whose rewards are all equal has zero advantages: it carries no signal.
    drop_constant_groups: bool = Field(
        True, description="Leave out of the step the groups whose rewards are all equal."
    )
    kl_coef: Number = Field(
        0.0,
        ge=0,
        le=100,
        description="Penalty on the sampled KL divergence from the base model; 0: off.",
    )
    num_substeps: StrictInt = Field(
        1, gt=0, le=100, description="Optimizer steps per batch of rollouts."
    )
    max_steps: StrictInt = Field(
        20, gt=0, le=MAX_STEPS, description="RL steps: each samples, scores and trains once."
    )
    learning_rate: Number = Field(
        1e-4,
        gt=0,
        le=1,
        description="The learning rate; for pretrained models 1e-5 to 4e-5 (too high collapses "
        "the policy).",
    )
    lr_schedule: LrSchedule = Field(
        "constant",
        description="How the learning rate changes over the run: linear or cosine decay to 0 at "
        "the last step, or constant.",
    )
    eval_every: StrictInt = Field(
        5,
        ge=0,
        le=MAX_STEPS,
        description="Steps between evaluations of the mean reward on the held-out problems; 0: "
        "only at the end.",
    )
    save_every: StrictInt = Field(
        10,
        ge=0,
        le=MAX_STEPS,
        description="Steps between checkpoints, each a model in the library; 0: only at the end.",
    )
    log_path: Path = Field(Path("runs/rl"), description="The run directory.")

    @field_validator("temperature")
    @classmethod
    def _temperature_is_one(cls, value: float) -> float:
        """The sampler's logprobs and the learner's are both of the temperature-1
        distribution (on Tinker as locally), so rollouts drawn at another temperature would
        train as if drawn at 1: silently off-policy (at 0.7 the sampled tokens' mean
        log(p_T / p_1) is 0.17), with `entropy` and `kl_to_base` no longer estimates of what
        was sampled. Refused rather than trained wrong."""
        if value != 1.0:
            raise ValueError(
                f"{value:g} is refused: RL trains on temperature-1 logprobs (the sampler's and "
                "the learner's, locally and on Tinker), so rollouts sampled at another "
                "temperature would be trained off-policy without a word; use 1.0 (to explore "
                "more, raise group_size)"
            )
        return value

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
        if self.loss_fn == "dro" and self.env.type != "single_turn":
            raise ValueError(
                "loss 'dro' penalises every token's logprob, environment replies included; "
                "use it with env type single_turn"
            )
        if self.loss_fn == "dro" and "beta" not in self.loss_fn_config:
            raise ValueError("loss_fn_config: loss 'dro' needs {'beta': ...}")
        return self
