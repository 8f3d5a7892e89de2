"""A job's states: one vocabulary for the jobs table, the job manager, the worker's events and
the API (an enum in the OpenAPI document, which the dashboard reads).

Here rather than next to the `Job` table in `thinker.store`: the worker spells its final
states too, and importing the store would load SQLAlchemy and Alembic into every worker.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"  # validated, waiting for a slot
    STARTING = "starting"  # a worker was started: it loads the model and the data
    RUNNING = "running"  # the worker trains
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # with the reason; resumable unless the same settings would fail again
    CANCELLED = "cancelled"
    PAUSED = "paused"  # by request; resume continues from the last checkpoint
    INTERRUPTED = "interrupted"  # its worker went away (a restart, a kill): resumable


# A worker holds the job (or is being started for it).
ACTIVE_STATES = (JobState.STARTING, JobState.RUNNING)
# The job may still train, so it may still read its datasets; the other states are final.
UNFINISHED_STATES = (JobState.QUEUED, *ACTIVE_STATES, JobState.PAUSED, JobState.INTERRUPTED)
# What resume accepts: it queues the job again, to continue from its last checkpoint.
RESUMABLE_STATES = (JobState.PAUSED, JobState.INTERRUPTED, JobState.FAILED)
