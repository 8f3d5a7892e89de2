"""Server-side secrets: one file per secret in `<data dir>/secrets/`, readable by the owner only.

Names come from a fixed allow-list, so no caller-supplied string ever becomes a path. A secret
is written to a temporary file (created 0600) and renamed over the old one, so a crash leaves
either the old value or the new one, never half of either. Values are never logged.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from thinker.errors import ConfigError
from thinker.settings import Settings

SECRET_NAMES = frozenset({"tinker_api_key", "judge_api_key", "url_signing_key"})
_DIR_MODE = 0o700
_FILE_MODE = 0o600


def read_secret(settings: Settings, name: str) -> str | None:
    """The stored value of secret `name`, or None when it is not set."""
    path = _path(settings, name)
    try:
        value = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return value or None


def write_secret(settings: Settings, name: str, value: str) -> None:
    """Store `value` as secret `name` (mode 0600), replacing any earlier value atomically."""
    path = _path(settings, name)
    _ensure_dir(path.parent)
    tmp = path.parent / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(value)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(path.parent)


def delete_secret(settings: Settings, name: str) -> bool:
    """Remove secret `name`; False when it was not set."""
    path = _path(settings, name)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    _fsync_dir(path.parent)
    return True


def _path(settings: Settings, name: str) -> Path:
    if name not in SECRET_NAMES:
        raise ConfigError(f"unknown secret {name!r}; known secrets: {sorted(SECRET_NAMES)}")
    return settings.secrets_dir / name


def _ensure_dir(directory: Path) -> None:
    directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask and ignored for an existing directory.
    os.chmod(directory, _DIR_MODE)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


JUDGE_KEY = "judge_api_key"


@dataclass(frozen=True)
class EndpointKey:
    """An API key and the one endpoint (a base URL) it may be sent to."""

    url: str
    key: str

    def for_url(self, url: str) -> str | None:
        """The key when `url` is its endpoint (trailing slashes aside), else None: a job may
        name any judge URL, and the stored key must not go to one its owner did not name."""
        return self.key if url.rstrip("/") == self.url.rstrip("/") else None


def read_judge_key(settings: Settings) -> EndpointKey | None:
    """The stored judge endpoint's key and URL (secret `judge_api_key`), or None."""
    value = read_secret(settings, JUDGE_KEY)
    if value is None:
        return None
    try:
        stored = json.loads(value)
        return EndpointKey(str(stored["url"]), str(stored["key"]))
    except (ValueError, KeyError, TypeError):
        return None  # not written by write_judge_key: treated as not set


def write_judge_key(settings: Settings, url: str, key: str) -> None:
    write_secret(settings, JUDGE_KEY, json.dumps({"url": url, "key": key}))
