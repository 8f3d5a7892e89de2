"""Exact match of a final answer, math style, with the Tinker cookbook's format term.

reward = correct_answer + format_weight * (correct_format - 1), where correct_format means the
completion ended on its own (not cut by max_tokens) and an answer could be extracted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from thinker.errors import ConfigError
from thinker.rewards.base import Completion, Problem

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_PHRASE = re.compile(r"answer\s*(?:is\b|:)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_EDGES = " \t\n*$`\"'"
_SHORT_ANSWER_CHARS = 64


def extract_answer(text: str) -> str | None:
    """The final answer in `text`, or None if there is none.

    Tried in order: the last `\\boxed{...}`; the text after the last "answer is" or "Answer:"
    (to the end of its sentence); the whole text when it is one short token ("7", "cba");
    the last number.
    """
    for extract in (_boxed, _after_answer_phrase, _short_answer, _last_number):
        answer = extract(text)
        if answer:
            return answer
    return None


def answers_match(predicted: str, reference: str) -> bool:
    """Equal once stripped and case-folded, or equal as numbers ("7" and "7.0", "1/2", "0.5")."""
    a, b = _clean(predicted).casefold(), _clean(reference).casefold()
    if a == b:
        return True
    x, y = _as_number(a), _as_number(b)
    return x is not None and x == y


@dataclass(frozen=True)
class ExactMatchReward:
    """1 for the reference answer, 0 otherwise; minus `format_weight` for a bad format."""

    format_weight: float = 0.1

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        if problem.answer is None:
            raise ConfigError("the exact_match reward needs an 'answer' in every problem row")
        return [self.score(c, problem.answer) for c in completions]

    def score(self, completion: Completion, answer: str) -> float:
        extracted = extract_answer(completion.text)
        correct_format = completion.terminated and extracted is not None
        correct_answer = extracted is not None and answers_match(extracted, answer)
        return float(correct_answer) + self.format_weight * (float(correct_format) - 1.0)


def _boxed(text: str) -> str | None:
    starts = list(_BOXED.finditer(text))
    if not starts:
        return None
    depth, begin = 1, starts[-1].end()
    for i in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return _clean(text[begin:i]) or None
    return None  # unbalanced: the box was never closed


def _after_answer_phrase(text: str) -> str | None:
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if not phrases:
        return None
    rest = text[phrases[-1].end() :].lstrip(_EDGES + ":").split("\n", 1)[0]
    return _clean(re.split(r"[.!?]\s", rest, maxsplit=1)[0]) or None


def _short_answer(text: str) -> str | None:
    stripped = _clean(text)
    if stripped and len(stripped) <= _SHORT_ANSWER_CHARS and not any(c.isspace() for c in stripped):
        return stripped
    return None


def _last_number(text: str) -> str | None:
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "") if numbers else None


def _clean(answer: str) -> str:
    """Without surrounding spaces, markdown emphasis, `$`, quotes or a final full stop."""
    return answer.strip(_EDGES).rstrip(".!,;").strip(_EDGES)


def _as_number(answer: str) -> Fraction | None:
    if _THOUSANDS.fullmatch(answer):
        answer = answer.replace(",", "")
    try:
        return Fraction(answer)
    except (ValueError, ZeroDivisionError):
        return None
