"""What every training loop's config holds: the model and backend, where the adapter starts,
the held-out split, Adam and its schedule, how often to evaluate and save, the seed and the run
directory. SLConfig, DPOConfig, RLConfig and RewardModelConfig add their own fields and change
what differs for them (a default, a description)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt

from thinker.bounds import MAX_LORA_RANK, MAX_SEED, MAX_STEPS, STRICT_NUMBERS, Number

LrSchedule = Literal["linear", "cosine", "constant"]


class LoopConfig(BaseModel):
    """The settings every training loop reads (see the module)."""

    model_config = STRICT_NUMBERS  # extra keys refused, and NaN or infinities (see bounds.py)

    base_model: str = Field(
        "thinker/tiny",
        description="The model whose weights load: a hub id, a directory on the server, or a "
        "built-in (thinker/tiny trains in seconds on a CPU).",
    )
    backend: Literal["local", "tinker"] = Field(
        "local", description="Where it trains: local (this machine) or tinker (Tinker's GPUs)."
    )
    quantization: Literal["4bit"] | None = Field(
        None,
        description="4bit: QLoRA, the base weights quantized through bitsandbytes (the local "
        "backend on CUDA only); null: the base weights as they are.",
    )
    init_from: str | None = Field(
        None,
        description="A training state (tinker://.../weights/...) to start from; null: a fresh "
        "adapter.",
    )
    eval_dataset: Path | None = Field(
        None,
        description="A held-out set of the same kind of rows; null: hold out eval_fraction of "
        "the dataset.",
    )
    eval_fraction: Number = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="The share of the dataset held out for evaluation when no eval_dataset is "
        "given (0: none).",
    )
    renderer: str | None = Field(
        None,
        description="How conversations become tokens; null: the base model's default renderer.",
    )
    lora_rank: StrictInt = Field(
        32,
        gt=0,
        le=MAX_LORA_RANK,
        description="The adapter's rank, its capacity; 32 suits most datasets.",
    )
    learning_rate: Number = Field(
        1e-4,
        gt=0,
        le=1,
        description="The peak learning rate. LoRA wants about 10x the full fine-tuning rate; "
        "halve it if the loss swings or climbs.",
    )
    lr_schedule: LrSchedule = Field(
        "linear",
        description="How the learning rate changes over the run: linear or cosine decay to 0 at "
        "the last step, or constant.",
    )
    warmup_steps: StrictInt = Field(
        0,
        ge=0,
        le=MAX_STEPS,
        description="Steps over which the learning rate rises from 0 to its peak.",
    )
    beta1: Number = Field(0.9, ge=0, lt=1, description="Adam's decay of the gradient's mean.")
    beta2: Number = Field(
        0.95, ge=0, lt=1, description="Adam's decay of the squared gradient's mean."
    )
    eps: Number = Field(1e-8, gt=0, le=1, description="Adam's epsilon, added to the denominator.")
    weight_decay: Number = Field(0.0, ge=0, le=1, description="AdamW's weight decay.")
    # Of the loss as a mean (per trained token; DPO's per pair), as TRL's max_grad_norm: the
    # engine's loss is a sum, whose norm grows with the batch (common.adam_params).
    grad_clip_norm: Number = Field(
        1.0,
        ge=0,
        description="The most the global norm of the gradient of the mean loss (per trained "
        "token; DPO: per pair) may be; 0: no clipping.",
    )
    eval_every: StrictInt = Field(
        10,
        ge=0,
        le=MAX_STEPS,
        description="Steps between held-out evaluations; 0: only at the end.",
    )
    save_every: StrictInt = Field(
        20,
        ge=0,
        le=MAX_STEPS,
        description="Steps between checkpoints, each a model in the library; 0: only at the end.",
    )
    seed: StrictInt = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="Seeds the adapter's initial weights, the held-out split and the data order.",
    )
    log_path: Path = Field(Path("runs"), description="The run directory.")
