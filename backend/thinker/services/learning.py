"""Learning from feedback: a short update of a library model on a dataset of feedback about its
answers, as a job (POST /api/models/{id}/learn, and a deployment's scheduled cycle)."""

from __future__ import annotations

from typing import Any

from thinker.errors import ConfigError
from thinker.jobs.manager import JobManager
from thinker.store import Dataset, Job, Model

ALGORITHMS = {"preferences": "dpo", "chat": "sl"}  # a feedback dataset's kind: how it trains
STEPS = 30
PRIORITY = 10  # ahead of ordinary jobs (0): a person waits for it


async def learn(  # noqa: PLR0913
    jobs: JobManager,
    model: Model,
    dataset: Dataset,
    *,
    max_steps: int = STEPS,
    learning_rate: float | None = None,
    name: str | None = None,
) -> Job:
    """Queue the update: DPO on preference pairs, SL on chat rows, from the model's own
    training state, every row trained (nothing held out), one checkpoint at the end.

    Raises:
        ConfigError: a dataset of another kind.
    """
    algorithm = ALGORITHMS.get(dataset.kind)
    if algorithm is None:
        raise ConfigError(
            f"dataset_id: {dataset.id} holds {dataset.kind} rows; a model learns from "
            "preferences rows (A/B choices: DPO) or chat rows (good and edited answers: SL)"
        )
    config: dict[str, Any] = {"max_steps": max_steps, "eval_fraction": 0.0, "save_every": max_steps}
    if learning_rate is not None:
        config["learning_rate"] = learning_rate
    job, _ = await jobs.create(
        name=name or f"{model.name}+feedback",
        algorithm=algorithm,
        backend=model.backend,
        base_model=model.id,
        dataset_id=dataset.id,
        config=config,
        priority=PRIORITY,
    )
    return job
