"""The DPO config: one pydantic schema for the CLI, the YAML presets and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt

from thinker.bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_LORA_RANK,
    MAX_SEED,
    MAX_STEPS,
    MAX_TOKENS,
    STRICT_NUMBERS,
    Number,
)


class DPOConfig(BaseModel):
    """Everything one DPO run needs. Paths are absolute once a pipeline config has resolved them.

    The reference model is the starting point, frozen: the base model for a fresh adapter,
    or the weights of `init_from` (typically an SL run's final `state_path`).
    """

    model_config = STRICT_NUMBERS  # extra keys refused, and NaN or infinities (see bounds.py)

    base_model: str = "thinker/tiny"  # hub id, local directory, or a built-in thinker/... model
    backend: Literal["local", "tinker"] = "local"
    quantization: Literal["4bit"] | None = None  # local + CUDA only: QLoRA through bitsandbytes
    init_from: str | None = None  # a state path (thinker://.../weights/...) to start from
    reference_path: str | None = None  # sampler weights of the reference; None = derived:
    # the base model without init_from, else the starting weights, saved for sampling
    dataset: Path  # JSONL: {"prompt" | "messages", "chosen", "rejected"} per line
    eval_dataset: Path | None = None  # None = hold out `eval_fraction` of `dataset`
    eval_fraction: Number = Field(0.1, ge=0.0, lt=1.0)
    renderer: str | None = None  # None = the base model's default renderer
    max_length: StrictInt = Field(1024, gt=1, le=MAX_TOKENS)  # tokens of prompt + completion
    lora_rank: StrictInt = Field(32, gt=0, le=MAX_LORA_RANK)
    beta: Number = Field(0.1, gt=0, le=100)  # DPO's beta: strength of the pull to the reference
    batch_size: StrictInt = Field(16, gt=0, le=MAX_BATCH)  # preference pairs per optimizer step
    micro_batch_size: StrictInt | None = Field(None, gt=0, le=MAX_BATCH)  # pairs per pass;
    # None = as many as fit in free memory (a step accumulates ceil(batch / micro) passes)
    num_epochs: StrictInt = Field(1, gt=0, le=MAX_EPOCHS)
    max_steps: StrictInt | None = Field(None, gt=0, le=MAX_STEPS)  # None = num_epochs of data
    learning_rate: Number = Field(1e-5, gt=0, le=1)  # the cookbook's DPO default; below SL's
    lr_schedule: Literal["linear", "cosine", "constant"] = "linear"  # decay to 0 at the last step
    warmup_steps: StrictInt = Field(0, ge=0, le=MAX_STEPS)
    beta1: Number = Field(0.9, ge=0, lt=1)  # Adam's, not DPO's
    beta2: Number = Field(0.95, ge=0, lt=1)
    eps: Number = Field(1e-8, gt=0, le=1)
    weight_decay: Number = Field(0.0, ge=0, le=1)
    grad_clip_norm: Number = Field(1.0, ge=0)  # global-norm clipping; 0 = none
    eval_every: StrictInt = Field(10, ge=0, le=MAX_STEPS)  # steps between evaluations; 0 = at end
    save_every: StrictInt = Field(20, ge=0, le=MAX_STEPS)  # steps between checkpoints; 0 = at end
    seed: StrictInt = Field(0, ge=0, le=MAX_SEED)
    log_path: Path = Path("runs/dpo")  # the run directory
