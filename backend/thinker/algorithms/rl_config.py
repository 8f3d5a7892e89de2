"""The RL config: GRPO-style groups against a reward, one pydantic schema for CLI, YAML and API."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictInt, field_validator, model_validator

from thinker.algorithms.loop_config import LoopConfig, LrSchedule
from thinker.bounds import (
    MAX_BATCH,
    MAX_GROUP,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    STRICT_NUMBERS,
    Number,
)
from thinker.engine.losses import CONFIG_KEYS
from thinker.envs.config import EnvConfig
from thinker.rewards.config import RewardConfig

Variant = Literal["grpo", "dr_grpo", "dapo", "gspo", "custom"]
AdvantageNorm = Literal["none", "std"]
LossAggregation = Literal["token", "sequence", "constant"]
Overlong = Literal["none", "filter", "soft"]
KLEstimator = Literal["k1", "k3"]

# What each variant sets where the config does not give the key itself; its loss_fn_config
# only goes with its own loss_fn (TRAINING_GUIDE.md, "RL variants", says why each value).
VARIANTS: dict[str, dict[str, object]] = {
    "grpo": {"advantage_norm": "std", "loss_aggregation": "sequence", "kl_estimator": "k3"},
    "dr_grpo": {"advantage_norm": "none", "loss_aggregation": "constant"},
    "dapo": {
        "advantage_norm": "std",
        "loss_aggregation": "token",
        "loss_fn": "ppo",
        "loss_fn_config": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28},
        "dynamic_sampling": True,
        "overlong": "soft",
    },
    "gspo": {"advantage_norm": "std", "loss_aggregation": "sequence", "loss_fn": "gspo"},
}
# Losses whose value scales with the advantage (linear, or ppo's and gspo's clipped min,
# positively homogeneous), so a per-token weight folded into the advantage weights the term.
WEIGHABLE_LOSSES = frozenset({"importance_sampling", "ppo", "cispo", "gspo"})


class FormatReward(BaseModel):
    """+ weight to a completion that matches `pattern`."""

    model_config = STRICT_NUMBERS

    pattern: str = Field(description="A regular expression (Python re.search).")
    weight: Number = Field(0.1, ge=-100, le=100, description="Added to the reward on a match.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from e
        return value


class LengthPenalty(BaseModel):
    """- coef per sampled token beyond `target`."""

    model_config = STRICT_NUMBERS

    target: StrictInt = Field(ge=0, le=MAX_TOKENS, description="Tokens free of penalty.")
    coef: Number = Field(ge=0, le=100, description="Subtracted per token beyond target.")


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
    variant: Variant | None = Field(
        None,
        description="A preset of the keys below as its paper sets them; a key you give wins. "
        "grpo: advantage_norm std, loss_aggregation sequence, kl_estimator k3. dr_grpo: "
        "advantage_norm none, loss_aggregation constant. dapo: advantage_norm std, "
        "loss_aggregation token, loss_fn ppo with clip thresholds 0.8 and 1.28, "
        "dynamic_sampling true, overlong soft. gspo: advantage_norm std, loss_aggregation "
        "sequence, loss_fn gspo. null or custom: none (each key's own default).",
    )
    advantage_norm: AdvantageNorm = Field(
        "none",
        description="none: advantage = reward - the group's mean (Dr. GRPO, the cookbook); std: "
        "divided by the group's standard deviation + 1e-6 (GRPO, DAPO, GSPO).",
    )
    loss_aggregation: LossAggregation = Field(
        "token",
        description="How token terms add up: token: every sampled token of the batch alike "
        "(DAPO); sequence: each completion's tokens averaged, then the completions (GRPO, "
        "GSPO); constant: each completion's token sum over max_tokens (Dr. GRPO).",
    )
    dynamic_sampling: bool = Field(
        False,
        description="DAPO: sample more problems to replace the groups drop_constant_groups "
        "drops, up to max_refill_rounds rounds a step.",
    )
    max_refill_rounds: StrictInt = Field(
        3, ge=1, le=100, description="dynamic_sampling: extra sampling rounds a step at most."
    )
    overlong: Overlong = Field(
        "none",
        description="Completions cut at max_tokens: none: scored as they are; filter: "
        "advantage 0, out of the loss; soft: DAPO's penalty, 0 up to max_tokens - "
        "overlong_cache tokens, then down linearly to -1 at max_tokens.",
    )
    overlong_cache: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_TOKENS,
        description="overlong soft: the tokens over which the penalty ramps down to -1; null: "
        "max_tokens // 4.",
    )
    kl_estimator: KLEstimator = Field(
        "k1",
        description="The per-token estimate of the KL to the base that kl_coef weighs, on the "
        "sampled tokens: k1: log q - log p_base; k3: exp(log p_base - log q) - (log p_base - "
        "log q) - 1, never negative.",
    )
    format_reward: FormatReward | None = Field(
        None,
        description="Reward shaping, before advantages: {pattern, weight}: + weight to a "
        "completion matching the regular expression; null: off.",
    )
    length_penalty: LengthPenalty | None = Field(
        None,
        description="Reward shaping, before advantages: {target, coef}: - coef per sampled "
        "token beyond target; null: off.",
    )
    num_substeps: StrictInt = Field(
        1, gt=0, le=100, description="Optimizer steps per batch of rollouts."
    )
    max_steps_off_policy: StrictInt = Field(
        0,
        ge=0,
        le=16,
        description="Asynchronous training: sample each batch this many steps ahead of "
        "training, from the weights of that many steps before (sampling overlaps training); "
        "0: synchronous, each batch sampled from the current weights.",
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

    def token_budget(self) -> int:
        """The most tokens the policy samples in one episode: max_tokens single-turn; over
        turns, max_tokens x max_turns or the env's max_episode_tokens if lower (the L_max of
        Dr. GRPO's constant and DAPO's overlong penalty)."""
        budget = self.max_tokens * self.env.max_turns
        if self.env.max_episode_tokens is not None:
            budget = min(budget, self.env.max_episode_tokens)
        return budget

    @model_validator(mode="before")
    @classmethod
    def _fill_from_the_variant(cls, data: Any) -> Any:
        """The variant's values of the keys `data` leaves out (what the config gives wins);
        its loss_fn_config only with its own loss_fn, whose thresholds it is."""
        if not isinstance(data, dict) or not isinstance(data.get("variant"), str):
            return data
        preset = VARIANTS.get(data["variant"], {})
        filled = {**{k: v for k, v in preset.items() if k != "loss_fn_config"}, **data}
        clip = preset.get("loss_fn_config")
        own_loss = filled.get("loss_fn") == preset.get("loss_fn")
        if isinstance(clip, dict) and "loss_fn_config" not in data and own_loss:
            filled["loss_fn_config"] = dict(clip)
        return filled

    @model_validator(mode="after")
    def _variant_keys_agree(self) -> RLConfig:
        """Settings that contradict each other, all named at once."""
        problems = []
        if self.dynamic_sampling and not self.drop_constant_groups:
            problems.append(
                "dynamic_sampling replaces the groups drop_constant_groups drops; with "
                "drop_constant_groups false there are none: set it true or dynamic_sampling false"
            )
        if self.loss_aggregation != "token" and self.loss_fn not in WEIGHABLE_LOSSES:
            problems.append(
                f"loss_aggregation {self.loss_aggregation!r} weights each token through its "
                f"advantage, but {self.loss_fn!r} has a term without the advantage that the "
                f"weight would miss; use loss_aggregation token or one of "
                f"{sorted(WEIGHABLE_LOSSES)}"
            )
        if self.overlong_cache is not None and self.overlong != "soft":
            problems.append("overlong_cache is read only with overlong soft")
        budget = self.token_budget()
        if self.overlong_cache is not None and self.overlong_cache > budget:
            problems.append(
                f"overlong_cache {self.overlong_cache} is longer than a completion can be "
                f"({budget} tokens: max_tokens, or the episode's budget)"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

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
