"""The reward-model config: one pydantic schema for the CLI, the YAML presets and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RewardModelConfig(BaseModel):
    """Everything one reward-model run needs: a pairwise judge trained by SL on preference pairs.

    Paths are absolute once a pipeline config has resolved them.
    """

    model_config = ConfigDict(extra="forbid")

    base_model: str = "thinker/tiny"  # hub id, local directory, or a built-in thinker/... model
    backend: Literal["local", "tinker"] = "local"
    quantization: Literal["4bit"] | None = None  # local + CUDA only: QLoRA through bitsandbytes
    init_from: str | None = None  # a state path to start from; None = a fresh adapter
    dataset: Path  # JSONL preference pairs: {"prompt" | "messages", "chosen", "rejected"}
    eval_dataset: Path | None = None  # None = hold out `eval_fraction` of `dataset`
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    renderer: str | None = None  # None = the base model's default renderer
    max_length: int = Field(1024, gt=1)  # tokens of a judge prompt; longer keep their end
    lora_rank: int = Field(32, gt=0)
    batch_size: int = Field(16, gt=0)  # pairs per step, each in both orders
    micro_batch_size: int | None = Field(None, gt=0)  # pairs per forward_backward pass;
    # None = as many as fit in free memory (a step accumulates ceil(batch / micro) passes)
    num_epochs: int = Field(1, gt=0)
    max_steps: int | None = Field(None, gt=0)  # None = num_epochs over the data
    learning_rate: float = Field(1e-4, gt=0)
    lr_schedule: Literal["linear", "cosine", "constant"] = "linear"  # decay to 0 at the last step
    warmup_steps: int = Field(0, ge=0)
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 1.0  # global-norm clipping; 0 = none
    eval_every: int = Field(10, ge=0)  # steps between held-out evaluations; 0 = only at the end
    save_every: int = Field(20, ge=0)  # steps between checkpoints; 0 = only at the end
    seed: int = 0
    log_path: Path = Path("runs/rm")  # the run directory
