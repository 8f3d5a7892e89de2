"""The DPO config: one pydantic schema for the CLI, the YAML presets and the API."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, StrictInt

from thinker.algorithms.loop_config import LoopConfig
from thinker.bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_STEPS,
    MAX_TOKENS,
    Number,
)


class DPOConfig(LoopConfig):
    """Everything one DPO run needs. Paths are absolute once a pipeline config has resolved them.

    The reference model is the starting point, frozen: the base model for a fresh adapter,
    or the weights of `init_from` (typically an SL run's final `state_path`).
    """

    init_from: str | None = Field(
        None,
        description="A training state (tinker://.../weights/...) to start from, typically an SL "
        "run's final state; null: a fresh adapter.",
    )
    # None: derived, the base model without init_from, else the starting weights, saved for
    # sampling; the server sets it for a job that continues a library model.
    reference_path: str | None = Field(
        None,
        description="Sampler weights of the frozen reference; null: the weights it starts from.",
    )
    dataset: Path = Field(
        description='JSONL: {"prompt" | "messages", "chosen", "rejected"} per line.'
    )
    max_length: StrictInt = Field(
        1024,
        gt=1,
        le=MAX_TOKENS,
        description="Tokens of prompt and completion; longer ones are cut at the end.",
    )
    beta: Number = Field(
        0.1,
        gt=0,
        le=100,
        description="DPO's beta: the pull towards the reference; higher stays closer to it.",
    )
    batch_size: StrictInt = Field(
        16, gt=0, le=MAX_BATCH, description="Preference pairs per optimizer step."
    )
    micro_batch_size: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_BATCH,
        description="Pairs per forward/backward pass (a step accumulates ceil(batch / micro) "
        "passes); null: as many as fit in free memory.",
    )
    num_epochs: StrictInt = Field(
        1,
        gt=0,
        le=MAX_EPOCHS,
        description="Passes over the pairs; ignored when max_steps is set.",
    )
    max_steps: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_STEPS,
        description="Optimizer steps to train; null: num_epochs passes over the pairs.",
    )
    learning_rate: Number = Field(
        1e-5,
        gt=0,
        le=1,
        description="The peak learning rate: the cookbook's DPO default, below SL's; too high "
        "erases what the model knew.",
    )
    beta1: Number = Field(
        0.9, ge=0, lt=1, description="Adam's decay of the gradient's mean (not DPO's beta)."
    )
    eval_every: StrictInt = Field(
        10,
        ge=0,
        le=MAX_STEPS,
        description="Steps between evaluations of the DPO metrics on the held-out pairs; 0: "
        "only at the end.",
    )
    log_path: Path = Field(Path("runs/dpo"), description="The run directory.")
