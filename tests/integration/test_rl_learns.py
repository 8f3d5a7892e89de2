"""RL on thinker/tiny after a short SL warm start: the mechanics hold and the reward rises.

Held-out improvement on a verifiable task is not yet shown here (an open point of issue 3): on
the tiny model, REINFORCE raises the reward of the prompts it trains on, as tested below.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

import pytest
import torch

import thinker
from thinker.algorithms.rl import RLConfig, Rollout, group_advantages, main
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.rewards import Completion, ExactMatchReward
from thinker.runs import RunLogger, read_jsonl

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
PROMPTS = ["3+4", "5+2", "8+1", "6+6"]


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """120 SL steps on the arithmetic table: greedy exact match about 0.4."""
    root = tmp_path_factory.mktemp("rl")
    config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        eval_dataset=EXAMPLES / "arithmetic" / "test.jsonl",
        learning_rate=3e-3,
        batch_size=32,
        max_steps=120,
        save_every=0,
        eval_every=0,
        log_path=root / "sl",
    )
    result = asyncio.run(
        sl_main(config, thinker.ServiceClient(storage_dir=root), RunLogger(root / "sl"))
    )
    assert result.state_path is not None
    problems = root / "problems.jsonl"
    problems.write_text(
        "".join(json.dumps({"prompt": p, "answer": str(eval(p))}) + "\n" for p in PROMPTS)
    )
    return root, result.state_path


def _rl(root: Path, state: str, name: str, **overrides: object) -> tuple[list[dict], Path]:
    values: dict[str, object] = dict(
        dataset=root / "problems.jsonl",
        eval_dataset=root / "problems.jsonl",
        init_from=state,
        group_size=32,
        groups_per_batch=4,
        max_tokens=12,
        learning_rate=2e-4,
        max_steps=20,
        eval_every=0,
        save_every=0,
        reward={"type": "exact_match", "format_weight": 0.0},
        log_path=root / name,
    )
    values.update(overrides)
    config = RLConfig(**values)  # type: ignore[arg-type]
    service = thinker.ServiceClient(storage_dir=root)
    torch.manual_seed(0)
    asyncio.run(main(config, service, RunLogger(root / name)))
    return read_jsonl(root / name / "metrics.jsonl"), root / name


def test_rl_raises_the_reward_of_its_prompts(warm_start: tuple[Path, str]) -> None:
    """Observed: mean reward 0.14 at the first steps, 0.30-0.36 at the last (20 steps, 9 s)."""
    metrics, run_dir = _rl(*warm_start, "learn")
    steps = [m for m in metrics if m["step"] > 0]
    first = statistics.fmean(m["reward_mean"] for m in steps[:5])
    last = statistics.fmean(m["reward_mean"] for m in steps[-5:])
    assert last > first + 0.08, (first, last)
    assert all(abs(m.get("kl_sample_train", 0.0)) < 1e-4 for m in steps)  # on-policy: q == p
    # every step's rollouts were written, with advantages that sum to 0 in every kept group
    assert len(list((run_dir / "rollouts").glob("step_*.jsonl"))) == 20
    for line in (run_dir / "rollouts" / "step_000001.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert len(record["completions"]) == 32
        if not record["dropped"]:
            assert sum(record["advantages"]) == pytest.approx(0.0, abs=1e-9)


def test_metrics_of_every_step(warm_start: tuple[Path, str]) -> None:
    metrics, _ = _rl(*warm_start, "metrics", max_steps=2, eval_every=2, kl_coef=0.1)
    assert metrics[0]["step"] == 0 and "eval_reward_mean" in metrics[0]
    last = metrics[-1]
    for key in (
        "reward_mean",
        "reward_std",
        "frac_groups_dropped",
        "kl_to_base",
        "entropy",
        "completion_len_mean",
        "sample_tokens_per_s",
        "eval_reward_mean",
        "learning_rate",
    ):
        assert key in last, key
    assert last["kl_to_base"] > 0 and last["entropy"] > 0 and 0 <= last["frac_groups_dropped"] <= 1


def _group(rewards: list[float]) -> list[Rollout]:
    return [Rollout([1], [2], [-0.5], None, Completion("x", True), reward=r) for r in rewards]


def test_group_advantages_are_reward_minus_the_group_mean() -> None:
    """[1, 0, 0, 1] -> mean 0.5 -> [0.5, -0.5, -0.5, 0.5]; no division by the std."""
    group = _group([1.0, 0.0, 0.0, 1.0])
    group_advantages([group])
    assert [r.advantage for r in group] == [0.5, -0.5, -0.5, 0.5]
    other = _group([3.0, 0.0])
    group_advantages([other])
    assert [r.advantage for r in other] == [1.5, -1.5]


def test_exact_match_reward_with_format_term() -> None:
    from thinker.rewards import Problem

    reward = ExactMatchReward(format_weight=0.1)
    problem = Problem(messages=[{"role": "user", "content": "3+4"}], answer="7")
    got = reward(problem, [Completion("7", True), Completion("8", True), Completion("7", False)])
    assert got == pytest.approx([1.0, 0.0, 0.9])
