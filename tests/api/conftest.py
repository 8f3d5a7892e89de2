"""API-tier fixtures: the real app on a real database (each test that takes `settings` or
`client` runs once per database: see `database_url` in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import make_settings
from tests.support.sampling import TrainedRun, train_adapter

from thinker.server.app import create_app
from thinker.settings import Settings


@pytest.fixture
def settings(tmp_path: Path, database_url: str | None) -> Settings:
    return make_settings(tmp_path / "data", database_url)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The real app (lifespan included: migrations, job manager) behind a test client."""
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def held(tmp_path: Path, database_url: str | None) -> Iterator[TestClient]:
    """A server whose jobs all stay queued (no CPU or remote slots): nothing trains."""
    settings = make_settings(tmp_path / "data", database_url, max_cpu_jobs=0, max_remote_jobs=0)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """A real adapter: 3 SL steps on the arithmetic examples (a few seconds on the CPU)."""
    return train_adapter(tmp_path_factory.mktemp("sl") / "run")
