"""The reward-model config: one pydantic schema for the CLI, the YAML presets and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, StrictInt

from thinker.algorithms.loop_config import LoopConfig
from thinker.bounds import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_STEPS,
    MAX_TOKENS,
    Number,
)


class RewardModelConfig(LoopConfig):
    """Everything one reward-model run needs: a pairwise judge trained by SL on preference pairs.

    Paths are absolute once a pipeline config has resolved them.
    """

    dataset: Path = Field(
        description='JSONL preference pairs: {"prompt" | "messages", "chosen", "rejected"} per '
        "line."
    )
    head: Literal["judge", "bradley_terry"] = Field(
        "judge",
        description="judge: a pairwise judge that answers which of two responses is better "
        "(reward: a completion's win rate in its group); bradley_terry: a scalar score per "
        "response trained with -log sigmoid(r_chosen - r_rejected) (reward: the score).",
    )
    max_length: StrictInt = Field(
        1024,
        gt=1,
        le=MAX_TOKENS,
        description="Tokens of a judge prompt (both answers); longer ones keep their end.",
    )
    batch_size: StrictInt = Field(
        16,
        gt=0,
        le=MAX_BATCH,
        description="Preference pairs per optimizer step, each judged in both orders.",
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
        1e-4,
        gt=0,
        le=1,
        description="The judge's peak learning rate (the cookbook's RLHF recipe uses 3e-4).",
    )
    eval_every: StrictInt = Field(
        10,
        ge=0,
        le=MAX_STEPS,
        description="Steps between evaluations of the judge's accuracy on the held-out pairs; "
        "0: only at the end.",
    )
    log_path: Path = Field(Path("runs/rm"), description="The run directory.")
