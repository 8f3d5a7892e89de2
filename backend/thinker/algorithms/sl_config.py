"""The supervised-learning config: one pydantic schema for the CLI, the YAML presets and the API."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, StrictInt

from thinker.algorithms.loop_config import LoopConfig
from thinker.bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_STEPS,
    MAX_TOKENS,
)
from thinker.renderers import TrainOnWhat


class SLConfig(LoopConfig):
    """Everything one SL run needs. Paths are absolute once a pipeline config has resolved them."""

    dataset: Path = Field(
        description='JSONL: {"messages": [...]} or {"prompt": ..., "completion": ...} per line.'
    )
    train_on_what: TrainOnWhat = Field(
        TrainOnWhat.LAST_ASSISTANT_MESSAGE,
        description="Which tokens the loss trains on; the others are context only.",
    )
    max_length: StrictInt = Field(
        1024,
        gt=1,
        le=MAX_TOKENS,
        description="Tokens per example; longer ones are cut at the end.",
    )
    batch_size: StrictInt = Field(
        16, gt=0, le=MAX_BATCH, description="Examples per optimizer step."
    )
    micro_batch_size: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_BATCH,
        description="Examples per forward/backward pass (a step accumulates ceil(batch / micro) "
        "passes); null: as many as fit in free memory, as the job log explains.",
    )
    num_epochs: StrictInt = Field(
        1,
        gt=0,
        le=MAX_EPOCHS,
        description="Passes over the data; ignored when max_steps is set.",
    )
    max_steps: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_STEPS,
        description="Optimizer steps to train; null: num_epochs passes over the data.",
    )
    eval_every: StrictInt = Field(
        10,
        ge=0,
        le=MAX_STEPS,
        description="Steps between held-out NLL evaluations; 0: only at the end.",
    )
    eval_examples: StrictInt | None = Field(
        None,
        gt=0,
        le=MAX_BATCH,
        description="Held-out examples each evaluation scores (the same ones every time); "
        "null: as many as keep evaluation near a tenth of the training time, as the job log "
        "says.",
    )
    log_path: Path = Field(Path("runs/sl"), description="The run directory.")
