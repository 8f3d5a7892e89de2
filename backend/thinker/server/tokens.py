"""API tokens: create, list and revoke them in the database, and the `thinker token` command.

A token is `thk_` + 43 URL-safe characters (256 random bits). Only its SHA-256 and its first
few characters (to tell tokens apart in a list) are stored; the token itself is shown once,
when it is created. A revoked token stays listed, so its name still explains old log lines.

    thinker token create --name NAME [--data-dir DIR]   # prints the token, once
    thinker token list [--data-dir DIR]
    thinker token revoke TOKEN_ID [--data-dir DIR]

The command opens the same database as `thinker serve`: `THINKER_DATABASE_URL` when set, else
`<data dir>/thinker.db` (`--data-dir`, else `THINKER_DATA_DIR`, else ~/.thinker).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.errors import ConfigError, NotFoundError, ThinkerError
from thinker.server.deps import hash_token
from thinker.server.limits import check_name, storage_guard
from thinker.server.settings import Settings
from thinker.store import ApiToken, make_engine, migrate, new_id, session_factory, sqlite_url

TOKEN_PREFIX = "thk_"
SHOWN_CHARS = 12  # "thk_" + 8 random characters: enough to tell tokens apart, useless to guess
MAX_NAME_CHARS = 200


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def check_token_name(name: str) -> str:
    """`name` stripped; refused when empty, too long or not a name (`limits.check_name`:
    control and bidirectional-override characters)."""
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise ConfigError(f"a token name must be 1 to {MAX_NAME_CHARS} characters, got {len(name)}")
    return check_name("token name", name)


async def create_token(session: AsyncSession, name: str) -> tuple[ApiToken, str]:
    """A new token row and the token itself (the only time it exists outside the client)."""
    token = generate_token()
    row = ApiToken(
        id=new_id("tok"),
        name=check_token_name(name),
        token_hash=hash_token(token),
        prefix=token[:SHOWN_CHARS],
        revoked=False,
    )
    session.add(row)
    with storage_guard(f"token {row.name!r}"):
        await session.commit()
    return row, token


async def list_tokens(session: AsyncSession) -> list[ApiToken]:
    rows = await session.scalars(select(ApiToken).order_by(ApiToken.created_at, ApiToken.id))
    return list(rows)


async def revoke_token(session: AsyncSession, token_id: str) -> ApiToken:
    """Mark the token revoked (idempotent); it is refused from the next request on."""
    row = await session.get(ApiToken, token_id)
    if row is None:
        raise NotFoundError(f"no API token {token_id!r}")
    row.revoked = True
    await session.commit()
    return row


# ---- the `thinker token` command ---------------------------------------------------------
def token_main(argv: list[str]) -> int:
    """Run `thinker token <argv>`; the exit code (0 ok, 2 bad command line or unknown id)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse has printed the usage and the problem
        return int(e.code or 0)
    try:
        settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
        return asyncio.run(_with_session(settings, args.command_fn, args))
    except (ThinkerError, ValidationError) as e:  # ValidationError: a bad THINKER_* variable
        print(f"[thinker] error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="thinker token", description="Manage API tokens.")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a token and print it (shown once)")
    create.add_argument("--name", required=True, help="what the token is for, e.g. 'laptop'")
    create.set_defaults(command_fn=_create)
    listing = commands.add_parser("list", help="list tokens (never the tokens themselves)")
    listing.set_defaults(command_fn=_list)
    revoke = commands.add_parser("revoke", help="revoke a token by its id (tok_...)")
    revoke.add_argument("token_id", metavar="ID")
    revoke.set_defaults(command_fn=_revoke)
    for sub in (create, listing, revoke):
        sub.add_argument("--data-dir", type=Path, help="the server's data directory")
    return parser


Command = Callable[[AsyncSession, argparse.Namespace], Awaitable[int]]


async def _with_session(settings: Settings, command: Command, args: argparse.Namespace) -> int:
    """Open the server's database (migrated, as the server does), run `command`, close it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url = settings.database_url
    engine = make_engine(url.get_secret_value() if url else sqlite_url(settings.data_dir))
    try:
        await migrate(engine)
        async with session_factory(engine)() as session:
            return await command(session, args)
    finally:
        await engine.dispose()


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
