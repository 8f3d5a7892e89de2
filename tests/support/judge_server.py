"""A scripted OpenAI-compatible judge for the llm_judge scorer's tests (the external LLM is the
one thing a test may replace): POST /v1/chat/completions answers "10" when the answer to grade
is the reference, "Grade: 3" when it is not, and no grade for a question that says "riddle".
It records the Authorization header of every request."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    seen: list[str | None]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(self.headers.get("Authorization"))
        text = body["messages"][-1]["content"]
        reference = text.split("Reference answer:\n", 1)[-1].split("\n\n", 1)[0]
        answer = text.split("Answer to grade:\n", 1)[-1].split("\n\n", 1)[0]
        reply = "10" if answer == reference else "Grade: 3"
        if "riddle" in text:
            reply = "I cannot grade this."
        payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def judge_server() -> Iterator[tuple[str, list[str | None]]]:
    """The judge's base URL (…/v1) and the Authorization headers it received."""
    seen: list[str | None] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
