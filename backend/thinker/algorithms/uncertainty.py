"""How sure a model is of an answer, from several samples of it: their agreement and the mean
surprisal of their tokens.

- `agreement`: the share of the samples that give the most common answer, answers compared
  after folding case and runs of whitespace (1.0: every sample said the same). It measures the
  model's consistency, not its correctness: a model can agree with itself on a wrong answer.
- `mean_entropy`: the mean, over every sampled token, of its surprisal -log p (nats). Sampled
  tokens' surprisals are an unbiased estimate of the entropy of the distribution they were
  drawn from (E[-log p(x)] = H(p) for x ~ p), so this estimates the mean per-token entropy of
  the sampling distribution (the temperature's, not the model's at T = 1) with no pass over
  the full vocabulary; it is noisy for short answers.
- `not_sure`: agreement below the caller's threshold, or a mean entropy above theirs.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Uncertainty:
    samples: int
    answer: int  # the index of the chosen sample: the most common answer, the likeliest of it
    agreement: float
    distinct_answers: int
    mean_entropy: float | None  # None when no sample has logprobs
    mean_logprob: float  # the chosen sample's mean token logprob (0 without logprobs)
    not_sure: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def answer_key(text: str) -> str:
    """What two answers are compared by: case and runs of whitespace folded."""
    return " ".join(text.lower().split())


def measure(
    texts: Sequence[str],
    logprobs: Sequence[Sequence[float]],
    *,
    agreement_below: float = 0.5,
    entropy_above: float | None = None,
) -> Uncertainty:
    """The uncertainty of the answer `texts` give (one per sample, `logprobs` its tokens')."""
    if not texts or len(texts) != len(logprobs):
        raise ValueError("give one or more samples, each with its token logprobs")
    keys = [answer_key(t) for t in texts]
    counts = Counter(keys)
    means = [statistics.fmean(lp) if lp else 0.0 for lp in logprobs]
    best = max(range(len(texts)), key=lambda i: (counts[keys[i]], means[i]))
    agreement = counts[keys[best]] / len(texts)
    surprisals = [-float(v) for lp in logprobs for v in lp]
    entropy = statistics.fmean(surprisals) if surprisals else None
    unsure = agreement < agreement_below or (
        entropy_above is not None and entropy is not None and entropy > entropy_above
    )
    return Uncertainty(
        samples=len(texts),
        answer=best,
        agreement=agreement,
        distinct_answers=len(counts),
        mean_entropy=entropy,
        mean_logprob=means[best],
        not_sure=unsure,
    )
