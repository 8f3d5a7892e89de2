"""Which of two models is better, and how sure that is: the statistics of an A/B evaluation,
and a leaderboard from many pairwise results.

An A/B evaluation puts two models, A (the baseline) and B (the candidate), on the same prompts;
each prompt gives one paired outcome: B wins (+1), a tie (0) or B loses (-1), by a scorer
(exact match, tests, a reward model) or by a person. From the n outcomes:

- `win_rate`: B's share of the prompts, a tie counting one half: (wins + ties / 2) / n (the
  convention of AlpacaEval and Chatbot Arena). 0.5 is no difference.
- `interval`: the 95% bootstrap interval of that win rate: the n outcomes resampled with
  replacement `resamples` times (seeded), the 2.5th and 97.5th percentiles of the resampled
  win rates (scipy.stats.bootstrap, percentile method).
- `p_value`: the paired sign test: of the prompts that were not ties, is B's share of wins
  different from one half? Exact two-sided binomial test (scipy.stats.binomtest). Ties carry
  no sign and are left out of the test; the verdict says how many there were.
- `verdict`: one line, "B is better: 64% win rate [58%, 70%], p = 0.0004, n = 200", with "A is
  better" (A's win rate and interval) below one half, and "No significant difference" when
  p >= alpha.

Across more than two models, `bradley_terry` fits one strength per model to every pairwise
result on the same prompts (Bradley-Terry: P(i beats j) = s_i / (s_i + s_j)), by Hunter's
minorization-maximization iterations (Hunter 2004, "MM algorithms for generalized
Bradley-Terry models"); ties count half a win each way. Ratings are on the Elo scale:
1000 + 400 log10(s_i / geometric mean of s), so a 400-point gap is 10:1 odds.

`required_samples` says how many non-tied prompts an A/B needs to call a true win rate
significant with a given power (exact binomial power of the sign test), for the guide's table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05
CONFIDENCE = 0.95
RESAMPLES = 10_000
ELO_BASE, ELO_SCALE = 1000.0, 400.0


@dataclass(frozen=True)
class ABResult:
    """B against A on n paired prompts."""

    a: str
    b: str
    n: int
    wins: int  # prompts B won
    ties: int
    losses: int  # prompts B lost (A won)
    win_rate: float  # B's, a tie counting one half
    interval: tuple[float, float]  # bootstrap 95% interval of win_rate
    p_value: float  # sign test, ties left out
    significant: bool  # p_value < alpha
    verdict: str

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["interval"] = list(self.interval)
        return record


def outcome(score_a: float | None, score_b: float | None) -> int:
    """One prompt's paired outcome from the two models' scores: +1 when B scored higher, -1
    when A did, 0 for equal scores (a missing score loses to any score; two missing tie)."""
    if score_a == score_b:
        return 0
    if score_a is None:
        return 1
    if score_b is None:
        return -1
    return 1 if score_b > score_a else -1


def sign_test(wins: int, losses: int) -> float:
    """The two-sided exact sign test's p-value for `wins` against `losses` (ties left out by
    the caller): 1.0 when nothing was decided."""
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be >= 0, got {wins} wins and {losses} losses")
    if wins + losses == 0:
        return 1.0
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue)


def bootstrap_interval(
    values: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values` (seeded)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("a bootstrap interval needs at least one value")
    if np.all(data == data[0]):  # every resample has the same mean
        return float(data[0]), float(data[0])
    result = stats.bootstrap(
        (data,),
        np.mean,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
        vectorized=True,
        batch=max(1, 20_000_000 // data.size),  # resamples at once: ~160 MB of indices
    )
    low, high = result.confidence_interval
    return float(low), float(high)


def compare(
    outcomes: Sequence[int],
    a: str = "A",
    b: str = "B",
    *,
    alpha: float = ALPHA,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> ABResult:
    """B against A from the paired outcomes (+1: B won that prompt, 0: tie, -1: A won)."""
    bad = sorted({o for o in outcomes if o not in (-1, 0, 1)})
    if bad:
        raise ValueError(f"outcomes must be -1, 0 or +1, got {bad}")
    n = len(outcomes)
    if n == 0:
        raise ValueError(f"{b} against {a}: no paired prompt to compare")
    wins, losses = outcomes.count(1), outcomes.count(-1)
    ties = n - wins - losses
    halves = [(o + 1) / 2 for o in outcomes]  # 1 won, 0.5 tie, 0 lost
    win_rate = sum(halves) / n
    interval = bootstrap_interval(halves, resamples=resamples, seed=seed)
    p_value = sign_test(wins, losses)
    significant = p_value < alpha
    return ABResult(
        a=a,
        b=b,
        n=n,
        wins=wins,
        ties=ties,
        losses=losses,
        win_rate=win_rate,
        interval=interval,
        p_value=p_value,
        significant=significant,
        verdict=_verdict(a, b, n, ties, win_rate, interval, p_value, significant),
    )


def _verdict(  # noqa: PLR0913
    a: str,
    b: str,
    n: int,
    ties: int,
    win_rate: float,
    interval: tuple[float, float],
    p_value: float,
    significant: bool,
) -> str:
    low, high = interval
    if significant and win_rate < 0.5:  # A is the better: say it in A's terms
        head, rate, low, high = f"{a} is better", 1 - win_rate, 1 - high, 1 - low
        whose = ""
    elif significant:
        head, rate, whose = f"{b} is better", win_rate, ""
    else:
        head, rate, whose = f"No significant difference between {a} and {b}", win_rate, f"{b}'s "
    line = (
        f"{head}: {whose}{_percent(rate)} win rate [{_percent(low)}, {_percent(high)}], "
        f"{format_p(p_value)}, n = {n}"
    )
    if ties:
        line += f" ({ties} {'tie' if ties == 1 else 'ties'}, left out of the sign test)"
    return line


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def format_p(p_value: float) -> str:
    """'p = 0.0004', 'p = 0.03', 'p = 0.62', or 'p < 0.0001'."""
    if p_value < 1e-4:
        return "p < 0.0001"
    if p_value >= 0.01:
        return f"p = {p_value:.2f}"
    return f"p = {p_value:.1g}" if p_value >= 1e-3 else f"p = {p_value:.4f}"


# ---- many models ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Pairing:
    """Every result of model `a` against model `b` on one eval set."""

    a: str
    b: str
    a_wins: int
    b_wins: int
    ties: int = 0


@dataclass(frozen=True)
class Rating:
    """A model's place on the leaderboard."""

    model: str
    rank: int  # 1: the strongest
    rating: float  # Elo scale: 1000 at the geometric mean strength
    strength: float  # Bradley-Terry s_i, geometric mean 1
    wins: float  # ties counted one half
    games: int


def bradley_terry(
    pairings: Iterable[Pairing],
    *,
    prior: float = 0.5,
    tolerance: float = 1e-10,
    max_iterations: int = 10_000,
) -> list[Rating]:
    """The Bradley-Terry leaderboard of every model in `pairings`, strongest first.

    `prior`: virtual wins each way added to every pair that met, so that a model that never
    won (or never lost) keeps a finite rating; it pulls ratings slightly together (0: the plain
    maximum-likelihood fit, which needs every model to have won and lost at least once).
    """
    models: list[str] = []
    wins: dict[tuple[str, str], float] = {}  # (i, j): times i beat j
    for p in pairings:
        if p.a == p.b:
            raise ValueError(f"a model cannot be paired with itself ({p.a!r})")
        for name in (p.a, p.b):
            if name not in models:
                models.append(name)
        for i, j, won in ((p.a, p.b, p.a_wins), (p.b, p.a, p.b_wins)):
            wins[(i, j)] = wins.get((i, j), 0.0) + won + p.ties / 2
    if len(models) < 2:
        raise ValueError("a leaderboard needs results between at least two models")
    for i, j in list(wins):
        wins[(i, j)] += prior
    index = {m: k for k, m in enumerate(models)}
    k = len(models)
    w = np.zeros((k, k))
    for (i, j), count in wins.items():
        w[index[i], index[j]] += count
    games = w + w.T  # n_ij: games between i and j
    total_wins = w.sum(axis=1)
    if np.any(total_wins <= 0):
        never = [models[i] for i in np.flatnonzero(total_wins <= 0)]
        raise ValueError(f"{', '.join(never)} never won: give prior > 0 for a finite rating")
    strength = np.ones(k)
    for _ in range(max_iterations):  # Hunter's MM update: s_i = W_i / sum_j n_ij / (s_i + s_j)
        denominator = (games / (strength[:, None] + strength[None, :])).sum(axis=1)
        updated = total_wins / denominator
        updated /= math.exp(float(np.log(updated).mean()))  # geometric mean 1
        converged = np.max(np.abs(updated - strength) / strength) < tolerance
        strength = updated
        if converged:
            break
    played = (games - 2 * prior * (games > 0)).sum(axis=1)  # without the virtual games
    real_wins = total_wins - prior * (w > 0).sum(axis=1)
    order = sorted(range(k), key=lambda i: -strength[i])
    return [
        Rating(
            model=models[i],
            rank=place + 1,
            rating=ELO_BASE + ELO_SCALE * math.log10(float(strength[i])),
            strength=float(strength[i]),
            wins=float(real_wins[i]),
            games=round(float(played[i])),
        )
        for place, i in enumerate(order)
    ]


def required_samples(
    win_rate: float, *, power: float = 0.8, alpha: float = ALPHA, limit: int = 100_000
) -> int:
    """The fewest non-tied prompts from which on the two-sided sign test calls a true win rate
    of `win_rate` significant at `alpha` with probability `power` or more, at that count and
    every larger one (the exact test's power is a saw-tooth in n: the first n that reaches
    `power` can fall below it again at n + 1)."""
    if not 0 < win_rate < 1 or win_rate == 0.5:
        raise ValueError(f"win_rate must be in (0, 1) and not 0.5, got {win_rate}")
    # The normal approximation's count; the exact one is within a small factor of it, and
    # the power only rises past a few times it: the search stops there.
    z_alpha, z_power = stats.norm.ppf(1 - alpha / 2), stats.norm.ppf(power)
    spread = z_alpha * 0.5 + z_power * math.sqrt(win_rate * (1 - win_rate))
    approximate = (spread / (win_rate - 0.5)) ** 2
    if approximate > limit:
        raise ValueError(f"more than {limit} prompts needed for a win rate of {win_rate}")
    n = np.arange(1, min(limit, 4 * math.ceil(approximate) + 200) + 1)
    short = np.flatnonzero(sign_test_power(n, win_rate, alpha) < power)
    if short.size and short[-1] == n.size - 1:
        raise ValueError(f"more than {limit} prompts needed for a win rate of {win_rate}")
    return int(n[short[-1] + 1]) if short.size else 1


def sign_test_power(n: np.ndarray, win_rate: float, alpha: float = ALPHA) -> np.ndarray:
    """P(the exact two-sided sign test rejects at `alpha`) with `n` non-tied prompts whose
    wins are Binomial(n, win_rate). Under one half the test's p-value for c wins is
    2 P(X <= min(c, n - c)), so it rejects at c <= k and c >= n - k, k the largest count with
    P(X <= k) < alpha / 2."""
    k = stats.binom.ppf(alpha / 2, n, 0.5) - 1
    return np.asarray(stats.binom.cdf(k, n, win_rate) + stats.binom.sf(n - k - 1, n, win_rate))


# ---- a judge's calibration ------------------------------------------------------------------
def calibration(probabilities: Sequence[float], bins: int = 5) -> dict[str, Any]:
    """How well a pairwise judge's probabilities match how often it is right, on pairs whose
    first response is the right one (P(first beats second) = p): it predicts the first when
    p > 1/2, with confidence max(p, 1 - p), and is right then (a tie, p = 1/2, counts one
    half). The confidences fall in `bins` equal bins over [1/2, 1]; `ece` is the expected
    calibration error, sum over bins of (share of pairs) x |accuracy - mean confidence|.
    A calibrated judge right 70% of the time says 0.7."""
    if not probabilities:
        raise ValueError("calibration needs at least one judged pair")
    rows = [(max(p, 1 - p), 1.0 if p > 0.5 else 0.5 if p == 0.5 else 0.0) for p in probabilities]
    table = []
    for k in range(bins):
        low, high = 0.5 + 0.5 * k / bins, 0.5 + 0.5 * (k + 1) / bins
        inside = [(c, a) for c, a in rows if low <= c < high or (k == bins - 1 and c == high)]
        if inside:
            table.append(
                {
                    "low": low,
                    "high": high,
                    "pairs": len(inside),
                    "confidence": sum(c for c, _ in inside) / len(inside),
                    "accuracy": sum(a for _, a in inside) / len(inside),
                }
            )
    n = len(rows)
    ece = sum(b["pairs"] / n * abs(b["accuracy"] - b["confidence"]) for b in table)
    return {
        "ece": ece,
        "confidence": sum(c for c, _ in rows) / n,
        "accuracy": sum(a for _, a in rows) / n,
        "bins": table,
    }
