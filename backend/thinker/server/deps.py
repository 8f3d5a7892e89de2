"""FastAPI dependencies as `Annotated` aliases: the platform, a database session, auth."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.errors import AuthError
from thinker.server.platform import Platform
from thinker.store import ApiToken, now


def get_platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


PlatformDep = Annotated[Platform, Depends(get_platform)]


async def get_session(platform: PlatformDep) -> AsyncIterator[AsyncSession]:
    async with platform.sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]
TOKEN_TOUCH_S = 60.0  # a token's last_used_at is written at most this often


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def check_token(platform: Platform, authorization: str | None) -> str | None:
    """Refuse the call unless auth is off or `authorization` is `Bearer <a live token>`;
    return the token's id (None when auth is off).

    The token's row is read on every call, so a revocation holds from the next one; its
    `last_used_at` is written at most once a `TOKEN_TOUCH_S`, not on every call: a write per
    request queues behind every other write on SQLite (one writer at a time).
    """
    if not platform.settings.auth_required:
        return None
    if not authorization:
        raise AuthError(
            "missing token: send `Authorization: Bearer <token>` (`thinker token create`)"
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed Authorization header: expected `Bearer <token>`")
    digest = hash_token(token.strip())
    async with platform.sessions() as session:
        columns = select(ApiToken.id, ApiToken.revoked, ApiToken.last_used_at)
        row = (await session.execute(columns.where(ApiToken.token_hash == digest))).first()
        if row is None or row.revoked:
            raise AuthError("unknown or revoked token")
        at = now()
        if row.last_used_at is None or at - row.last_used_at >= TOKEN_TOUCH_S:
            await session.execute(
                update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=at)
            )
            await session.commit()
    return str(row.id)


async def revoked_tokens(platform: Platform, token_ids: set[str]) -> set[str]:
    """Which of `token_ids` are revoked (or deleted)."""
    async with platform.sessions() as session:
        query = select(ApiToken.id).where(ApiToken.id.in_(token_ids), ApiToken.revoked.is_(False))
        live = set((await session.scalars(query)).all())
    return token_ids - live


async def require_token(request: Request) -> None:
    """Every REST route depends on this (see app.py)."""
    await check_token(get_platform(request), request.headers.get("authorization"))
