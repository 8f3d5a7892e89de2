"""`thinker serve`: the platform server (settings from THINKER_* variables and flags)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from thinker.settings import Settings

HELP = "start the platform server: REST API, Socket.IO and the dashboard"
EPILOG = """\
Every setting is also an environment variable THINKER_<NAME> (THINKER_DATABASE_URL,
THINKER_REQUIRE_AUTH, THINKER_CORS_ORIGINS, ...): see HOW_TO_USE.md.

examples:
  thinker serve                                   http://127.0.0.1:8000, data in ~/.thinker
  thinker serve --host 0.0.0.0 --port 9000        beyond loopback: every call needs a token
  THINKER_DATABASE_URL=postgresql://u:p@db/thinker thinker serve
"""


def add_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "serve",
        help=HELP,
        description="Start the Thinker platform server: REST API, Socket.IO, dashboard.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host", help="bind address (default 127.0.0.1; beyond loopback, every call needs a token)"
    )
    parser.add_argument("--port", type=int, help="default 8000")
    parser.add_argument(
        "--data-dir", type=Path, help="database, datasets and runs (default ~/.thinker)"
    )
    parser.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    # Deferred: the server imports torch and the web stack; `thinker --help` must not wait.
    import uvicorn

    from thinker.server.app import create_app, settle_gc

    overrides = {k: getattr(args, k) for k in ("host", "port", "data_dir")}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    dashboard = Path(__file__).resolve().parents[3] / "frontend" / "dist"
    if settings.static_dir is None and dashboard.is_dir():
        settings.static_dir = dashboard
    url = f"http://{settings.host}:{settings.port}"
    print(f"[thinker] serving on {url} (data in {settings.data_dir}); Ctrl-C stops it", flush=True)
    app = create_app(settings)
    settle_gc()
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    return 0
