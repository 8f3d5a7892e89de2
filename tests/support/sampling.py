"""A real adapter for the sampling tests: trained by a few SL steps on the tiny model, then
registered with a server as a finished job's model."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, platform_of

from thinker.algorithms.sl import SLConfig, main
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.runs import RunLogger
from thinker.store import Job, Model, new_id

TINY = "thinker/tiny"


@dataclass(frozen=True)
class TrainedRun:
    directory: Path  # a run directory, as runs/<job id>/ holds it
    sampler_path: str


def train_adapter(run_dir: Path) -> TrainedRun:
    """3 SL steps on the arithmetic examples (a few seconds on the CPU), saved in `run_dir`."""
    config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        log_path=run_dir,
        max_steps=3,
        batch_size=4,
        learning_rate=1e-2,
        lora_rank=8,
        eval_every=0,
        save_every=0,
    )
    result = asyncio.run(main(config, logger=RunLogger(run_dir)))
    assert result.sampler_path is not None
    return TrainedRun(run_dir, result.sampler_path)


def add_model(
    client: TestClient, run: TrainedRun, lifecycle: str = "active", backend: str = "local"
) -> str:
    """Register `run` as a finished job of this server with one model; the model's id."""
    platform = platform_of(client)
    job_id, model_id = new_id("job"), new_id("mdl")
    shutil.copytree(run.directory, platform.settings.runs_dir / job_id)

    async def insert() -> None:
        async with platform.sessions() as session:
            session.add(Job(**_job_fields(job_id, backend)))
            await session.flush()
            session.add(
                Model(
                    id=model_id,
                    name=f"sl-{job_id}",
                    job_id=job_id,
                    dataset_id=None,
                    base_model=TINY,
                    backend=backend,
                    step=3,
                    sampler_path=run.sampler_path,
                    metrics={},
                    lifecycle=lifecycle,
                )
            )
            await session.commit()

    client.portal.call(insert)  # type: ignore[union-attr]
    return model_id


def _job_fields(job_id: str, backend: str) -> dict[str, Any]:
    return dict(
        id=job_id,
        name="sl",
        algorithm="sl",
        backend=backend,
        base_model=TINY,
        dataset_id=None,
        config={},
        state="succeeded",
        resource="cpu" if backend == "local" else "remote",
    )


@contextlib.contextmanager
def worker_held(sampler: LocalSamplingClient) -> Iterator[None]:
    """The sampler's worker busy until the block ends, so calls made in it queue and decode
    together."""
    release = threading.Event()
    sampler.executor.submit(release.wait)
    try:
        yield
    finally:
        release.set()
