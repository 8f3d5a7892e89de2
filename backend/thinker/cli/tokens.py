"""`thinker token create | list | revoke`: the server's API tokens, in its database.

The command opens the same database as `thinker serve`: `THINKER_DATABASE_URL` when set, else
`<data dir>/thinker.db` (`--data-dir`, else `THINKER_DATA_DIR`, else ~/.thinker). A token is
shown once, when it is created; only its hash is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.errors import ThinkerError
from thinker.services.tokens import create_token, list_tokens, revoke_token
from thinker.settings import Settings
from thinker.store import open_database

HELP = "create, list or revoke the server's API tokens"
EPILOG = """\
examples:
  thinker token create --name laptop      prints the token (shown once) on stdout
  thinker token list                      ids, prefixes, last use; never the tokens
  thinker token revoke tok_0123456789ab   refused from the next request on

exit codes: 0 done; 2 a bad command line, an unknown id or a bad THINKER_* variable
"""
Command = Callable[[AsyncSession, argparse.Namespace], Awaitable[int]]


def add_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "token",
        help=HELP,
        description="Manage the server's API tokens.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a token and print it (shown once)")
    create.add_argument("--name", required=True, help="what the token is for, e.g. 'laptop'")
    create.set_defaults(action_fn=_create)
    listing = actions.add_parser("list", help="list tokens (never the tokens themselves)")
    listing.set_defaults(action_fn=_list)
    revoke = actions.add_parser("revoke", help="revoke a token by its id (tok_...)")
    revoke.add_argument("token_id", metavar="ID")
    revoke.set_defaults(action_fn=_revoke)
    for sub in (create, listing, revoke):
        sub.add_argument("--data-dir", type=Path, help="the server's data directory")
        sub.set_defaults(handler=token)


def token(args: argparse.Namespace) -> int:
    """Run `thinker token ACTION`; the exit code."""
    try:
        settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
        return asyncio.run(_with_session(settings, args.action_fn, args))
    except (ThinkerError, ValidationError) as e:  # ValidationError: a bad THINKER_* variable
        print(f"[thinker] error: {e}", file=sys.stderr)
        return 2


async def _with_session(settings: Settings, command: Command, args: argparse.Namespace) -> int:
    """Open the server's database (migrated, as the server does), run `command`, close it."""
    async with open_database(settings) as sessions, sessions() as session:
        return await command(session, args)


async def _create(session: AsyncSession, args: argparse.Namespace) -> int:
    row, token = await create_token(session, args.name)
    print(token)
    print(
        f"[thinker] created token {row.id} ({row.name!r}); it cannot be shown again. "
        "Send it as `Authorization: Bearer <token>`.",
        file=sys.stderr,
    )
    return 0


async def _list(session: AsyncSession, args: argparse.Namespace) -> int:
    rows = await list_tokens(session)
    if not rows:
        print("no API tokens (create one: thinker token create --name NAME)", file=sys.stderr)
        return 0
    print(f"{'ID':<18} {'PREFIX':<14} {'CREATED':<20} {'LAST USED':<20} {'STATE':<8} NAME")
    for row in rows:
        state = "revoked" if row.revoked else "active"
        print(
            f"{row.id:<18} {row.prefix:<14} {_when(row.created_at):<20} "
            f"{_when(row.last_used_at):<20} {state:<8} {row.name}"
        )
    return 0


async def _revoke(session: AsyncSession, args: argparse.Namespace) -> int:
    row = await revoke_token(session, args.token_id)
    print(f"[thinker] revoked token {row.id} ({row.name!r})", file=sys.stderr)
    return 0


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")
