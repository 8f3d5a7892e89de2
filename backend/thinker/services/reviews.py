"""A review job's queue and a person's answers to it (algorithms/review.py).

The queue is the first `queue_size` pairs of the job's review.jsonl (least certain first). An
answer names the better of the two answers shown (`a`, `b`) or a `tie`; it is kept in the
review_answers table and may be changed. The answers become a new version of the reviewed
dataset: a pair the person judged the other way round from the dataset has its `chosen` and
`rejected` swapped, a tie is dropped (a pair with no better answer teaches a reward model
nothing), and a pair where they agree is kept as it is. The reviewed dataset never changes.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.algorithms.review import PAIRS, SUMMARY
from thinker.errors import ConfigError, ConflictError, NotFoundError
from thinker.services.datasets import Edit
from thinker.store import ReviewAnswer, now

CHOICES = ("a", "b", "tie")


def summary(run_dir: Path) -> dict[str, Any] | None:
    """The review's summary, or None before the job has written it."""
    try:
        value = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return value if isinstance(value, dict) else None


def queue(run_dir: Path) -> list[dict[str, Any]]:
    """The queue: the least certain pairs, as many as the summary's `queue_size`."""
    found = summary(run_dir)
    if found is None:
        return []
    # The first lines only: review.jsonl holds every scored pair (up to max_pairs), and the
    # queue is read on every answer.
    with open(run_dir / PAIRS, "rb") as f:
        return [json.loads(line) for line in itertools.islice(f, found["queue_size"])]


async def answers(session: AsyncSession, job_id: str) -> dict[int, str]:
    rows = await session.scalars(select(ReviewAnswer).where(ReviewAnswer.job_id == job_id))
    return {row.pair: row.choice for row in rows}


async def answer(
    session: AsyncSession, job_id: str, queued: list[dict[str, Any]], pair: int, choice: str
) -> None:
    """Keep (or change) the answer to pair `pair` of the job's queue.

    Raises:
        NotFoundError: The queue has no such pair.
    """
    if not any(row["index"] == pair for row in queued):
        raise NotFoundError(f"pair {pair} is not in job {job_id}'s review queue")
    row = await session.get(ReviewAnswer, (job_id, pair))
    if row is None:
        session.add(ReviewAnswer(job_id=job_id, pair=pair, choice=choice))
    else:
        row.choice, row.answered_at = choice, now()
    await session.commit()


def edit(dataset_file: Path, queued: list[dict[str, Any]], given: dict[int, str]) -> Edit:
    """The new version's edit of the reviewed dataset: swapped where the person disagrees
    with its label, dropped where they call it a tie.

    Raises:
        ConflictError: No answer changes the dataset (none given, or all agree with it).
        ConfigError: A line to swap is not a preference row of the file.
    """
    if not given:
        raise ConflictError("no pair of the queue is answered yet; nothing to add")
    swap, drop = set(), set()
    for row in queued:
        choice = given.get(row["index"])
        if choice == "tie":
            drop.add(row["line"])
        elif choice is not None and choice != row["label"]:
            swap.add(row["line"])
    if not swap and not drop:
        raise ConflictError(
            f"all {len(given)} answer(s) agree with the dataset's labels: a new version would "
            "be the same rows"
        )
    replace: dict[int, dict[str, Any]] = {}
    with open(dataset_file, "rb") as f:
        for number, line in enumerate(f, start=1):
            if number in swap:
                stored = orjson.loads(line)
                if "chosen" not in stored or "rejected" not in stored:
                    raise ConfigError(
                        f"{dataset_file.name}, line {number}: not a preference row (no "
                        "chosen and rejected)"
                    )
                stored["chosen"], stored["rejected"] = stored["rejected"], stored["chosen"]
                replace[number] = stored
    return Edit(delete=drop, replace=replace)
