"""The job report: whether training learned, from held-out figures of the final weights
against the base (or starting) model's, with plain-words warnings and a few sample answers.

The metric: SL, greedy exact match on at most 50 held-out examples (mean NLL per token where
the references are long answers that never match exactly); DPO, the held-out preference
accuracy dpo.py logs; RL, the held-out mean reward rl.py logs (its step-0 value is the base);
RLHF, the judge's held-out win rate of the RL stage over the SL stage. Every algorithm also
samples greedy answers of both models to the held-out prompts, for the empty and repeat rates
and the samples. See TRAINING_GUIDE.md, "Did it learn?", for the thresholds.
"""

from __future__ import annotations

import gc
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from thinker.algorithms.common import RunResult, make_service
from thinker.data import split_train_eval
from thinker.data.preferences import load_preference_pairs
from thinker.data.problems import load_problems
from thinker.pipeline.config import (
    DPOTraining,
    RLHFTraining,
    RLTraining,
    RMTraining,
    SLTraining,
    TrainingSection,
)
from thinker.pipeline.evaluate import SampleResult, eval_rendering, score, sl_held_out, summarize
from thinker.renderers import Message, renderer_for
from thinker.runs import RunDir, read_metrics

MAX_SAMPLES = 50  # held-out examples answered by each model
MAX_TOKENS = 256  # the most tokens of one answer
TOKEN_MARGIN = 16  # tokens allowed beyond the longest reference
LONG_ANSWER_TOKENS = 32  # a median reference longer than this: judge SL by NLL, not exact match
SHOWN_SAMPLES = 5
MARGIN = 0.05  # exact match, reward, accuracy, win rate: absolute gain needed over the base
NLL_DROP = 0.05  # mean NLL: relative fall needed below the base
CHANCE = 0.5  # accuracy and win rate: the floor their base is taken from
WARN_SHARE = 0.5  # share of empty (or repeating) answers that raises a warning
TEXT_LIMIT = 1000  # characters of a sample's prompt, reference or answer kept in the report
# A piece of 2..100 characters repeated 4 or more times in a row.
_REPEAT = re.compile(r"(.{2,100}?)\1{3,}", re.DOTALL)
T = TypeVar("T")


@dataclass(frozen=True)
class Metric:
    """The figure the verdict is read from."""

    name: str  # exact_match | mean_nll | accuracy | reward | win_rate
    label: str
    value: float | None  # None: nothing held out
    base: float | None
    higher_is_better: bool = True
    base_label: str = "the base model"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "value": _finite(self.value),
            "base": _finite(self.base),
            "higher_is_better": self.higher_is_better,
        }


async def build_report(
    section: TrainingSection,
    run_dir: Path,
    result: RunResult,
    start_sampler_path: str | None = None,
) -> dict[str, Any]:
    """The JobReport of a finished run (see HOW_TO_USE.md). Never raises: a failure becomes
    verdict "unknown" with a `report_failed` warning carrying the error.

    Args:
        section: The job's training section.
        run_dir: The run directory (its metrics.jsonl; the local engine's storage).
        result: How training ended (its final sampler checkpoint is the model judged).
        start_sampler_path: Sampler weights the job started from (a directory, or a path
            its backend resolves); None: the base model.
    """
    try:
        return await _build(section, run_dir, result, start_sampler_path)
    except Exception as e:  # noqa: BLE001 - the report must never fail the job
        return failed_report(f"{type(e).__name__}: {e}")


async def _build(
    section: TrainingSection, run_dir: Path, result: RunResult, start: str | None
) -> dict[str, Any]:
    prompts = held_out_conversations(section)[:MAX_SAMPLES]
    answers: list[SampleResult] = []
    base_answers: list[SampleResult] = []
    reference_tokens: list[int] = []
    if prompts:
        if result.sampler_path is None:
            raise RuntimeError("training left no sampler checkpoint to evaluate")
        answers, reference_tokens = await _answer(section, run_dir, result.sampler_path, prompts)
        base_answers, _ = await _answer(section, run_dir, start, prompts)
    scored = isinstance(section, SLTraining)
    held_out, base = figures(answers, scored), figures(base_answers, scored)
    long_answers = statistics.median(reference_tokens or [0]) > LONG_ANSWER_TOKENS
    metric = _metric(section, run_dir, result, held_out, base, start is not None, long_answers)
    held_out[metric.name], base[metric.name] = _finite(metric.value), _finite(metric.base)
    verdict, warnings = judge(metric, held_out)
    return {
        "verdict": verdict,
        "metric": metric.to_json(),
        "held_out": held_out,
        "base": base,
        "warnings": warnings,
        "samples": samples(answers, base_answers),
    }


def failed_report(error: str) -> dict[str, Any]:
    """The report of a run whose report could not be computed."""
    return {
        "verdict": "unknown",
        "metric": None,
        "held_out": None,
        "base": None,
        "warnings": [
            _warning(
                "report_failed",
                "The report could not be computed; training itself finished and its "
                "checkpoints are usable.",
                error[:TEXT_LIMIT],
                "Try the model in the playground; report the error if it persists.",
            )
        ],
        "samples": [],
    }


# ---- held-out prompts and answers ------------------------------------------------------
def held_out_conversations(section: TrainingSection) -> list[list[Message]]:
    """The held-out prompts as conversations ending in their reference answer: SL's held-out
    examples, DPO's held-out prompts with the chosen answer, RL's (RLHF: its RL stage's)
    held-out problems with their answer ("" where they have none)."""
    if isinstance(section, SLTraining):
        return sl_held_out(section)
    if isinstance(section, DPOTraining):
        pairs = _held_out(section, load_preference_pairs)
        return [p.prompt_messages + p.chosen_messages for p in pairs]
    if isinstance(section, RLHFTraining | RLTraining):
        rl = section.rl if isinstance(section, RLHFTraining) else section
        problems = _held_out(rl, load_problems)
        references = [str(p.row.get("reference", p.answer) or "") for p in problems]
        return [
            [*p.messages, {"role": "assistant", "content": r}]
            for p, r in zip(problems, references, strict=True)
        ]
    return []  # an rm section: a judge, not a policy


def _held_out(section: Any, load: Callable[[Path], list[T]]) -> list[T]:
    """The items the algorithm held out: `eval_dataset`, else its split of `dataset`."""
    if section.eval_dataset is not None:
        return load(section.eval_dataset)
    return split_train_eval(load(section.dataset), section.eval_fraction, section.seed)[1]


async def _answer(
    section: TrainingSection,
    run_dir: Path,
    model_path: str | None,
    conversations: list[list[Message]],
) -> tuple[list[SampleResult], list[int]]:
    """Greedy answers (and NLL of the references) of one model, sampler weights or the base
    model for None, and the references' lengths in tokens. One model is loaded at a time,
    and let go before the next."""
    service = make_service(section, run_dir)
    if model_path is not None:
        client = await service.create_sampling_client(model_path=model_path)
    else:
        client = await service.create_sampling_client(base_model=section.base_model)
    tokenizer = client.get_tokenizer()
    renderer = renderer_for(section.renderer, section.base_model, tokenizer)
    reference_tokens = [_tokens(tokenizer, c) for c in conversations]
    train_on_what, max_length = eval_rendering(section)
    results = await score(
        conversations,
        client,
        renderer,
        train_on_what=train_on_what,
        max_length=max_length,
        max_tokens=answer_budget(section, reference_tokens),
        temperature=0.0,
        seed=section.seed,
    )
    del client, service
    gc.collect()
    return results, reference_tokens


def _tokens(tokenizer: Any, conversation: list[Message]) -> int:
    return len(tokenizer.encode(conversation[-1]["content"], add_special_tokens=False))


def answer_budget(section: TrainingSection, reference_tokens: Sequence[int]) -> int:
    """Tokens per answer: RL's own completion budget, else the longest reference plus a
    margin; never more than MAX_TOKENS."""
    if isinstance(section, RLHFTraining):
        return min(section.rl.max_tokens, MAX_TOKENS)
    if isinstance(section, RLTraining):
        return min(section.max_tokens, MAX_TOKENS)
    return min(max(reference_tokens, default=0) + TOKEN_MARGIN, MAX_TOKENS)


# ---- figures, metric, verdict --------------------------------------------------------
def repeats(text: str) -> bool:
    """Whether an answer degenerates into a loop: with every run of whitespace made one
    space (and one added at the end), some piece of 2 to 100 characters appears 4 or more
    times in a row ("ha ha ha ha", "abababab", "!!!!!!!!", a sentence said four times)."""
    return _REPEAT.search(" ".join(text.split()) + " ") is not None


def figures(results: list[SampleResult], scored: bool) -> dict[str, Any]:
    """One model's held-out figures. `scored`: exact match and NLL mean something (SL).
    An answer equal to its reference never counts as repeating ("10000000" is right)."""
    n = len(results)
    summary = summarize(results) if scored and n else {}
    return {
        "num_samples": n,
        "exact_match": _finite(summary.get("exact_match")),
        "mean_nll": _finite(summary.get("eval_nll")),
        "empty_rate": _share([not r.prediction.strip() for r in results]),
        "repeat_rate": _share([repeats(r.prediction) and not r.exact_match for r in results]),
    }


def _metric(
    section: TrainingSection,
    run_dir: Path,
    result: RunResult,
    held_out: dict[str, Any],
    base: dict[str, Any],
    from_start: bool,
    long_answers: bool,
) -> Metric:
    """SL: exact match, or the NLL where the references are long answers (median over
    LONG_ANSWER_TOKENS tokens) that greedy decoding never matches word for word."""
    base_label = "the starting model" if from_start else "the base model"
    if isinstance(section, SLTraining):
        if long_answers:
            return Metric(
                "mean_nll",
                "held-out loss (mean NLL per token)",
                held_out["mean_nll"],
                base["mean_nll"],
                higher_is_better=False,
                base_label=base_label,
            )
        label = "held-out exact match"
        return Metric(
            "exact_match", label, held_out["exact_match"], base["exact_match"], True, base_label
        )
    if isinstance(section, DPOTraining):
        first, last = logged(run_dir, "eval_accuracy")
        return Metric("accuracy", "held-out preference accuracy", last, first, True, base_label)
    if isinstance(section, RMTraining):
        first, last = logged(run_dir, "rm_eval_accuracy")
        label = "held-out preference accuracy (judged)"
        return Metric("accuracy", label, last, first, True, base_label)
    if isinstance(section, RLHFTraining):
        win = _finite(result.final_metrics.get("eval_win_rate_vs_sl"))
        label = "held-out win rate of the RL stage over the SL stage (judged)"
        return Metric(
            "win_rate", label, win, CHANCE if win is not None else None, True, "the SL stage"
        )
    first, last = logged(run_dir, "eval_reward_mean", stage=None)
    return Metric("reward", "held-out mean reward", last, first, True, base_label)


def logged(run_dir: Path, key: str, stage: str | None = None) -> tuple[float | None, float | None]:
    """The first and last finite values of `key` in the run's metrics.jsonl (of `stage`)."""
    values = [
        float(row[key])
        for row in read_metrics(RunDir(run_dir).metrics)
        if row.get("stage") == stage and isinstance(row.get(key), int | float)
    ]
    values = [v for v in values if math.isfinite(v)]
    return (values[0], values[-1]) if values else (None, None)


def judge(metric: Metric, held_out: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """The verdict and the warnings, from the metric and the model's held-out figures.

    "learned": the metric beats the base by the margin and at most half the answers are
    empty or repeating; "unknown": nothing held out (or no base to compare with);
    "not_learned" otherwise.
    """
    if metric.value is None:
        return "unknown", [NO_HELD_OUT]
    warnings = []
    empty, repeat = held_out.get("empty_rate"), held_out.get("repeat_rate")
    if empty is not None and empty >= WARN_SHARE:
        warnings.append(_empty_warning(empty))
    if repeat is not None and repeat >= WARN_SHARE:
        warnings.append(_repeat_warning(repeat))
    better = beats(metric)
    if better is None:
        return "unknown", warnings
    if not better:
        warnings.append(_no_better_warning(metric))
    return ("learned" if better and not warnings else "not_learned"), warnings


def beats(metric: Metric) -> bool | None:
    """Whether the metric beats its base by the margin (None: no base to compare with).

    exact match and reward: value >= base + 0.05; accuracy and win rate: value >=
    max(base, 0.5) + 0.05 (chance is their floor); mean NLL: value <= base * (1 - 0.05).
    """
    value, base = metric.value, metric.base
    if metric.name in ("accuracy", "win_rate"):
        base = max(base if base is not None else CHANCE, CHANCE)
    if value is None or base is None:
        return None
    if not metric.higher_is_better:
        return value <= base * (1 - NLL_DROP) + 1e-9
    return value >= base + MARGIN - 1e-9  # 1e-9: 0.15 - 0.10 is 0.0499999... in floats


def samples(answers: list[SampleResult], base_answers: list[SampleResult]) -> list[dict[str, str]]:
    """The first few held-out examples, each with both models' answers."""
    return [
        {
            "prompt": _clip(a.prompt),
            "reference": _clip(a.reference),
            "answer": _clip(a.prediction),
            "base_answer": _clip(b.prediction),
        }
        for a, b in zip(answers[:SHOWN_SAMPLES], base_answers, strict=False)
    ]


# ---- warnings ----------------------------------------------------------------------------
def _warning(code: str, message: str, cause: str, fix: str) -> dict[str, str]:
    return {"code": code, "message": message, "cause": cause, "fix": fix}


NO_HELD_OUT = _warning(
    "no_held_out",
    "Nothing was held out, so there is no way to tell whether the model learned.",
    "Every row was used for training: eval_fraction is 0 and no evaluation dataset was given.",
    "Set eval_fraction to 0.1 (or give an evaluation dataset) and train again.",
)


def _empty_warning(rate: float) -> dict[str, str]:
    return _warning(
        "empty_answers",
        f"{_percent(rate)} of the held-out answers are empty.",
        "The model stops at once: usually too few steps, above all for a model trained "
        "from scratch.",
        "Raise max_steps (or num_epochs) and train again.",
    )


def _repeat_warning(rate: float) -> dict[str, str]:
    return _warning(
        "repeats",
        f"{_percent(rate)} of the held-out answers repeat the same words over and over.",
        "Training stopped too early, or the learning rate is so high that it broke the model.",
        "Raise max_steps (or num_epochs), or lower learning_rate, and train again.",
    )


def _no_better_warning(metric: Metric) -> dict[str, str]:
    assert metric.value is not None
    base = f"{metric.base:.3g}" if metric.base is not None else "chance"
    return _warning(
        "no_better_than_base",
        f"The {metric.label} ({metric.value:.3g}) is not clearly better than that of "
        f"{metric.base_label} ({base}).",
        "Too few steps or too low a learning rate to change the answers, or held-out rows "
        "that ask for something the training rows do not teach.",
        "Raise max_steps (or num_epochs) or learning_rate; check that the training data "
        "teaches what the held-out rows ask.",
    )


# ---- small helpers -----------------------------------------------------------------------
def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _percent(rate: float) -> str:
    return f"{round(rate * 100)}%"


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"
