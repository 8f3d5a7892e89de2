"""Fixtures shared by the integration tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import thinker
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.runs import RunLogger

RL_DATA = Path(__file__).resolve().parents[2] / "data" / "examples" / "rl"


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The RL tests' starting policy: 250 SL steps on the hedged one-digit sums (about 8 s),
    after which thinker/tiny hedges about half the time. One per test module."""
    root = tmp_path_factory.mktemp("rl")
    config = SLConfig(
        dataset=RL_DATA / "warmup_hedged.jsonl",
        eval_fraction=0.0,
        learning_rate=3e-3,
        batch_size=32,
        max_steps=250,
        save_every=0,
        eval_every=0,
        log_path=root / "sl",
    )
    service = thinker.ServiceClient(storage_dir=root)
    result = asyncio.run(sl_main(config, service, RunLogger(root / "sl")))
    assert result.state_path is not None
    return root, result.state_path
