"""The batch config: a model run over many inputs by a pool of actors (algorithms/batch.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt, field_validator

from thinker.bounds import (
    MAX_GROUP,
    MAX_SANDBOX_S,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    STRICT_NUMBERS,
    Number,
)
from thinker.renderers import known_renderer

Task = Literal["answer", "review", "fix"]

# The system message of each task when the rows and `system_prompt` give none.
SYSTEM_PROMPTS: dict[str, str] = {
    "answer": "",
    "review": (
        "You review code. Name each bug you find, where it is and how to fix it; if there is "
        "none, answer 'Looks good.'"
    ),
    "fix": (
        "Fix the bugs in this code. Answer with the whole corrected code in one ```python block."
    ),
}


class BatchConfig(BaseModel):
    """Everything one batch run needs."""

    model_config = STRICT_NUMBERS

    dataset: Path = Field(
        description="JSONL: chat rows ({'messages': [...]}, a last assistant message is the "
        "reference, not the prompt) or prompt rows ({'prompt': ..., optional 'path' and "
        "'tests'}); an archive of source files becomes prompt rows, one a file."
    )
    base_model: str = Field("thinker/tiny", min_length=1, description="The model that answers.")
    backend: Literal["local"] = Field(
        "local", description="The local engine answers (batch work on Tinker is not served yet)."
    )
    init_from: str | None = Field(
        None,
        description="An adapter's training state (tinker://... or a directory) to answer "
        "with; null: the base model alone.",
    )
    quantization: Literal["4bit"] | None = Field(None, description="4bit: QLoRA's base (CUDA).")
    renderer: str | None = Field(None, description="null: the base model's default renderer.")
    task: Task = Field(
        "answer",
        description="answer: the rows' own prompts; review: a code-review prompt for each "
        "file; fix: a corrected file, run against the row's tests in the sandbox.",
    )
    system_prompt: str | None = Field(
        None, description="A system message for every input that has none; null: the task's."
    )
    samples: StrictInt = Field(
        4,
        ge=1,
        le=MAX_GROUP,
        description="Answers sampled per input; their agreement is the output's confidence.",
    )
    temperature: Number = Field(0.7, gt=0, le=MAX_TEMPERATURE, description="Sampling temperature.")
    max_tokens: StrictInt = Field(256, gt=0, le=MAX_TOKENS, description="Tokens per answer.")
    confidence_threshold: Number = Field(
        0.5,
        ge=0,
        le=1,
        description="Outputs whose confidence (the share of samples agreeing with the chosen "
        "answer) is below this are flagged, not applied.",
    )
    workers: StrictInt = Field(
        2, ge=1, le=64, description="Actors in the pool: one a GPU, or a few CPU cores each."
    )
    shard_size: StrictInt = Field(4, ge=1, le=10_000, description="Inputs an actor takes at once.")
    max_retries: StrictInt = Field(
        2, ge=0, le=10, description="Times a shard is retried on another actor after a failure."
    )
    shard_timeout_s: Number = Field(
        600, gt=0, le=86_400, description="An actor that holds a shard longer is replaced."
    )
    sandbox_timeout_s: Number = Field(
        10, gt=0, le=MAX_SANDBOX_S, description="Wall-clock limit of one fix's tests."
    )
    pool: Literal["auto", "local", "ray"] = Field(
        "auto",
        description="local: processes on this machine; ray: actors on the Ray cluster; auto: "
        "ray under the Ray executor, else local.",
    )
    seed: StrictInt = Field(0, ge=0, le=MAX_SEED, description="Seeds the samples.")
    log_path: Path = Field(Path("runs/batch"), description="The run directory.")

    @field_validator("renderer")
    @classmethod
    def _renderer_exists(cls, value: str | None) -> str | None:
        return known_renderer(value)
