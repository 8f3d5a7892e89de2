"""The shipped RL example as the RL tests and the asynchronous RL benchmark run it.

thinker/tiny after an SL warm start on the hedged one-digit sums (each of the 80 training sums
answered once and hedged once with a wrong guess, so the policy hedges about half the time),
then RL on the 80 sums with an exact-match reward, scored on the 20 sums of no training file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import thinker
from thinker.algorithms.common import RunResult
from thinker.algorithms.rl import RLConfig
from thinker.algorithms.rl import main as rl_main
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.runs import MetricsLogger, RunLogger

RL_DATA = Path(__file__).resolve().parents[2] / "data" / "examples" / "rl"


def warm_start(root: Path) -> str:
    """250 SL steps on the hedged sums (about 8 s); the training state to start RL from."""
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
    return result.state_path


def rl_config(root: Path, state: str, name: str, **overrides: object) -> RLConfig:
    """15 steps of 16 sums x 8 completions from `state`, lr 3e-4, the held-out reward every 5
    steps; in `root / name`."""
    values: dict[str, object] = dict(
        dataset=RL_DATA / "train.jsonl",
        eval_dataset=RL_DATA / "test.jsonl",
        init_from=state,
        group_size=8,
        groups_per_batch=16,
        max_tokens=16,
        learning_rate=3e-4,
        max_steps=15,
        eval_every=5,
        save_every=0,
        log_path=root / name,
    )
    values.update(overrides)
    return RLConfig(**values)  # type: ignore[arg-type]


def run_rl(root: Path, config: RLConfig, logger: MetricsLogger | None = None) -> RunResult:
    """Train `config` on the local engine, its checkpoints stored under `root`."""
    service = thinker.ServiceClient(storage_dir=root)
    logger = logger or RunLogger(config.log_path)
    return asyncio.run(rl_main(config, service, logger))
