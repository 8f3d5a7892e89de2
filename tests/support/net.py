"""Network helpers for tests that start a real server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI
from tests.support.ports import free_port

from thinker.server.app import create_app
from thinker.settings import Settings

__all__ = ["free_port", "serving"]


@contextmanager
def serving(settings: Settings) -> Iterator[tuple[str, FastAPI]]:
    """The app under uvicorn in a thread of this process: its root URL and the FastAPI app
    (`app.state.platform` is the platform)."""
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}", app.other_asgi_app  # type: ignore[attr-defined]
    finally:
        server.should_exit = True
        thread.join(30)
