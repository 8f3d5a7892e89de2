"""The review config: a reward model's checkpoints score preference pairs, and the pairs they are
least sure of make a queue for a person to answer (algorithms/review.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, StrictInt

from thinker.bounds import MAX_SEED, STRICT_NUMBERS

MAX_COMMITTEE = 8


class ReviewConfig(BaseModel):
    """Everything one review run needs."""

    model_config = STRICT_NUMBERS

    dataset: Path = Field(
        description="JSONL preference pairs (prompt, chosen, rejected, in any of the formats "
        "DPO reads). A pair's `chosen` is the dataset's label, compared with the reward "
        "model's for its calibration; a pool not yet labelled may put either answer first."
    )
    reward_models: list[str] = Field(
        min_length=1,
        max_length=MAX_COMMITTEE,
        description="The committee: sampler weights (checkpoint directories or tinker:// "
        "paths) of one reward model's checkpoints, oldest first; the last is the reward "
        "model under review. A server job names a library model (mdl_...) instead, and the "
        "server puts in its last `committee` checkpoints.",
    )
    base_model: str | None = Field(
        None,
        description="The reward model's base model (whose default renderer it reads with); "
        "null: recorded beside local weights.",
    )
    head: Literal["judge", "bradley_terry"] = Field(
        "judge", description="The reward model's head, as it was trained."
    )
    max_length: StrictInt | None = Field(
        None, gt=0, description="Its prompts' token limit (its training's); null: 1024."
    )
    max_pairs: StrictInt | None = Field(
        500, gt=0, le=100_000, description="Score at most this many pairs (null: all)."
    )
    queue_size: StrictInt = Field(
        20, gt=0, le=1000, description="How many of the least certain pairs make the queue."
    )
    seed: StrictInt = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="Which answer of a pair is shown first (A) in the queue: a seeded coin per "
        "pair, so a person cannot tell the dataset's label from the order.",
    )
    backend: Literal["local", "tinker"] = Field("local", description="Where the scoring runs.")
    log_path: Path = Field(Path("runs/review"), description="The run directory.")
