"""/api/tokens: API tokens for the dashboard and scripts (create, list, revoke)."""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field

from thinker.server.deps import PlatformDep, SessionDep
from thinker.services import tokens
from thinker.store import ApiToken

router = APIRouter(prefix="/tokens", tags=["tokens"])


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=tokens.MAX_NAME_CHARS)  # what it is for


class TokenPublic(BaseModel):
    """A token as listed: never the token or its hash, only its first characters."""

    id: str
    name: str
    prefix: str
    created_at: float
    last_used_at: float | None
    revoked: bool

    @classmethod
    def of(cls, row: ApiToken) -> TokenPublic:
        return cls(
            id=row.id,
            name=row.name,
            prefix=row.prefix,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            revoked=row.revoked,
        )


class TokenCreated(TokenPublic):
    token: str  # shown in this response only; the server keeps just its hash


class TokensPublic(BaseModel):
    data: list[TokenPublic]
    count: int


@router.get("")
async def read_tokens(session: SessionDep) -> TokensPublic:
    """Every API token, revoked ones included (oldest first)."""
    rows = await tokens.list_tokens(session)
    return TokensPublic(data=[TokenPublic.of(r) for r in rows], count=len(rows))


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={507: {"description": "The disk is full: no token was made"}},
)
async def create_token(body: TokenCreate, session: SessionDep) -> TokenCreated:
    """Create a token; the response is the only place it is ever shown."""
    row, token = await tokens.create_token(session, body.name)
    return TokenCreated(**TokenPublic.of(row).model_dump(), token=token)


@router.delete("/{token_id}")
async def revoke_token(token_id: str, session: SessionDep, platform: PlatformDep) -> TokenPublic:
    """Revoke a token: every later request that carries it gets 401, its sockets close."""
    row = await tokens.revoke_token(session, token_id)
    await platform.hub.disconnect_token(row.id)
    return TokenPublic.of(row)
