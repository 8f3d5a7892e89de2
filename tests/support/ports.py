"""A free TCP port, with nothing else imported (the GPU machine's tests have no server
packages)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
