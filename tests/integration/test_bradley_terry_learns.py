"""The Bradley-Terry reward model learns the shipped preference pairs (the judge's data in
test_rlhf_learns.py) and ranks held-out pairs it never saw; an RL job can be scored by it."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

import thinker
from thinker.algorithms.bradley_terry import train_bradley_terry
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.files import read_jsonl
from thinker.pipeline.config import RLHFTraining
from thinker.pipeline.metadata import RunMetadata
from thinker.pipeline.stages import run_stages
from thinker.runs import RunDir, RunLogger

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
PREFERENCES = EXAMPLES / "preferences"
RLHF = EXAMPLES / "rlhf"


def test_the_scalar_head_ranks_held_out_pairs(tmp_path: Path) -> None:
    held_out = tmp_path / "test_50.jsonl"
    lines = (PREFERENCES / "test.jsonl").read_text().splitlines(keepends=True)
    held_out.write_text("".join(lines[:50]))
    config = RewardModelConfig(
        dataset=PREFERENCES / "train.jsonl",
        eval_dataset=held_out,
        head="bradley_terry",
        max_steps=20,
        learning_rate=3e-3,
        batch_size=16,
        save_every=0,
        eval_every=0,
        log_path=tmp_path / "rm",
    )
    service = thinker.ServiceClient(storage_dir=tmp_path)
    result = asyncio.run(train_bradley_terry(config, service, RunLogger(tmp_path / "rm")))
    assert result.sampler_path is not None
    metrics = read_jsonl(tmp_path / "rm" / "metrics.jsonl")
    start, end = (m for m in metrics if "rm_eval_margin" in m)
    print("bradley-terry", start, end)  # the figures, for the log
    # The fresh adapter is the base model: scores of chosen and rejected nearly alike.
    assert start["step"] == 0 and abs(start["rm_eval_margin"]) < 0.1
    assert start["rm_eval_prob_chosen"] == pytest.approx(0.5, abs=0.03)
    steps = [m for m in metrics if "rm_train_nll" in m]
    assert steps[0]["rm_train_nll"] == pytest.approx(math.log(2), abs=0.05)
    assert end["step"] == 20
    assert end["rm_eval_accuracy"] >= 0.9
    assert end["rm_eval_margin"] >= 1.0


def test_rlhf_with_the_scalar_head_scores_rl_by_it(tmp_path: Path) -> None:
    """`rm: {head: bradley_terry}` in an RLHF run: the rm stage trains the scalar head, the RL
    stage's rewards are its scores (not a round robin's, which always average 1/2), and the
    verdict after RL is read from it. A few steps each: the wiring, not the learning."""
    section = RLHFTraining.model_validate(
        {
            "lora_rank": 8,
            "sl": {"dataset": RLHF / "demos.jsonl", "max_steps": 2, "batch_size": 8},
            "rm": {
                "dataset": PREFERENCES / "train.jsonl",
                "eval_fraction": 0.05,
                "head": "bradley_terry",
                "max_steps": 2,
                "batch_size": 4,
            },
            "rl": {
                "dataset": RLHF / "prompts.jsonl",
                "eval_fraction": 0.02,
                "group_size": 2,
                "groups_per_batch": 2,
                "max_tokens": 8,
                "max_steps": 2,
                "save_every": 0,
            },
        }
    )
    run_dir = tmp_path / "run"
    meta = RunMetadata.load(run_dir)
    stages = section.stages()
    meta.plan_training_stages(stages)
    asyncio.run(run_stages(stages, RunDir(run_dir), meta))
    rm_steps = [m for m in read_jsonl(run_dir / "rm" / "metrics.jsonl") if "rm_train_nll" in m]
    assert [m["step"] for m in rm_steps] == [1, 2]
    assert all("rm_train_accuracy" in m for m in rm_steps)  # the scalar head's loop
    rl = [m for m in read_jsonl(run_dir / "rl" / "metrics.jsonl") if "reward_mean" in m]
    assert len(rl) == 2 and any(m["reward_mean"] != pytest.approx(0.5) for m in rl)
    done = {r["name"]: r for r in RunMetadata.load(run_dir).data["training_stages"]}
    assert "eval_win_rate_vs_sl" in done["rl"]["final_metrics"]
