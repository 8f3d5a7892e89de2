"""Eval jobs' results as the API serves them: one job's figures and samples, and a leaderboard
of every model evaluated on one eval set, from the pairwise results of all its eval jobs.

An eval job writes `evaluation.json` (each model's figures, each pair's comparison) and
`samples.jsonl` (per prompt, each model's answers and scores) into its run directory when it
finishes (algorithms/evaluation.py). A model is the same model across jobs when it is the same
library model (its id), else the same base model or weights path.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select

from thinker.algorithms import evaluation, significance
from thinker.errors import NotFoundError
from thinker.files import read_jsonl
from thinker.jobs.states import JobState
from thinker.store import Job

Order = Literal["index", "score", "-score", "spread", "-spread"]


def summary(run_dir: Path) -> dict[str, Any] | None:
    """A finished eval job's evaluation.json; None before it has one."""
    path = run_dir / evaluation.SUMMARY
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return value if isinstance(value, dict) else None


def samples_page(  # noqa: PLR0913
    run_dir: Path,
    order: Order = "index",
    model: str | None = None,
    disagree: bool | None = None,
    offset: int = 0,
    limit: int = 100,
) -> tuple[int, list[dict[str, Any]]]:
    """The rows of samples.jsonl that pass the filter, and one page of them.

    `order`: by prompt; by `model`'s score (default the last model, the candidate), "-"
    for the best first; or by the spread of the models' scores (the largest minus the
    smallest; on two models, how far apart they were). `disagree`: only the prompts where the
    models' scores differ (True) or agree (False).

    Raises:
        NotFoundError: `model` is not one of the job's models.
    """
    rows = read_jsonl(run_dir / evaluation.SAMPLES)
    if disagree is not None:
        rows = [r for r in rows if bool(r.get("disagree")) == disagree]
    if order in ("score", "-score") and rows:
        names = [a["model"] for a in rows[0]["answers"]]
        chosen = model or names[-1]
        if chosen not in names:
            raise NotFoundError(f"model {chosen!r} is not one of this evaluation's: {names}")
        rows.sort(key=lambda r: (_score_of(r, chosen), r["index"]))
    elif order in ("spread", "-spread"):
        rows.sort(key=lambda r: (_spread(r), r["index"]))
    else:
        rows.sort(key=lambda r: r["index"])
    if order.startswith("-"):
        rows.reverse()
    return len(rows), rows[offset : offset + limit]


def _score_of(row: dict[str, Any], model: str) -> float:
    for answer in row["answers"]:
        if answer["model"] == model:
            return float("-inf") if answer.get("score") is None else float(answer["score"])
    return float("-inf")


def _spread(row: dict[str, Any]) -> float:
    scores = [a["score"] for a in row["answers"] if a.get("score") is not None]
    return max(scores) - min(scores) if scores else 0.0


async def leaderboard(
    session: Any, runs_dir: Path, dataset_id: str, scorer: str | None = None
) -> dict[str, Any]:
    """Every model evaluated on `dataset_id` by the finished eval jobs that used `scorer`
    (default: the latest job's), ranked by a Bradley-Terry fit of all their pairwise results.

    Raises:
        NotFoundError: no finished eval job on that dataset (with that scorer).
    """
    jobs = (
        await session.scalars(
            select(Job)
            .where(Job.algorithm == "eval", Job.dataset_id == dataset_id)
            .where(Job.state == JobState.SUCCEEDED)
            .order_by(Job.created_at.desc())
        )
    ).all()
    found = [(job, summary(runs_dir / job.id)) for job in jobs]
    found = [(job, s) for job, s in found if s is not None]
    if scorer is None and found:
        scorer = found[0][1]["scorer"]
    found = [(job, s) for job, s in found if s["scorer"] == scorer]
    if not found:
        raise NotFoundError(
            f"no finished eval job on dataset {dataset_id}"
            + (f" scored by {scorer}" if scorer else "")
        )
    models: dict[str, dict[str, Any]] = {}  # by key: id, name, model, latest score
    tally: Counter[tuple[str, str, str]] = Counter()  # (a, b, "a" | "b" | "tie")
    for job, result in reversed(found):  # oldest first: the latest name and score stay
        keys = {}
        for m in result["models"]:
            key = m.get("id") or m["model"]
            keys[m["name"]] = key
            models[key] = {
                "key": key,
                "id": m.get("id"),
                "name": m["name"],
                "model": m["model"],
                "score_mean": m.get("score_mean"),
                "job_id": job.id,
            }
        for c in result["comparisons"]:
            a, b = keys[c["a"]], keys[c["b"]]
            if a == b:
                continue
            tally[(a, b, "a")] += c["losses"]
            tally[(a, b, "b")] += c["wins"]
            tally[(a, b, "tie")] += c["ties"]
    pairs = sorted({(a, b) for a, b, _ in tally})
    ratings = (
        significance.bradley_terry(
            significance.Pairing(a, b, tally[(a, b, "a")], tally[(a, b, "b")], tally[(a, b, "tie")])
            for a, b in pairs
        )
        if pairs
        else []
    )
    ranked = [{**models[r.model], **r.__dict__, "model": models[r.model]["model"]} for r in ratings]
    unranked = [m for key, m in models.items() if key not in {r.model for r in ratings}]
    return {
        "dataset_id": dataset_id,
        "scorer": scorer,
        "jobs": [job.id for job, _ in found],
        "leaderboard": ranked,
        "unranked": unranked,  # models evaluated alone, never compared
    }
