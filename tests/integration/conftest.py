"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support import rl_example


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The RL tests' starting policy (tests/support/rl_example.py): thinker/tiny hedging about
    half its one-digit sums. One per test module."""
    root = tmp_path_factory.mktemp("rl")
    return root, rl_example.warm_start(root)
