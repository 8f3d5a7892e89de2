"""API tokens: create, list, check and revoke them in the database.

A token is `thk_` + 43 URL-safe characters (256 random bits). Only its SHA-256 and its first
few characters (to tell tokens apart in a list) are stored; the token itself is shown once,
when it is created. A revoked token stays listed, so its name still explains old log lines.

`thinker token` (thinker.cli.tokens) and the server's auth (thinker.server.deps) both use this.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from thinker.errors import AuthError, ConfigError, NotFoundError
from thinker.files import storage_guard
from thinker.names import check_name
from thinker.settings import Settings
from thinker.store import ApiToken, new_id, now

TOKEN_PREFIX = "thk_"
SHOWN_CHARS = 12  # "thk_" + 8 random characters: enough to tell tokens apart, useless to guess
MAX_NAME_CHARS = 200


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def check_token_name(name: str) -> str:
    """`name` stripped; refused when empty, too long or not a name (`names.check_name`:
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


TOKEN_TOUCH_S = 60.0  # a token's last_used_at is written at most this often


async def authorize(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], authorization: str | None
) -> str | None:
    """Refuse a call unless auth is off or `authorization` is `Bearer <a live token>`; the
    token's id (None when auth is off). The token's row is read on every call, so a
    revocation holds from the next one.

    Raises:
        AuthError: No token, a malformed header, or a token that is unknown or revoked.
    """
    if not settings.auth_required:
        return None
    if not authorization:
        raise AuthError(
            "missing token: send `Authorization: Bearer <token>` (`thinker token create`)"
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed Authorization header: expected `Bearer <token>`")
    return await token_in_use(sessions, token.strip(), TOKEN_TOUCH_S)


async def token_in_use(
    sessions: async_sessionmaker[AsyncSession], token: str, touch_every_s: float
) -> str:
    """The id of the live token `token`; its `last_used_at` is written at most once every
    `touch_every_s`, not on every call (a write per request queues behind every other write
    on SQLite: one writer at a time).

    Raises:
        AuthError: No live token is `token` (unknown, or revoked).
    """
    digest = hash_token(token)
    async with sessions() as session:
        columns = select(ApiToken.id, ApiToken.revoked, ApiToken.last_used_at)
        row = (await session.execute(columns.where(ApiToken.token_hash == digest))).first()
        if row is None or row.revoked:
            raise AuthError("unknown or revoked token")
        at = now()
        if row.last_used_at is None or at - row.last_used_at >= touch_every_s:
            await session.execute(
                update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=at)
            )
            await session.commit()
    return str(row.id)


async def revoked_tokens(
    sessions: async_sessionmaker[AsyncSession], token_ids: set[str]
) -> set[str]:
    """Which of `token_ids` are revoked (or deleted)."""
    async with sessions() as session:
        query = select(ApiToken.id).where(ApiToken.id.in_(token_ids), ApiToken.revoked.is_(False))
        live = set((await session.scalars(query)).all())
    return token_ids - live


async def token_name(sessions: async_sessionmaker[AsyncSession], token_id: str) -> str | None:
    """The name of token `token_id` (None if it is gone)."""
    async with sessions() as session:
        return await session.scalar(select(ApiToken.name).where(ApiToken.id == token_id))
