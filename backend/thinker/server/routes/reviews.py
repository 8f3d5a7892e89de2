"""/api/jobs/{job_id}/review: a review job's queue of the pairs its reward model is least sure
of, a person's answers to them, and the dataset version the answers make
(services/reviews.py). Retraining is an `rm` job on that version from the reviewed model."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, status
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from thinker.errors import NotFoundError
from thinker.server.deps import PlatformDep
from thinker.server.platform import Platform
from thinker.server.routes.datasets import DatasetPublic
from thinker.services import reviews
from thinker.services.datasets import get_dataset
from thinker.store import Job

router = APIRouter(prefix="/jobs", tags=["reviews"])
NOT_A_REVIEW = {404: {"description": "No such job, or not a review job"}}
MAX_PAIR = 10_000_000  # far past any review's pairs (max_pairs is at most 100,000)


class CalibrationBin(BaseModel):
    """Pairs whose confidence fell in [low, high): how sure the model was, how often right."""

    low: float
    high: float
    pairs: int
    confidence: float
    accuracy: float


class Calibration(BaseModel):
    ece: float  # expected calibration error: the bins' |accuracy - confidence|, by their share
    confidence: float
    accuracy: float
    bins: list[CalibrationBin]


class CommitteeMember(BaseModel):
    weights: str
    accuracy: float  # its agreement with the dataset's labels


class ReviewSummary(BaseModel):
    """What the review found (algorithms/review.py)."""

    pairs: int
    committee: int
    queue_size: int
    unanimous: float  # the share of pairs every checkpoint judged the same way
    calibration: Calibration  # the reviewed (last) checkpoint's, on the dataset's labels
    checkpoints: list[CommitteeMember]


class ReviewItem(BaseModel):
    """A queued pair, shown blind: which answer the dataset chose and what the reward model
    thinks are given once the pair is answered."""

    pair: int  # its index in the review (the dataset's row order)
    line: int  # its line in the reviewed dataset
    prompt: list[dict[str, Any]]
    a: str
    b: str
    uncertainty: float  # bits: the binary entropy of the committee's mean P(A beats B)
    disagreement: float  # the standard deviation of the checkpoints' P(A beats B)
    answer: Literal["a", "b", "tie"] | None
    label: Literal["a", "b"] | None  # the dataset's chosen answer; null until answered
    p_a: list[float] | None  # each checkpoint's P(A beats B), oldest first; null until answered
    p_mean: float | None


class ReviewPublic(BaseModel):
    summary: ReviewSummary | None  # null until the job finishes
    answered: int
    data: list[ReviewItem]


class ReviewAnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    choice: Literal["a", "b", "tie"] = Field(
        description="The better answer as shown (a or b), or tie: neither is better."
    )


class ReviewDatasetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        None, min_length=1, max_length=200, description="The version's name; null: the parent's."
    )


def _item(row: dict[str, Any], answer: str | None) -> ReviewItem:
    shown = answer is not None
    return ReviewItem(
        pair=row["index"],
        line=row["line"],
        prompt=row["prompt"],
        a=row["a"],
        b=row["b"],
        uncertainty=row["uncertainty"],
        disagreement=row["disagreement"],
        answer=answer,  # type: ignore[arg-type]
        label=row["label"] if shown else None,
        p_a=row["p_a"] if shown else None,
        p_mean=row["p_mean"] if shown else None,
    )


async def _review_job(platform: Platform, job_id: str) -> Job:
    job = await platform.jobs.get(job_id)
    if job.algorithm != "review":
        raise NotFoundError(f"job {job_id} is a {job.algorithm} job: only review jobs have one")
    return job


@router.get("/{job_id}/review", responses=NOT_A_REVIEW)
async def read_job_review(job_id: str, platform: PlatformDep) -> ReviewPublic:
    """A review job's summary (the reviewed checkpoint's calibration on the dataset's labels,
    the committee's agreement) and its queue, least certain first, with the answers so far."""
    await _review_job(platform, job_id)
    run = platform.jobs.run_dir(job_id).path
    found = await asyncio.to_thread(reviews.summary, run)
    rows = await asyncio.to_thread(reviews.queue, run)
    async with platform.sessions() as session:
        given = await reviews.answers(session, job_id)
    return ReviewPublic(
        summary=None if found is None else ReviewSummary.model_validate(found),
        answered=sum(row["index"] in given for row in rows),
        data=[_item(row, given.get(row["index"])) for row in rows],
    )


@router.put(
    "/{job_id}/review/{pair}",
    responses={404: {"description": "No such job, not a review job, or the pair is not queued"}},
)
async def answer_job_review(
    job_id: str,
    pair: Annotated[int, PathParam(ge=0, le=MAX_PAIR)],
    body: ReviewAnswerBody,
    platform: PlatformDep,
) -> ReviewItem:
    """Answer (or change the answer to) one queued pair; the item comes back with the
    dataset's label and the reward model's probabilities."""
    await _review_job(platform, job_id)
    rows = await asyncio.to_thread(reviews.queue, platform.jobs.run_dir(job_id).path)
    async with platform.sessions() as session:
        await reviews.answer(session, job_id, rows, pair, body.choice)
    row = next(r for r in rows if r["index"] == pair)
    return _item(row, body.choice)


@router.post(
    "/{job_id}/review/dataset",
    status_code=status.HTTP_201_CREATED,
    responses={
        **NOT_A_REVIEW,
        409: {"description": "No answer changes the dataset"},
        507: {"description": "No room left for the new version"},
    },
)
async def create_review_dataset(
    job_id: str, body: ReviewDatasetBody, platform: PlatformDep
) -> DatasetPublic:
    """A new version of the reviewed dataset with the answers in it: a pair judged the other
    way round has its chosen and rejected swapped, a tie is dropped. Retrain the reward model
    on it with an `rm` job whose base_model is the reviewed model."""
    job = await _review_job(platform, job_id)
    if job.dataset_id is None:
        raise NotFoundError(f"job {job_id} has no dataset (it was deleted)")
    rows = await asyncio.to_thread(reviews.queue, platform.jobs.run_dir(job_id).path)
    async with platform.sessions() as session:
        given = await reviews.answers(session, job_id)
        parent = await get_dataset(session, job.dataset_id)
    source = platform.datasets.stored_file(parent)
    edit = await asyncio.to_thread(reviews.edit, source, rows, given)
    name = body.name or f"{parent.name} (reviewed)"
    dataset = await platform.datasets.new_version(parent.id, edit, name, None)
    return DatasetPublic.model_validate(dataset)
