"""`grad_clip_norm` bounds the gradient of the mean loss, not of the engine's summed loss, and
each step says whether it clipped (`grad_clipped`).

One SL step on thinker/tiny, the same data and seed each time: unclipped, it reports the
summed loss's norm G over n trained tokens, so the mean loss's norm is G / n. A cap a little
below that clips; a little above, it does not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from thinker.algorithms.common import adam_params
from thinker.algorithms.sl import SLConfig, main
from thinker.files import read_jsonl
from thinker.runs import RunLogger

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def _one_step(run_dir: Path, grad_clip_norm: float) -> dict[str, float]:
    config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        eval_fraction=0.0,
        batch_size=8,
        max_steps=1,
        save_every=0,
        eval_every=0,
        grad_clip_norm=grad_clip_norm,
        log_path=run_dir,
    )
    asyncio.run(main(config, logger=RunLogger(run_dir)))
    (metrics,) = [m for m in read_jsonl(run_dir / "metrics.jsonl") if m["step"] == 1]
    return metrics


def test_the_cap_is_on_the_mean_loss_and_each_step_says_if_it_clipped(tmp_path: Path) -> None:
    free = _one_step(tmp_path / "free", 0.0)
    assert free["grad_clipped"] == 0.0
    per_token = free["grad_norm"] / free["num_tokens"]
    # The summed loss's norm is far above the mean's: a cap of 1 on the sum would clip.
    assert free["grad_norm"] > 1 and free["num_tokens"] > 10
    below = _one_step(tmp_path / "below", 0.9 * per_token)
    above = _one_step(tmp_path / "above", 1.1 * per_token)
    assert below["grad_norm"] == pytest.approx(free["grad_norm"], rel=1e-4)
    assert (below["grad_clipped"], above["grad_clipped"]) == (1.0, 0.0)


def test_the_engines_cap_is_the_setting_times_the_loss_units() -> None:
    config = SLConfig(dataset=EXAMPLES / "arithmetic" / "train.jsonl", grad_clip_norm=0.5)
    assert adam_params(config, 0, 10, 300).grad_clip_norm == pytest.approx(150.0)
    assert adam_params(config, 0, 10).grad_clip_norm == pytest.approx(0.5)  # DPO: a mean
    off = SLConfig(dataset=EXAMPLES / "arithmetic" / "train.jsonl", grad_clip_norm=0)
    assert adam_params(off, 0, 10, 300).grad_clip_norm == 0.0
