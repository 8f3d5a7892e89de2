"""Batch plans on thinker/tiny (CPU): SL learns in micro-batches, the plan is logged and
explained, and splitting a step into passes changes no weight (SL, DPO, reward model).

Thresholds were set from observed CPU runs with margin (recorded next to each).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import BaseModel
from safetensors.torch import load_file

from thinker.algorithms import dpo, reward_model, sl
from thinker.algorithms.common import RunResult
from thinker.engine.local import checkpoints
from thinker.files import read_jsonl
from thinker.runs import RunDir, RunLogger, read_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
# Adam's first step is lr * g / (|g| + eps): with the usual eps it is lr * sign(g), blind to a
# wrongly scaled gradient; eps = 1 (and no clipping) lets the weights show the gradient itself.
EXACT = dict(max_steps=1, learning_rate=1.0, eps=1.0, grad_clip_norm=0.0, save_every=0)


class _EventLogger(RunLogger):
    """Logs like RunLogger and keeps the events."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.events: list[tuple[str, dict[str, Any]]] = []

    def log_event(self, kind: str, payload: dict[str, Any]) -> None:
        super().log_event(kind, payload)
        self.events.append((kind, payload))

    def plan(self) -> dict[str, Any]:
        return next(payload for kind, payload in self.events if kind == "plan")


def _sl_config(run_dir: Path, **overrides: Any) -> sl.SLConfig:
    values: dict[str, Any] = dict(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        eval_dataset=EXAMPLES / "arithmetic" / "test.jsonl",
        learning_rate=3e-3,
        save_every=0,
        eval_every=0,
        log_path=run_dir,
    )
    return sl.SLConfig(**(values | overrides))


def _run(main: Any, config: BaseModel) -> tuple[RunResult, _EventLogger]:
    logger = _EventLogger(config.log_path)  # type: ignore[attr-defined]
    return asyncio.run(main(config, logger=logger)), logger


def _adapter(result: RunResult, run_dir: Path) -> dict[str, torch.Tensor]:
    assert result.state_path is not None
    return load_file(checkpoints.resolve(result.state_path, run_dir) / "adapter_model.safetensors")


def _assert_same_step(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """The same weights after the step, and the step moved them (B starts at 0)."""
    assert a.keys() == b.keys()
    largest = max(float(t.abs().max()) for k, t in a.items() if "lora_B" in k)
    assert largest > 1e-2
    for k in a:
        assert float((a[k] - b[k]).abs().max()) <= 1e-5, k


def test_sl_in_micro_batches_learns_and_explains_its_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, logger = _run(
        sl.main, _sl_config(tmp_path, batch_size=8, micro_batch_size=2, max_steps=60)
    )
    plan = logger.plan()
    assert plan == {
        "total_steps": 60,
        "start_step": 0,
        "batch_size": 8,
        "micro_batch_size": 2,
        "grad_accumulation": 4,
    }
    line = next(s for s in capsys.readouterr().out.splitlines() if "batch plan" in s)
    assert line.startswith("[thinker] batch plan: available memory ")  # a CPU: MemAvailable
    assert "micro_batch_size 2 (as set)" in line
    assert "batch_size 8 -> 4 pass(es) of up to 2 examples" in line
    nll = [m["train_mean_nll"] for m in read_jsonl(RunDir(tmp_path).metrics)]
    assert all(m["num_sequences"] == 8 for m in read_jsonl(RunDir(tmp_path).metrics))
    # observed (5 s): train NLL 5.4 over the first 5 steps -> 0.76 over the last 5; held-out 0.75
    assert sum(nll[-5:]) / 5 < 0.5 * sum(nll[:5]) / 5
    assert result.final_metrics["eval_mean_nll"] < 1.5


def test_sl_default_plan_is_16_examples_in_as_few_passes_as_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The arithmetic examples are ~20 tokens; the CPU budget (up to 16,384) holds all 16."""
    _, logger = _run(sl.main, _sl_config(tmp_path, max_steps=1))
    assert logger.plan() | {"total_steps": 0} == {
        "total_steps": 0,
        "start_step": 0,
        "batch_size": 16,
        "micro_batch_size": 16,
        "grad_accumulation": 1,
    }
    assert "batch_size 16 -> 1 pass(es)" in capsys.readouterr().out


def test_sl_step_in_four_passes_equals_one_pass(tmp_path: Path) -> None:
    runs = {}
    for micro in (8, 2):
        run_dir = tmp_path / f"micro{micro}"
        config = _sl_config(run_dir, batch_size=8, micro_batch_size=micro, **EXACT)
        result, _ = _run(sl.main, config)
        runs[micro] = (_adapter(result, run_dir), result.final_metrics)
    _assert_same_step(runs[8][0], runs[2][0])
    nll_one, nll_four = runs[8][1]["train_mean_nll"], runs[2][1]["train_mean_nll"]
    assert nll_four == pytest.approx(nll_one, rel=1e-6)


def _pairs_file(tmp_path: Path, count: int) -> Path:
    """The first `count` shipped preference pairs, so the reference scores few sequences."""
    lines = (EXAMPLES / "preferences" / "train.jsonl").read_text().splitlines()[:count]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("main", "config_class"),
    [(dpo.main, dpo.DPOConfig), (reward_model.train_reward_model, reward_model.RewardModelConfig)],
)
def test_preference_step_in_passes_equals_one_pass(
    tmp_path: Path, main: Any, config_class: type[BaseModel]
) -> None:
    """6 pairs a step: one pass of 6, or passes of 4 and 2 (the DPO loss is a mean, so each
    pass is weighted by its share). Weights and the second step's metrics agree."""
    dataset = _pairs_file(tmp_path, 6)
    runs = {}
    for micro in (6, 4):
        run_dir = tmp_path / f"micro{micro}"
        config = config_class(
            dataset=dataset,
            eval_fraction=0.0,
            batch_size=6,
            micro_batch_size=micro,
            log_path=run_dir,
            **(EXACT | {"max_steps": 2}),  # at step 2 the policy has left the reference
        )
        result, logger = _run(main, config)
        assert logger.plan()["grad_accumulation"] == (1 if micro == 6 else 2)
        runs[micro] = (_adapter(result, run_dir), result.final_metrics)
    _assert_same_step(runs[6][0], runs[4][0])
    one, split = runs[6][1], runs[4][1]
    for name in one.keys() - {"step_time_s", "grad_norm"}:
        assert split[name] == pytest.approx(one[name], rel=1e-5, abs=1e-7), name
    assert split["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)


def test_a_resumed_run_splits_its_steps_as_its_checkpoint_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The split comes from free memory, which differs from moment to moment; a resumed run
    reuses the split its checkpoint recorded (a different one would sum each step's gradients
    in another order: not bit for bit the uninterrupted run), and supersedes the metrics the
    interrupted attempt logged after that checkpoint."""
    from tests.integration.crashing import Crash, CrashingLogger

    from thinker.engine.local import memory

    monkeypatch.setattr(memory, "free_memory", lambda device: 20 * memory.GiB)
    config = _sl_config(tmp_path, max_steps=6, save_every=2)
    with pytest.raises(Crash):
        asyncio.run(sl.main(config, logger=CrashingLogger(tmp_path, crash_after=3)))
    recorded = [c["micro_batch_size"] for c in read_jsonl(tmp_path / "checkpoints.jsonl")]
    assert recorded == [16]
    assert [m["step"] for m in read_jsonl(RunDir(tmp_path).metrics)] == [1, 2, 3]

    monkeypatch.setattr(memory, "free_memory", lambda device: 0)  # now only MIN_TOKENS fit
    _, logger = _run(sl.main, config)
    assert logger.plan()["micro_batch_size"] == 16
    assert logger.plan()["start_step"] == 2
    out = capsys.readouterr().out
    assert "micro_batch_size 16 as the checkpoint recorded" in out
    assert "1 metrics row(s) of the earlier attempt after it are superseded" in out
    assert [m["step"] for m in read_metrics(RunDir(tmp_path).metrics)] == [1, 2, 3, 4, 5, 6]
    raw = read_jsonl(RunDir(tmp_path).metrics)  # append-only: the first attempt's row stays
    assert [m.get("step", m.get("rewind_to")) for m in raw] == [1, 2, 3, 2, 3, 4, 5, 6]

    # a fresh run under the same pressure splits by memory: the pin above was the checkpoint's
    _, fresh = _run(sl.main, _sl_config(tmp_path / "fresh", max_steps=1))
    assert fresh.plan()["micro_batch_size"] < 16
