"""Signed download links to checkpoint files: what the SDK's `get_external_weights_urls`
returns, as a cloud store's signed URLs are.

A link names one file of one checkpoint and the time it expires, with an HMAC-SHA256 of both
under the server's signing key: a secret in `<data dir>/secrets/`, made on first use and kept
across restarts. The link alone (no API key) reads that one file until it expires; a changed
name, file or time, or a key made anew, is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading

from thinker.errors import AuthError
from thinker.secrets import read_secret, write_secret
from thinker.settings import Settings

LINK_TTL_S = 3600  # how long a link reads its file
_KEY_NAME = "url_signing_key"
_making = threading.Lock()


def signing_key(settings: Settings) -> bytes:
    """The server's signing key, made (random, 256 bits) the first time one is needed."""
    with _making:
        value = read_secret(settings, _KEY_NAME)
        if value is None:
            value = secrets.token_hex(32)
            write_secret(settings, _KEY_NAME, value)
    return bytes.fromhex(value)


def signature(key: bytes, target: str, expires: int) -> str:
    """The signature of a link to `target` (a file's path under the checkpoints) that
    expires at `expires` (Unix seconds)."""
    return hmac.new(key, f"{target}\n{expires}".encode(), hashlib.sha256).hexdigest()


def check(key: bytes, target: str, expires: int, given: str, now: float) -> None:
    """Refuse a link whose signature does not match or whose time has passed."""
    if not hmac.compare_digest(signature(key, target, expires), given):
        raise AuthError("this download link's signature does not match: ask for a new link")
    if now >= expires:
        raise AuthError("this download link has expired: ask for a new link")
