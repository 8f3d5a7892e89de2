"""/api/settings: what the server runs with, and the API keys it stores (never returned): the
Tinker key, and the key of an external model-as-judge endpoint (eval jobs' llm_judge scorer)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from thinker.errors import ConfigError
from thinker.files import storage_guard
from thinker.secrets import (
    JUDGE_KEY,
    delete_secret,
    read_judge_key,
    read_secret,
    write_judge_key,
    write_secret,
)
from thinker.server.deps import PlatformDep

router = APIRouter(prefix="/settings", tags=["settings"])

TINKER_KEY = "tinker_api_key"
MAX_KEY_CHARS = 512


class SettingsPublic(BaseModel):
    """The server's settings as a client may see them: no secret, only whether one is set."""

    tinker_api_key_set: bool
    judge_api_key_set: bool  # the external judge endpoint's key (llm_judge scorer)
    judge_url: str | None  # the one endpoint that key is sent to
    auth_required: bool
    host: str
    port: int
    database: str  # sqlite | postgresql
    data_dir: Path
    model_pool_size: int
    max_upload_mb: int
    max_cpu_jobs: int
    max_remote_jobs: int
    cors_origins: list[str]


class TinkerKeyUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key: SecretStr  # checked by check_api_key, not here: see there


def check_api_key(key: SecretStr, what: str) -> None:
    """Refuse an implausible key with a message that names the rule broken, never the key.

    Checked here rather than by a pydantic validator: a validator's error carries the raw
    input, which FastAPI's default 422 handler sends back to the client.
    """
    value = key.get_secret_value()
    problem = None
    if not value:
        problem = "it is empty"
    elif any(c.isspace() for c in value) or not value.isprintable():
        problem = "it has whitespace or control characters (a bad paste?)"
    elif len(value) > MAX_KEY_CHARS:
        problem = f"it is longer than {MAX_KEY_CHARS} characters"
    if problem is not None:
        raise ConfigError(f"api_key: not a plausible {what}: {problem}")


class TinkerKeyStatus(BaseModel):
    tinker_api_key_set: bool


@router.get("")
async def read_settings(platform: PlatformDep) -> SettingsPublic:
    """The server's settings, and whether a Tinker API key is stored (never the key)."""
    s = platform.settings
    judge = read_judge_key(s)
    return SettingsPublic(
        tinker_api_key_set=read_secret(s, TINKER_KEY) is not None,
        judge_api_key_set=judge is not None,
        judge_url=judge.url if judge is not None else None,
        auth_required=s.auth_required,
        host=s.host,
        port=s.port,
        database=platform.engine.dialect.name,
        data_dir=s.data_dir,
        model_pool_size=s.model_pool_size,
        max_upload_mb=s.max_upload_mb,
        max_cpu_jobs=s.max_cpu_jobs,
        max_remote_jobs=s.max_remote_jobs,
        cors_origins=list(s.cors_origins),
    )


@router.put(
    "/tinker-key", responses={507: {"description": "The disk is full: the old key is kept"}}
)
async def update_tinker_key(body: TinkerKeyUpdate, platform: PlatformDep) -> TinkerKeyStatus:
    """Store the Tinker API key server-side for Tinker jobs; it is never sent back."""
    _store_key(platform, TINKER_KEY, body.api_key, "Tinker API key")
    return TinkerKeyStatus(tinker_api_key_set=True)


@router.delete("/tinker-key")
async def delete_tinker_key(platform: PlatformDep) -> TinkerKeyStatus:
    """Forget the stored Tinker API key; new Tinker jobs then have none."""
    delete_secret(platform.settings, TINKER_KEY)
    return TinkerKeyStatus(tinker_api_key_set=False)


class JudgeKeyUpdate(TinkerKeyUpdate):
    url: str = Field(
        pattern=r"^https?://\S+$",
        max_length=500,
        description="The OpenAI-compatible endpoint (base URL, e.g. https://api.openai.com/v1) "
        "the key is for: it is sent to that endpoint and to no other.",
    )


class JudgeKeyStatus(BaseModel):
    judge_api_key_set: bool
    judge_url: str | None = None


@router.put("/judge-key", responses={507: {"description": "The disk is full: the old key is kept"}})
async def update_judge_key(body: JudgeKeyUpdate, platform: PlatformDep) -> JudgeKeyStatus:
    """Store the API key of an external OpenAI-compatible judge endpoint (an eval job's
    llm_judge scorer) server-side, bound to that endpoint's URL: an eval job whose
    `judge_url` is that URL sends it, any other gets no key. It is never sent back."""
    check_api_key(body.api_key, "judge endpoint API key")
    with storage_guard("the judge endpoint API key"):  # whole or not at all (secrets.py)
        write_judge_key(platform.settings, body.url, body.api_key.get_secret_value())
    return JudgeKeyStatus(judge_api_key_set=True, judge_url=body.url)


@router.delete("/judge-key")
async def delete_judge_key(platform: PlatformDep) -> JudgeKeyStatus:
    """Forget the stored judge key; later judge calls then send none."""
    delete_secret(platform.settings, JUDGE_KEY)
    return JudgeKeyStatus(judge_api_key_set=False)


def _store_key(platform: PlatformDep, name: str, key: SecretStr, what: str) -> None:
    """`key` checked (check_api_key) and stored as secret `name`: written whole or not at all
    (secrets.py), the old one kept when the disk is full."""
    check_api_key(key, what)
    with storage_guard(f"the {what}"):
        write_secret(platform.settings, name, key.get_secret_value())
