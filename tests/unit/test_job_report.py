"""The job report's pure parts on hand-made cases: repeat detection, per-model figures, the
verdict and warnings from given metrics, the answer budget, and a report that cannot fail.

Hand cases for the verdict (margin 0.05; accuracy and win rate floored at chance 0.5):

    exact match 0.15 vs base 0.10: +0.05        -> learned (0.15 - 0.10 is 0.0499... in floats)
    exact match 0.12 vs base 0.10: +0.02        -> not_learned, no_better_than_base
    accuracy    0.56 vs base 0.00: floor 0.5    -> learned (0.56 >= 0.55)
    accuracy    0.54 vs base 0.50               -> not_learned
    mean NLL    1.90 vs base 2.00: -5%          -> learned;  1.95 (-2.5%) -> not_learned
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from thinker.algorithms.common import RunResult
from thinker.errors import BackendError, CheckpointError, ConfigError, DatasetError, NotFoundError
from thinker.jobs.worker import retryable
from thinker.pipeline.config import DPOTraining, RLHFTraining, RLTraining, SLTraining
from thinker.pipeline.evaluate import SampleResult
from thinker.pipeline.report import (
    MAX_TOKENS,
    Metric,
    answer_budget,
    beats,
    build_report,
    figures,
    held_out_conversations,
    judge,
    logged,
    repeats,
    samples,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


@pytest.mark.parametrize(
    "text",
    [
        "ha ha ha ha",  # "ha " four times (a space is added at the end)
        "abababab",
        "!!!!!!!!",
        "7\n7\n7\n7",  # newlines count as spaces: "7 " four times
        "The answer is 4. The answer is 4. The answer is 4. The answer is 4.",
        "<x_37><x_37><x_37><x_37>",
    ],
)
def test_degenerate_answers_repeat(text: str) -> None:
    assert repeats(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "12",
        "ha ha ha",
        "ababab",  # three copies
        "aaaaaaa",  # seven characters: three copies of "aa"
        "def f(x):\n        return x\n        ",  # indentation is whitespace, collapsed
        "The capital of France is Paris, and Paris is lovely.",
    ],
)
def test_ordinary_answers_do_not_repeat(text: str) -> None:
    assert not repeats(text)


def _sample(prediction: str, reference: str, nll: float = 1.0, tokens: float = 1.0) -> SampleResult:
    return SampleResult(
        index=0,
        prompt="q",
        reference=reference,
        prediction=prediction,
        exact_match=prediction == reference,
        nll=nll,
        trained_tokens=tokens,
        stop_reason="stop",
    )


def test_figures_by_hand() -> None:
    """4 answers: one right, one empty, one repeating, one wrong.
    exact match 1/4; empty 1/4; repeating 1/4 ("00000000" is right, so it does not count);
    NLL weighted by tokens: (1*1 + 2*3 + 3*0 + 4*4) / (1 + 3 + 0 + 4) = 23 / 8."""
    results = [
        _sample("00000000", "00000000", nll=1.0, tokens=1),
        _sample("", "5", nll=2.0, tokens=3),
        _sample("xyxyxyxy", "5", nll=3.0, tokens=0),
        _sample("6", "5", nll=4.0, tokens=4),
    ]
    assert figures(results, scored=True) == {
        "num_samples": 4,
        "exact_match": 0.25,
        "mean_nll": 23 / 8,
        "empty_rate": 0.25,
        "repeat_rate": 0.25,
    }
    unscored = figures(results, scored=False)
    assert unscored["exact_match"] is None and unscored["mean_nll"] is None
    assert unscored["empty_rate"] == 0.25
    assert figures([], scored=True) == {
        "num_samples": 0,
        "exact_match": None,
        "mean_nll": None,
        "empty_rate": None,
        "repeat_rate": None,
    }


def _metric(name: str, value: float | None, base: float | None) -> Metric:
    return Metric(name, f"held-out {name}", value, base, higher_is_better=name != "mean_nll")


@pytest.mark.parametrize(
    ("name", "value", "base", "expected"),
    [
        ("exact_match", 0.15, 0.10, True),
        ("exact_match", 0.12, 0.10, False),
        ("exact_match", 0.0, 0.0, False),
        ("reward", 0.30, 0.25, True),
        ("reward", -0.5, -0.52, False),
        ("accuracy", 0.56, 0.0, True),
        ("accuracy", 0.54, 0.5, False),
        ("accuracy", 0.70, 0.66, False),
        ("accuracy", 0.60, None, True),  # no base logged: chance
        ("win_rate", 0.55, 0.5, True),
        ("mean_nll", 1.90, 2.00, True),
        ("mean_nll", 1.95, 2.00, False),
        ("exact_match", 0.5, None, None),
    ],
)
def test_beats_the_base_by_the_margin(
    name: str, value: float, base: float | None, expected: bool | None
) -> None:
    assert beats(_metric(name, value, base)) is expected


def _codes(warnings: list[dict[str, str]]) -> list[str]:
    return [w["code"] for w in warnings]


def test_verdict_and_warnings_from_given_figures() -> None:
    healthy = {"empty_rate": 0.1, "repeat_rate": 0.0}
    assert judge(_metric("exact_match", 0.4, 0.1), healthy) == ("learned", [])

    verdict, warnings = judge(_metric("exact_match", 0.0, 0.0), {"empty_rate": 1.0})
    assert verdict == "not_learned"
    assert _codes(warnings) == ["empty_answers", "no_better_than_base"]
    assert warnings[0]["message"] == "100% of the held-out answers are empty."
    assert "max_steps" in warnings[0]["fix"]
    assert "held-out exact_match (0)" in warnings[1]["message"]
    assert "the base model (0)" in warnings[1]["message"]

    # Better than the base, but half the answers loop: not a model to use.
    verdict, warnings = judge(
        _metric("exact_match", 0.3, 0.0), {"empty_rate": 0.0, "repeat_rate": 0.5}
    )
    assert (verdict, _codes(warnings)) == ("not_learned", ["repeats"])
    assert "learning_rate" in warnings[0]["fix"]

    verdict, warnings = judge(_metric("reward", None, None), {"empty_rate": None})
    assert (verdict, _codes(warnings)) == ("unknown", ["no_held_out"])
    assert "eval_fraction" in warnings[0]["fix"]
    for warning in warnings:
        assert set(warning) == {"code", "message", "cause", "fix"}


def test_samples_pair_both_answers_and_clip_long_text() -> None:
    answers = [_sample(f"a{i}" + "x" * 2000, "r") for i in range(7)]
    base = [_sample(f"b{i}", "r") for i in range(7)]
    shown = samples(answers, base)
    assert len(shown) == 5
    assert shown[1]["base_answer"] == "b1" and shown[1]["reference"] == "r"
    assert shown[0]["answer"].startswith("a0x") and len(shown[0]["answer"]) == 1000


def test_answer_budget() -> None:
    sl = SLTraining(dataset=EXAMPLES / "arithmetic" / "train.jsonl")
    assert answer_budget(sl, [1, 3, 2]) == 3 + 16
    assert answer_budget(sl, [1000]) == MAX_TOKENS
    rl = RLTraining(dataset=EXAMPLES / "rl" / "train.jsonl", max_tokens=12)
    assert answer_budget(rl, [1]) == 12  # RL's own completion budget


def test_held_out_prompts_are_what_each_algorithm_held_out() -> None:
    sl = SLTraining(dataset=EXAMPLES / "arithmetic" / "train.jsonl", eval_fraction=0.1)
    held_out = held_out_conversations(sl)
    assert len(held_out) == 10 and all(c[-1]["role"] == "assistant" for c in held_out)
    dpo = DPOTraining(dataset=EXAMPLES / "preferences" / "train.jsonl", eval_fraction=0.1)
    assert all(c[-1]["role"] == "assistant" for c in held_out_conversations(dpo))
    rl = RLTraining(dataset=EXAMPLES / "rl" / "train.jsonl", eval_fraction=0.0)
    assert held_out_conversations(rl) == []


def test_logged_reads_the_first_and_last_finite_value(tmp_path: Path) -> None:
    rows = [
        {"step": 0, "eval_reward_mean": None},
        {"step": 0, "eval_reward_mean": 0.25},
        {"step": 1, "reward_mean": 0.3},
        {"step": 2, "eval_reward_mean": 0.5},
        {"step": 2, "stage": "rl", "eval_reward_mean": 0.9},  # another stage's
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert logged(tmp_path, "eval_reward_mean") == (0.25, 0.5)
    assert logged(tmp_path, "eval_reward_mean", stage="rl") == (0.9, 0.9)
    assert logged(tmp_path, "eval_accuracy") == (None, None)


def test_nothing_held_out_is_unknown(tmp_path: Path) -> None:
    rl = RLTraining(dataset=EXAMPLES / "rl" / "train.jsonl", eval_fraction=0.0)
    report = asyncio.run(build_report(rl, tmp_path, RunResult(2)))
    assert report["verdict"] == "unknown"
    assert _codes(report["warnings"]) == ["no_held_out"]
    assert report["metric"]["name"] == "reward" and report["held_out"]["num_samples"] == 0
    json.dumps(report, allow_nan=False)


def test_a_report_that_cannot_be_built_is_unknown_not_an_error(tmp_path: Path) -> None:
    sl = SLTraining(dataset=EXAMPLES / "arithmetic" / "train.jsonl")
    missing = RunResult(5, sampler_path="thinker://gone/sampler_weights/000005")
    report = asyncio.run(build_report(sl, tmp_path, missing))
    assert report["verdict"] == "unknown"
    (warning,) = report["warnings"]
    assert warning["code"] == "report_failed" and "CheckpointError" in warning["cause"]
    rlhf = RLHFTraining.model_validate(
        {
            "sl": {"dataset": EXAMPLES / "rlhf" / "demos.jsonl"},
            "rm": {"dataset": EXAMPLES / "preferences" / "train.jsonl"},
            "rl": {"dataset": EXAMPLES / "rlhf" / "prompts.jsonl"},
        }
    )
    report = asyncio.run(build_report(rlhf, tmp_path, RunResult(1)))  # no sampler checkpoint
    assert _codes(report["warnings"]) == ["report_failed"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConfigError("bad"), False),
        (DatasetError("bad rows"), False),
        (CheckpointError("gone"), False),
        (BackendError("no CUDA"), False),
        (MemoryError(), False),
        (torch.OutOfMemoryError("CUDA out of memory"), False),
        (RuntimeError("a crash"), True),
        (OSError("disk went away"), True),
        (NotFoundError("x"), True),
    ],
)
def test_which_failures_a_resume_may_fix(error: BaseException, expected: bool) -> None:
    assert retryable(error) is expected
