"""The feedback tests' model and data (test_feedback_learning.py, test_production_loop.py): the
RL example's SL warm start on the hedged one-digit sums, trained as a platform job, hedges
about half of its answers ("Not sure. Perhaps 8."), which feedback can teach it not to do."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.api import EXAMPLES

RL = EXAMPLES / "rl"
WARM_START = {  # configs/rl.yaml's warm start, as a job's config
    "max_steps": 250,
    "batch_size": 32,
    "learning_rate": 3e-3,
    "lora_rank": 32,
    "eval_fraction": 0.0,
    "lr_schedule": "linear",
    "grad_clip_norm": 1.0,
}


def rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def jsonl(records: list[dict[str, str]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def sums() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The 20 training sums the feedback is about, and the 80 others (60 training sums, 20
    in no training file): the held-out set the new model is judged on."""
    problems = rows(RL / "train.jsonl") + rows(RL / "test.jsonl")
    return problems[:20], problems[20:]
