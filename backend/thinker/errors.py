"""One error hierarchy for the whole package.

Every class also subclasses the stdlib error it refines, so callers that catch
`ValueError` or `RuntimeError` keep working. Mapping to HTTP statuses or exit codes
happens only at the edges (server, CLI).
"""

from __future__ import annotations


class ThinkerError(Exception):
    """Root of every error Thinker raises on purpose."""


class ConfigError(ThinkerError, ValueError):
    """A configuration is invalid. `problems` lists every problem found, not just the first."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or [message]
        super().__init__(message if problems is None else _join(message, problems))


class DatasetError(ThinkerError, ValueError):
    """A dataset file is unreadable or its rows do not match the expected schema."""


class NotTextError(DatasetError):
    """A dataset file that should be text (JSONL, JSON, CSV) but looks binary."""


class BackendError(ThinkerError, RuntimeError):
    """A training backend cannot do what was asked (missing key, unreachable, no CUDA...)."""


class CheckpointError(ThinkerError, FileNotFoundError):
    """A checkpoint path does not resolve to a stored checkpoint, or it already exists."""


def _join(message: str, problems: list[str]) -> str:
    lines = "\n".join(f"  - {p}" for p in problems)
    return f"{message}\n{lines}"


class NotFoundError(ThinkerError, LookupError):
    """A dataset, job, model or token id that does not exist."""


class ConflictError(ThinkerError, RuntimeError):
    """The request is valid but the resource's state forbids it now (a dataset in use by a
    job, cancelling a finished job, a compare-and-set that lost a race)."""


class AuthError(ThinkerError, PermissionError):
    """A missing, malformed or unknown API token."""


class OverloadedError(ThinkerError, RuntimeError):
    """The server is at capacity for this kind of work now (a full sampling queue); the same
    request may succeed later. `retry_after` is a hint in seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class StorageError(ThinkerError, OSError):
    """Something could not be written because the disk is full or not writable; nothing
    half-written was kept."""


class DamagedError(BackendError):
    """Stored files (a checkpoint, an adapter, a dataset file) are missing or fail their
    checksum: they cannot be served as they are."""


class DivergedError(ConfigError):
    """A training run's loss, gradient or weights stopped being finite: the settings (most
    often the learning rate) must change, so retrying as is cannot help."""
