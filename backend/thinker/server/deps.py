"""FastAPI dependencies as `Annotated` aliases: the platform, a database session, auth."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from thinker.server.platform import Platform
from thinker.services.tokens import authorize


def get_platform(request: Request) -> Platform:
    return request.app.state.platform  # type: ignore[no-any-return]


PlatformDep = Annotated[Platform, Depends(get_platform)]


async def get_session(platform: PlatformDep) -> AsyncIterator[AsyncSession]:
    async with platform.sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


async def require_token(request: Request) -> None:
    """Every REST route depends on this (see app.py)."""
    platform = get_platform(request)
    await authorize(platform.settings, platform.sessions, request.headers.get("authorization"))
