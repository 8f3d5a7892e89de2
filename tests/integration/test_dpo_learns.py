"""DPO on thinker/tiny learns a preference that carries to unseen prompts, changes every LoRA
weight, and resumes exactly, keeping its reference.

Thresholds were set from observed CPU runs with margin (recorded next to each).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from crashing import Crash, CrashingLogger
from safetensors.torch import load_file

import thinker
from thinker.algorithms.common import RunResult
from thinker.algorithms.dpo import DPOConfig, main
from thinker.algorithms.sl import SLConfig
from thinker.algorithms.sl import main as sl_main
from thinker.engine.local import checkpoints
from thinker.files import read_jsonl
from thinker.runs import RunDir, RunLogger, read_metrics

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
PREFERENCES = EXAMPLES / "preferences"


@pytest.fixture(autouse=True)
def one_cpu_thread() -> Iterator[None]:
    # DPO scores each sequence with the reference one call at a time (800 small forwards
    # here). On two cores shared with another busy process, two OpenMP threads that wait on
    # a descheduled peer made each ~40x slower (observed 270 ms instead of 7 ms: 160 s for a
    # 30-step run instead of 13 s); one thread is as fast on an idle machine.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _config(run_dir: Path, **overrides: Any) -> DPOConfig:
    values: dict[str, Any] = dict(
        dataset=PREFERENCES / "train.jsonl",
        eval_dataset=PREFERENCES / "test.jsonl",
        learning_rate=1e-3,
        batch_size=16,
        beta=0.1,
        lora_rank=32,
        save_every=0,
        eval_every=0,
        log_path=run_dir,
    )
    values.update(overrides)
    return DPOConfig(**values)


def _train(config: DPOConfig, storage: Path | None = None) -> RunResult:
    service = thinker.ServiceClient(storage_dir=storage) if storage else None
    return asyncio.run(main(config, service=service, logger=RunLogger(config.log_path)))


def _adapter(path: str | None, storage: Path) -> dict[str, torch.Tensor]:
    assert path is not None
    return load_file(checkpoints.resolve(path, storage) / "adapter_model.safetensors")


def test_dpo_raises_heldout_accuracy_and_margin(tmp_path: Path) -> None:
    result = _train(_config(tmp_path, max_steps=20, eval_every=10, lr_schedule="constant"))
    evals = [m for m in read_jsonl(RunDir(tmp_path).metrics) if "eval_accuracy" in m]
    assert [m["step"] for m in evals] == [0, 10, 20]
    start, middle, end = evals
    # observed at step 0, where the policy is the reference: accuracy 0.525 (ties broken by
    # float noise), margin and rewards 0 to 4 decimals, loss ln 2 = 0.6931
    assert 0.3 <= start["eval_accuracy"] <= 0.7
    assert abs(start["eval_margin"]) < 1e-3 and abs(start["eval_chosen_reward"]) < 1e-3
    assert start["eval_dpo_loss"] == pytest.approx(0.6931, abs=1e-3)
    # observed (about 13 s): accuracy 1.0 at steps 10 and 20; margin 1.46 -> 3.52;
    # loss 0.21 -> 0.032; rewards chosen -0.93, rejected -4.45 at step 20
    assert middle["eval_accuracy"] >= 0.9 and end["eval_accuracy"] >= 0.9
    assert middle["eval_margin"] > 0.7 and end["eval_margin"] > 2.0
    assert end["eval_margin"] > middle["eval_margin"] + 0.5
    assert end["eval_dpo_loss"] < 0.15
    # DPO learns here by pushing the rejected answers down much harder than the chosen ones
    assert end["eval_rejected_reward"] < end["eval_chosen_reward"] - 2.0
    assert result.final_metrics["eval_accuracy"] == end["eval_accuracy"]

    # every element of every LoRA tensor moved away from the fresh adapter (seed 0)
    initial = thinker.ServiceClient(storage_dir=tmp_path).create_lora_training_client(
        "thinker/tiny", rank=32, seed=0
    )
    initial_path = initial.result().save_weights_for_sampler("initial").result().path
    before, after = _adapter(initial_path, tmp_path), _adapter(result.sampler_path, tmp_path)
    assert before.keys() == after.keys() and len(before) == 2 * 7 * 2 + 2
    assert all(bool((before[k] != after[k]).all()) for k in before)


def _subset(source: Path, target: Path, n: int) -> Path:
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:n]))
    return target


def test_resume_matches_an_uninterrupted_run_bitwise_and_keeps_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One storage directory for every run, so DPO can start from the SL run's checkpoint;
    # each run gets a fresh ServiceClient, as a new process would.
    storage = tmp_path / "storage"
    sl_config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        learning_rate=3e-3,
        batch_size=32,
        max_steps=10,
        eval_fraction=0.0,
        save_every=0,
        eval_every=0,
        log_path=tmp_path / "sl",
    )
    service = thinker.ServiceClient(storage_dir=storage)
    sl = asyncio.run(sl_main(sl_config, service=service, logger=RunLogger(sl_config.log_path)))
    data = dict(
        dataset=_subset(PREFERENCES / "train.jsonl", tmp_path / "train.jsonl", 64),
        eval_dataset=_subset(PREFERENCES / "test.jsonl", tmp_path / "test.jsonl", 16),
    )
    settings = dict(
        init_from=sl.state_path,
        max_steps=12,
        save_every=4,
        eval_every=6,
        lr_schedule="cosine",
        warmup_steps=2,
        **data,
    )
    straight = _train(_config(tmp_path / "straight", **settings), storage)

    interrupted = _config(tmp_path / "interrupted", **settings)
    with pytest.raises(Crash):
        asyncio.run(
            main(
                interrupted,
                service=thinker.ServiceClient(storage_dir=storage),
                logger=CrashingLogger(interrupted.log_path, crash_after=7),
            )
        )
    assert [c["step"] for c in read_jsonl(RunDir(interrupted.log_path).checkpoints)] == [4]
    capsys.readouterr()
    resumed = _train(interrupted, storage)
    # The resumed run reads its reference logprobs from the run directory, not the reference.
    assert "reference logprobs of 80 pairs read from reference_logprobs.json" in (
        capsys.readouterr().out
    )
    lines = read_jsonl(RunDir(interrupted.log_path).checkpoints)
    assert [c["step"] for c in lines] == [4, 8, 12]

    # Same final weights, bit for bit.
    a, b = _adapter(straight.state_path, storage), _adapter(resumed.state_path, storage)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)

    # The reference is the starting point (the SL weights), named on every checkpoint line,
    # and not the weights the run resumed from.
    (reference_path,) = {c["reference_path"] for c in lines}
    reference, start = _adapter(reference_path, storage), _adapter(sl.state_path, storage)
    assert all(torch.equal(reference[k], start[k]) for k in start)
    resumed_from = _adapter(lines[0]["state_path"], storage)
    assert not all(torch.equal(reference[k], resumed_from[k]) for k in start)

    # Steps 5-12 after the resume report exactly what the uninterrupted run did: the rewards
    # are log-ratios against the reference, so a different reference would show here.
    def after_step_4(run_dir: Path) -> list[dict[str, float]]:
        rows = read_metrics(RunDir(run_dir).metrics)  # as the curves stand after the resume
        kept = [r for r in rows if r["step"] > 4]
        return [{k: v for k, v in r.items() if k not in ("time", "step_time_s")} for r in kept]

    assert after_step_4(interrupted.log_path) == after_step_4(tmp_path / "straight")
    assert [r["step"] for r in after_step_4(interrupted.log_path)] == list(range(5, 13))
