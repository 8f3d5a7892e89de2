"""Attached runs: jobs trained in the server process for a client outside it.

A Tinker SDK training client created over the wire (services/tinker_wire.py) is a job like any
other: a row, a run directory, live events, library models. But no worker runs it: its loop is
the client's, and its steps run on the server's engine as the client sends them. The job
manager follows such a job through an `AttachedRun` instead of a worker; after a restart the
handle is gone with the engine's state, and the job is interrupted.
"""

from __future__ import annotations

from typing import Protocol

SDK_ALGORITHM = "tinker_sdk"  # the `algorithm` of a job a Tinker SDK client trains
SERVER_RESOURCE = "server"  # the `resource` of an attached job: the server process's engine
RESTART_REASON = (
    "the server restarted: this Tinker SDK run's training client lived in the server's memory "
    "and its loop in the SDK's process, so it cannot resume here; its saved checkpoints are "
    "kept (create_training_client_from_state loads one)"
)
NOT_RESUMABLE = (
    "a Tinker SDK run cannot be paused or resumed from the dashboard: its training loop lives "
    "in the SDK client; cancel it, or load a saved state from the client to go on"
)


class AttachedRun(Protocol):
    """The job manager's handle on an attached job."""

    def last_seen(self) -> float:
        """When the client last showed it is alive (epoch seconds): its session's heartbeat."""
        ...

    def stop(self, reason: str) -> None:
        """Stop the run at once: its pending and later requests fail with `reason`."""
        ...
