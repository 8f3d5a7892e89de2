"""SL on thinker/tiny learns, changes every LoRA weight, and resumes exactly.

Thresholds were set from observed CPU runs with margin (recorded next to each).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from crashing import Crash, CrashingLogger
from safetensors.torch import load_file

import thinker
from thinker.algorithms.sl import SLConfig, SLResult, main
from thinker.data import load_conversations
from thinker.engine.local import checkpoints
from thinker.files import read_jsonl
from thinker.pipeline.evaluate import evaluate
from thinker.renderers import get_renderer
from thinker.runs import RunDir, RunLogger

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def _config(task: str, run_dir: Path, **overrides: object) -> SLConfig:
    values: dict[str, object] = dict(
        dataset=EXAMPLES / task / "train.jsonl",
        eval_dataset=EXAMPLES / task / "test.jsonl",
        learning_rate=3e-3,
        batch_size=32,
        grad_clip_norm=1.0,
        lora_rank=32,
        save_every=0,
        eval_every=0,
        log_path=run_dir,
    )
    values.update(overrides)
    return SLConfig(**values)  # type: ignore[arg-type]


def _train(config: SLConfig) -> SLResult:
    return asyncio.run(main(config, logger=RunLogger(config.log_path)))


def _score(task: str, run_dir: Path, model_path: str | None) -> dict[str, float]:
    service = thinker.ServiceClient(storage_dir=run_dir)
    sampler = (
        service.create_sampling_client(model_path=model_path)
        if model_path
        else service.create_sampling_client(base_model="thinker/tiny")
    ).result()
    renderer = get_renderer("role_colon", sampler.get_tokenizer())
    conversations = load_conversations(EXAMPLES / task / "test.jsonl")
    return asyncio.run(evaluate(conversations, sampler, renderer, max_tokens=16))


@pytest.mark.parametrize(
    ("task", "steps", "lr", "max_nll", "min_exact"),
    [
        # observed: NLL 3.4 -> 0.037, exact match 0 -> 1.00 after 250 steps (9 s)
        ("arithmetic", 250, 3e-3, 0.3, 0.8),
        # observed: NLL 3.2 -> 0.03, held-out exact match 0 -> 0.88 after 600 steps (26 s)
        ("reversal", 600, 5e-3, 0.3, 0.6),
    ],
)
def test_sl_lowers_heldout_nll_and_raises_exact_match(
    tmp_path: Path, task: str, steps: int, lr: float, max_nll: float, min_exact: float
) -> None:
    before = _score(task, tmp_path, None)
    result = _train(_config(task, tmp_path, max_steps=steps, learning_rate=lr))
    after = _score(task, tmp_path, result.sampler_path)
    assert before["exact_match"] == 0.0 and before["eval_nll"] > 2.0
    assert after["eval_nll"] < max_nll, after
    assert after["exact_match"] >= min_exact, after
    assert result.final_metrics["eval_mean_nll"] == pytest.approx(after["eval_nll"], rel=1e-3)


def test_every_lora_parameter_changes(tmp_path: Path) -> None:
    result = _train(_config("arithmetic", tmp_path, max_steps=10))
    service = thinker.ServiceClient(storage_dir=tmp_path)
    initial = service.create_lora_training_client("thinker/tiny", rank=32, seed=0).result()
    initial_path = initial.save_weights_for_sampler("initial").result().path

    def read(path: str) -> dict[str, torch.Tensor]:
        return load_file(checkpoints.resolve(path, tmp_path) / "adapter_model.safetensors")

    assert result.sampler_path is not None
    before, after = read(initial_path), read(result.sampler_path)
    # (A, B) x 7 projections x 2 layers, + lm_head's (A, B)
    assert before.keys() == after.keys() and len(before) == 2 * 7 * 2 + 2
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert unchanged == []
    # and not merely some entries: every element of every tensor moved
    assert all(bool((before[k] != after[k]).all()) for k in before)


def test_resume_from_checkpoint_matches_an_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    settings = dict(max_steps=20, save_every=5, eval_every=0, lr_schedule="cosine", warmup_steps=3)
    straight = _train(_config("arithmetic", tmp_path / "straight", **settings))

    interrupted = _config("arithmetic", tmp_path / "interrupted", **settings)
    with pytest.raises(Crash):
        asyncio.run(main(interrupted, logger=CrashingLogger(interrupted.log_path, crash_after=12)))
    assert [c["step"] for c in read_jsonl(RunDir(interrupted.log_path).checkpoints)] == [5, 10]
    resumed = _train(interrupted)
    steps = [c["step"] for c in read_jsonl(RunDir(interrupted.log_path).checkpoints)]
    assert steps == [5, 10, 15, 20]

    def weights(run: SLResult, run_dir: Path) -> dict[str, torch.Tensor]:
        assert run.state_path is not None
        return load_file(checkpoints.resolve(run.state_path, run_dir) / "adapter_model.safetensors")

    a, b = weights(straight, tmp_path / "straight"), weights(resumed, tmp_path / "interrupted")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
