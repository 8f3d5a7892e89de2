"""The eval config: several models answer one eval set, each answer is scored, and every pair of
models is compared with its significance (algorithms/evaluation.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt, field_validator, model_validator

from thinker.bounds import MAX_GROUP, MAX_SEED, MAX_TEMPERATURE, MAX_TOKENS, STRICT_NUMBERS, Number
from thinker.renderers import known_renderer
from thinker.rewards.config import RewardConfig

MAX_MODELS = 8


class EvalModel(BaseModel):
    """One model of an evaluation."""

    model_config = STRICT_NUMBERS

    model: str = Field(
        min_length=1,
        description="A base model (a built-in, a hub id, a directory of one) or sampler "
        "weights (tinker://..., or a checkpoint directory): an adapter on its base model.",
    )
    name: str | None = Field(
        None, max_length=200, description="Its label in the results; null: `model`."
    )
    base_model: str | None = Field(
        None,
        description="Sampler weights' base model (its default renderer is used); null: read "
        "from a local checkpoint's metadata.",
    )
    id: str | None = Field(
        None, description="The library model it is (mdl_...), set by the server; null: none."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        return {"model": value} if isinstance(value, str) else value

    @property
    def label(self) -> str:
        return self.name or self.model


class EvalScorer(RewardConfig):
    """How an answer is scored: a reward function (exact_match, regex, code, python, as RL's
    rewards score); `nll`: minus the mean negative log-likelihood per token of the row's
    reference answer under the model (no answer is generated); or `reward_model`: a trained
    reward model's verdict (a pairwise judge's P(the answer beats the row's reference), or a
    Bradley-Terry model's score of the answer); or `llm_judge`: a language model grades each
    answer from 1 to 10 (algorithms/llm_judge.py), scored (grade - 1) / 9."""

    type: Literal["exact_match", "regex", "code", "python", "nll", "reward_model", "llm_judge"] = (
        "exact_match"  # type: ignore[assignment]
    )
    reward_model: str | None = Field(
        None,
        min_length=1,
        description="reward_model: the reward model's sampler weights (a checkpoint directory "
        "or tinker:// path); a job may name a library model of an RLHF job's rm stage "
        "(mdl_...), whose head, base model and max_length the server fills in.",
    )
    head: Literal["judge", "bradley_terry"] = Field(
        "judge",
        description="reward_model: judge (a pairwise judge, as RLHF trains by default; every "
        "row needs a reference answer) or bradley_terry (a score per answer).",
    )
    reward_model_base: str | None = Field(
        None,
        description="reward_model: its base model (whose default renderer it reads with); "
        "null: recorded beside local weights.",
    )
    max_length: StrictInt | None = Field(
        None, gt=0, description="reward_model: its prompts' token limit (its training's)."
    )
    judge_model: str | None = Field(
        None,
        min_length=1,
        max_length=300,
        description="llm_judge: the judge. Without `judge_url`, a model Thinker serves (a base "
        "model or sampler weights; a job may name a library model mdl_...); with it, the "
        "endpoint's model name.",
    )
    judge_url: str | None = Field(
        None,
        pattern=r"^https?://",
        max_length=500,
        description="llm_judge: an OpenAI-compatible endpoint's base URL (e.g. "
        "https://api.openai.com/v1); its key is the server's stored judge key. null: a "
        "model Thinker serves.",
    )
    judge_base: str | None = Field(
        None,
        description="llm_judge: the base model of judge weights (its default renderer); null: "
        "recorded beside local weights.",
    )
    rubric: str | None = Field(
        None,
        max_length=4000,
        description="llm_judge: what the judge grades for; null: correct and helpful.",
    )

    @model_validator(mode="after")
    def _reward_model_named(self) -> EvalScorer:
        if self.type == "reward_model" and self.reward_model is None:
            raise ValueError("scorer reward_model needs `reward_model`: the model's weights")
        if self.type != "reward_model" and self.reward_model is not None:
            raise ValueError(f"`reward_model` is for scorer reward_model, not {self.type}")
        if self.type == "llm_judge" and self.judge_model is None:
            raise ValueError("scorer llm_judge needs `judge_model`: the model that grades")
        if self.type != "llm_judge" and (self.judge_model or self.judge_url):
            raise ValueError(
                f"`judge_model` and `judge_url` are for scorer llm_judge, not {self.type}"
            )
        return self


class EvalConfig(BaseModel):
    """Everything one evaluation needs."""

    model_config = STRICT_NUMBERS

    dataset: Path = Field(
        description="JSONL: chat rows (a last assistant message is the reference answer), "
        "prompt-completion rows (the completion is the reference) or problem rows ('prompt' "
        "or 'messages', with 'answer' and/or 'tests')."
    )
    models: list[EvalModel] = Field(
        min_length=1,
        max_length=MAX_MODELS,
        description="The models to evaluate, each a base model or sampler weights (a text "
        "for short); every pair is compared, the earlier of the two as A. A job evaluates its "
        "base_model first, then these (library models mdl_... too).",
    )
    base_model: str | None = Field(
        None,
        description="The base model of the first model (a job's; the server sets it); not "
        "evaluated unless named in `models`.",
    )
    backend: Literal["local", "tinker"] = Field(
        "local", description="Where the models run: this server's engine or the Tinker service."
    )
    renderer: str | None = Field(None, description="null: each base model's default renderer.")
    scorer: EvalScorer = Field(
        default_factory=EvalScorer, description="How each answer is scored (default exact_match)."
    )
    samples: StrictInt = Field(
        1,
        ge=1,
        le=MAX_GROUP,
        description="Answers per prompt and model; a model's score on a prompt is their mean.",
    )
    temperature: Number = Field(
        0.0, ge=0, le=MAX_TEMPERATURE, description="Sampling temperature (0: greedy)."
    )
    max_tokens: StrictInt = Field(128, gt=0, le=MAX_TOKENS, description="Tokens per answer.")
    nll: bool = Field(
        True,
        description="Also compute each model's NLL of the reference answers, where rows have one.",
    )
    max_examples: StrictInt | None = Field(
        None, gt=0, description="Evaluate the first this many rows; null: all."
    )
    alpha: Number = Field(
        0.05, gt=0, lt=1, description="A comparison is significant when its p-value is below this."
    )
    resamples: StrictInt = Field(
        10_000, ge=100, le=1_000_000, description="Bootstrap resamples of each interval."
    )
    seed: StrictInt = Field(0, ge=0, le=MAX_SEED, description="Seeds sampling and the bootstrap.")
    log_path: Path = Field(Path("runs/eval"), description="The run directory.")

    @field_validator("renderer")
    @classmethod
    def _renderer_exists(cls, value: str | None) -> str | None:
        return known_renderer(value)

    @model_validator(mode="after")
    def _labels_differ(self) -> EvalConfig:
        labels = [m.label for m in self.models]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(
                f"models: {', '.join(twice)} named twice; give each a different `name`"
            )
        return self
