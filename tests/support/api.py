"""The app under test: its settings, the platform behind a test client, rows put in place as
the server would leave them, and waiting on a job's state."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from fastapi.testclient import TestClient

from thinker.server.platform import Platform
from thinker.settings import Settings
from thinker.store import Dataset, Job

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "data" / "examples"


def make_settings(data_dir: Path, database_url: str | None, **overrides: object) -> Settings:
    """Settings for a test server: its own data directory, fast polling, no examples, and job
    workers at the test's own priority. (The server's default runs them 10 nicer, for the API's
    sake; on a machine whose cores are all busy that gives them a tenth of a core, and a batch
    job of the tiny model did not finish in 600 s beside a CPU burner. The niceness is tested
    apart, with the default.)"""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "register_examples": False,
        "poll_interval_s": 0.05,
        "gpus": 0,
        "worker_nice": 0,
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


def platform_of(client: TestClient) -> Platform:
    return client.app.other_asgi_app.state.platform  # type: ignore[attr-defined,no-any-return]


def add_dataset(client: TestClient, source: Path, kind: str) -> str:
    """A stored dataset row and file, as an upload leaves them (uploads are tested apart)."""
    platform = platform_of(client)
    dataset_id = f"ds_{kind[:4]}{abs(hash(source)) % 10**8:08d}"
    shutil.copy(source, platform.datasets.path(dataset_id))
    rows = sum(1 for line in source.read_text().splitlines() if line.strip())

    async def insert() -> None:
        async with platform.sessions() as session:
            session.add(
                Dataset(
                    id=dataset_id,
                    name=source.stem,
                    kind=kind,
                    source_format="jsonl",
                    filename=source.name,
                    num_rows=rows,
                    size_bytes=1,
                    sha256="0",
                )
            )
            await session.commit()

    client.portal.call(insert)
    return dataset_id


def job_rows(client: TestClient) -> list[Job]:
    async def read() -> list[Job]:
        from sqlalchemy import select

        async with platform_of(client).sessions() as session:
            return list((await session.scalars(select(Job))).all())

    return client.portal.call(read)


def job_pid(client: TestClient, job_id: str) -> int:
    """The pid of a job's worker, from its row."""

    async def read() -> int:
        async with platform_of(client).sessions() as session:
            job = await session.get(Job, job_id)
            assert job is not None and job.pid is not None
            return job.pid

    return client.portal.call(read)  # type: ignore[no-any-return]


def wait_state(
    client: TestClient, job_id: str, states: tuple[str, ...], timeout: float = 600
) -> dict:
    """The job once it is in one of `states`. `timeout` bounds a hang, not a speed: a
    4-step job took over 120 s to finish in CI on 2 loaded cores (its worker at nice +10)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise TimeoutError(f"{job_id}: {job['state']}")
