"""Fixtures shared by the integration tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock
from tests.support import rl_example

from thinker.engine.local.checkpoints import resolve


@pytest.fixture(scope="session")
def warm_state(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The directory of the RL tests' starting policy (tests/support/rl_example.py):
    thinker/tiny hedging about half its one-digit sums. Trained once per run: the pytest
    processes of one run (xdist's workers) share it through a file lock, where each RL test
    module used to train its own (50 s of a loaded CI machine's time, three times over)."""
    here = tmp_path_factory.getbasetemp()
    run = here.parent if os.environ.get("PYTEST_XDIST_WORKER") else here  # this run's folder
    shared = run / "rl-warm-start"
    with FileLock(f"{shared}.lock"):
        done = shared / "state.txt"
        if not done.is_file():
            shared.mkdir(exist_ok=True)
            state = rl_example.warm_start(shared)
            done.write_text(str(resolve(state, shared)))
        return done.read_text()


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory, warm_state: str) -> tuple[Path, str]:
    """A folder of the module's own for its runs, and the shared starting policy."""
    return tmp_path_factory.mktemp("rl"), warm_state
