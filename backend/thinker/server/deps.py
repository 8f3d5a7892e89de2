"""FastAPI dependencies as `Annotated` aliases: the platform, a database session, auth."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
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


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def check_token(platform: Platform, authorization: str | None) -> None:
    """Refuse the call unless auth is off or `authorization` is `Bearer <a live token>`."""
    if not platform.settings.auth_required:
        return
    if not authorization:
        raise AuthError(
            "missing token: send `Authorization: Bearer <token>` (`thinker token create`)"
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed Authorization header: expected `Bearer <token>`")
    async with platform.sessions() as session:
        row = await session.scalar(
            select(ApiToken).where(ApiToken.token_hash == hash_token(token.strip()))
        )
        if row is None or row.revoked:
            raise AuthError("unknown or revoked token")
        row.last_used_at = now()
        await session.commit()


async def require_token(request: Request) -> None:
    """Every REST route depends on this (see app.py)."""
    await check_token(get_platform(request), request.headers.get("authorization"))
