"""/api/evaluations: the statistics of an A/B comparison a person judged (the playground's blind
A/B), computed as an eval job computes them (algorithms/significance.py)."""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from thinker.algorithms import significance

router = APIRouter(prefix="/evaluations", tags=["evaluations"])
MAX_OUTCOMES = 100_000

Outcome = Annotated[StrictInt, Field(ge=-1, le=1)]


class CompareRequest(BaseModel):
    """Paired outcomes of B against A, one per prompt: 1 B was better, 0 a tie, -1 A was."""

    model_config = ConfigDict(extra="forbid")

    a: str = Field("A", min_length=1, max_length=300, description="A's name (the baseline).")
    b: str = Field("B", min_length=1, max_length=300, description="B's name (the candidate).")
    outcomes: list[Outcome] = Field(min_length=1, max_length=MAX_OUTCOMES)
    alpha: float = Field(0.05, gt=0, lt=1, allow_inf_nan=False)
    resamples: StrictInt = Field(10_000, ge=100, le=100_000)
    seed: StrictInt = Field(0, ge=0, le=2**31 - 1)


class Comparison(BaseModel):
    """B against A on the same prompts (significance.compare)."""

    a: str
    b: str
    n: int
    wins: int  # prompts B won
    ties: int
    losses: int  # prompts B lost
    win_rate: float  # B's, a tie counting one half
    interval: Annotated[list[float], Field(min_length=2, max_length=2)]  # bootstrap 95%, win_rate's
    p_value: float  # the sign test's, ties left out
    significant: bool
    verdict: str  # "B is better: 64% win rate [58%, 70%], p = 0.0004, n = 200"


class CompareResult(Comparison):
    # Non-tied prompts for 80% power at B's share of the decided prompts seen (half a win and
    # half a loss added); None before any is decided, at one half, or past 100,000.
    needed: int | None


# ---- what an eval job wrote (algorithms/evaluation.py), as the API serves it ------------------
class EvalModelFigures(BaseModel):
    """One model of an eval job: its mean score with the bootstrap 95% interval, its NLL."""

    name: str  # as the comparisons and the leaderboard name it
    model: str  # what answered: a base model or sampler weights
    id: str | None = None  # the library model's, when it was one
    score_mean: float | None = None  # None: no prompt scored
    score_interval: Annotated[list[float], Field(min_length=2, max_length=2)] | None = None
    nll_mean: float | None = None  # mean NLL per token of the references (None: not computed)
    prompts: int
    terminated_rate: float | None = None  # answers that ended themselves, not at max_tokens


class Rating(BaseModel):
    """A model's place on a Bradley-Terry leaderboard (Elo scale)."""

    model: str
    rank: int  # 1: the strongest
    rating: float  # 1000 at the geometric mean strength
    strength: float  # Bradley-Terry s_i, geometric mean 1
    wins: float  # ties counted one half
    games: int


class EvalSummary(BaseModel):
    """An eval job's evaluation.json: every model, every pair, the leaderboard."""

    dataset: str
    prompts: int
    scorer: str
    samples: int
    temperature: float
    alpha: float
    models: list[EvalModelFigures]  # in the job's order: its base model (A) first
    comparisons: list[Comparison]  # each pair, the earlier model as A
    leaderboard: list[Rating]  # strongest first


class ModelAnswers(BaseModel):
    """One model's part of one prompt's row."""

    model: str
    score: float | None = None
    nll: float | None = None
    nll_tokens: float = 0.0
    answers: list[str] | None = None  # None for scorer nll (nothing generated)
    terminated: list[bool] | None = None
    scores: list[float | None] | None = None
    judge_replies: list[str] | None = None  # scorer llm_judge: the judge's reply to each answer


class EvalRow(BaseModel):
    """One prompt: its text, its reference, every model's answers and scores."""

    index: int
    prompt: str
    reference: str | None = None
    answers: list[ModelAnswers]
    disagree: bool  # the models' scores differ


@router.post("/compare")
async def compare_outcomes(body: CompareRequest) -> CompareResult:
    """Wins, ties and losses, B's win rate with its bootstrap 95% interval, the paired sign
    test's p-value (ties left out) and the verdict line; and how many non-tied prompts an A/B
    needs to call the win rate seen significant with 80% power."""
    result = significance.compare(
        body.outcomes, body.a, body.b, alpha=body.alpha, resamples=body.resamples, seed=body.seed
    )
    decided = result.wins + result.losses
    # B's share of the decided prompts, with half a win and half a loss added: a first few
    # choices that all went one way still give an estimate (not 0 or 1).
    rate = (result.wins + 0.5) / (decided + 1)
    needed = None
    if decided and rate != 0.5:
        with contextlib.suppress(ValueError):  # more than the limit: no A/B will tell
            needed = significance.required_samples(rate, alpha=body.alpha)
    return CompareResult(**result.to_json(), needed=needed)
