"""RL sampling ahead of training (max_steps_off_policy) and the exact resumption of RL runs.

thinker/tiny after conftest's SL warm start (it hedges about half its one-digit sums), on the
shipped RL example. With k = max_steps_off_policy, the batch of step b (0-based) is sampled
from the weights after max(b - k, 0) steps; a checkpoint keeps the k batches sampled ahead of
it, so a resumed run trains on exactly what the uninterrupted one did.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from crashing import Crash, CrashingLogger
from safetensors.torch import load_file
from tests.support.rl_example import rl_config, run_rl

from thinker.algorithms.common import RunResult
from thinker.algorithms.rl import RLConfig
from thinker.engine.local import checkpoints
from thinker.files import read_jsonl
from thinker.runs import RunDir, read_metrics

STEPS, SAVE_EVERY, CRASH_AFTER = 6, 3, 4


def _config(root: Path, state: str, name: str, **overrides: object) -> RLConfig:
    """6 steps of 8 groups, a checkpoint every 3, no evaluation."""
    values: dict[str, object] = dict(groups_per_batch=8, max_steps=STEPS, eval_every=0)
    return rl_config(root, state, name, save_every=SAVE_EVERY, **{**values, **overrides})


def _run(root: Path, config: RLConfig, crash_after: int | None = None) -> RunResult:
    if crash_after is None:
        return run_rl(root, config)
    with pytest.raises(Crash):
        run_rl(root, config, CrashingLogger(config.log_path, crash_after))
    return RunResult(0)


def _adapter(root: Path, result: RunResult) -> dict[str, torch.Tensor]:
    assert result.state_path is not None
    return load_file(checkpoints.resolve(result.state_path, root) / "adapter_model.safetensors")


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _rollouts(run_dir: Path) -> dict[int, str]:
    return {step: f.read_text() for step, f in RunDir(run_dir).rollout_files().items()}


def _versions(run_dir: Path) -> dict[int, set[int]]:
    """The policy versions of each step's episodes (from the rollout files)."""
    found = {}
    for step, f in RunDir(run_dir).rollout_files().items():
        found[step] = {e["version"] for g in read_jsonl(f) for e in g["episodes"]}
    return found


def _interrupted_then_resumed(root: Path, config: RLConfig, **resumed: object) -> RunResult:
    _run(root, config, crash_after=CRASH_AFTER)
    saved = [c["step"] for c in read_jsonl(RunDir(config.log_path).checkpoints)]
    assert saved == [SAVE_EVERY]
    return _run(root, config.model_copy(update=resumed))


def test_synchronous_rl_resumed_equals_an_uninterrupted_run_bitwise(
    warm_start: tuple[Path, str],
) -> None:
    """Killed after step 4 (checkpoint at 3), resumed: the same adapter bit for bit, the same
    rollouts (every token and logprob) at every step."""
    root, state = warm_start
    straight = _run(root, _config(root, state, "sync-straight"))
    resumed = _interrupted_then_resumed(root, _config(root, state, "sync-resumed"))
    assert _same_weights(_adapter(root, straight), _adapter(root, resumed))
    assert _rollouts(root / "sync-straight") == _rollouts(root / "sync-resumed")
    assert _versions(root / "sync-straight") == {s: {s - 1} for s in range(1, STEPS + 1)}


@pytest.fixture(scope="module")
def asynchronous(warm_start: tuple[Path, str]) -> tuple[Path, str, RunResult]:
    """An uninterrupted run sampling 2 steps ahead, and a run of it killed after step 4."""
    root, state = warm_start
    straight = _run(root, _config(root, state, "async-straight", max_steps_off_policy=2))
    _run(root, _config(root, state, "async-killed", max_steps_off_policy=2), CRASH_AFTER)
    return root, state, straight


def test_asynchronous_samples_are_exactly_k_steps_old(
    asynchronous: tuple[Path, str, RunResult],
) -> None:
    root, state, _ = asynchronous
    metrics = read_metrics(RunDir(root / "async-straight").metrics)
    steps = [m for m in metrics if m["step"] > 0]
    assert [m["staleness_mean"] for m in steps] == [0, 1, 2, 2, 2, 2]
    assert all(m["frac_groups_stale"] == 0 for m in steps)
    assert _versions(root / "async-straight") == {
        s: {max(s - 1 - 2, 0)} for s in range(1, STEPS + 1)
    }
    # Two runs of one config sample alike: the schedule, not timing, picks the weights.
    _run(root, _config(root, state, "async-again", max_steps_off_policy=2))
    assert _rollouts(root / "async-straight") == _rollouts(root / "async-again")


def test_asynchronous_rl_resumed_equals_an_uninterrupted_run_bitwise(
    asynchronous: tuple[Path, str, RunResult],
) -> None:
    """The checkpoint at step 3 keeps the batches of steps 4 and 5 (1-based), sampled from
    the weights after steps 1 and 2, which no checkpoint holds; the resumed run trains on
    them and ends with the uninterrupted run's adapter, bit for bit."""
    root, state, straight = asynchronous
    killed = root / "async-killed"
    copy = root / "async-resumed"
    shutil.copytree(killed, copy)
    buffer = json.loads(RunDir(copy).sample_buffer(SAVE_EVERY).read_text())
    assert [b["step"] for b in buffer["batches"]] == [3, 4]
    assert [b["groups"][0][0]["version"] for b in buffer["batches"]] == [1, 2]
    resumed = _run(root, _config(root, state, "async-resumed", max_steps_off_policy=2))
    assert _same_weights(_adapter(root, straight), _adapter(root, resumed))
    assert _rollouts(root / "async-straight") == _rollouts(copy)


def test_a_resume_with_a_smaller_bound_drops_and_resamples_the_stale_groups(
    asynchronous: tuple[Path, str, RunResult],
) -> None:
    """Resumed with max_steps_off_policy 1, the kept batches (2 steps old when they train)
    are too stale: counted in frac_groups_stale and sampled again from the current weights."""
    root, state, _ = asynchronous
    copy = root / "async-smaller"
    shutil.copytree(root / "async-killed", copy)
    _run(root, _config(root, state, "async-smaller", max_steps_off_policy=1))
    after = {m["step"]: m for m in read_metrics(RunDir(copy).metrics) if m["step"] > SAVE_EVERY}
    assert [after[s]["frac_groups_stale"] for s in (4, 5, 6)] == [1.0, 1.0, 0.0]
    assert [after[s]["staleness_mean"] for s in (4, 5, 6)] == [0.0, 0.0, 1.0]
    assert {s: v for s, v in _versions(copy).items() if s > SAVE_EVERY} == {
        4: {3},
        5: {4},
        6: {4},
    }


def test_asynchronous_rl_raises_the_heldout_reward(warm_start: tuple[Path, str]) -> None:
    """As the variants' learning test (10 steps of 16 groups x 8), sampling 2 steps ahead.
    Observed held-out mean reward at steps 0 / 10: 0.105 / 0.288 (synchronous: 0.105 /
    0.248)."""
    root, state = warm_start
    run_rl(
        root,
        rl_config(root, state, "async-learns", max_steps_off_policy=2, max_steps=10, eval_every=10),
    )
    metrics = read_metrics(RunDir(root / "async-learns").metrics)
    held_out = [m["eval_reward_mean"] for m in metrics if "eval_reward_mean" in m]
    assert len(held_out) == 2
    assert held_out[-1] > held_out[0] + 0.06, held_out
