"""The OpenAPI document against the server: schemathesis sends generated requests, valid and
invalid, to every operation of the app (auth on, with a real token; SQLite and PostgreSQL) and
checks every answer: no server error, a documented status, content type, headers and body as
the document says. Seeded and bounded: the same requests on every run.

On SQLite every phase runs, the coverage phase's boundary values of each field included
(about 3,400 requests for POST /api/jobs alone). On PostgreSQL the examples and the generated
requests run, valid and invalid, but not the coverage phase: its boundaries are refused by the
request models before any query (a 422 that does not depend on the database), and it was a
third of the suite's PostgreSQL time. What PostgreSQL refuses and SQLite takes (NUL bytes,
integers past 64 bits) is tested on both in tests/api/test_inputs.py."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.python.asgi import get_client, shutdown_lifespans
from schemathesis.specs.openapi.checks import ignored_auth
from tests.support.api import make_settings
from tests.support.database import fresh_database

from thinker.server.app import create_app
from thinker.services.tokens import create_token
from thinker.settings import Settings
from thinker.store import make_engine, migrate, session_factory, sqlite_url

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "data" / "examples" / "arithmetic" / "train.jsonl"
EXAMPLES_PER_OPERATION = 6  # generated cases per operation, besides the coverage phase's

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",  # invalid input is refused (4xx), not stored or run
    "ignored_auth",  # no token or a wrong one: 401
    "unsupported_method",  # a method the path does not have: 405 with the right Allow
    "allow_header_conformance",
)
CONFIG = {
    "seed": 15,
    "suppress-health-check": ["all"],
    "generation": {
        "mode": "all",  # valid requests and invalid ones
        "max-examples": EXAMPLES_PER_OPERATION,
        "deterministic": True,
        "database": "none",  # no example database: every run sends the same requests
    },
    "phases": {"stateful": {"enabled": False}},
    "checks": {
        **{name: {"enabled": True} for name in CHECKS},
        # Schema-valid requests that break a rule the schema cannot state (exactly one of
        # `prompt` and `messages`, a dataset of the algorithm's kind, a known base model) get
        # a 422 naming the rule: right, though this check counts them as refusals.
        "positive_data_acceptance": {"enabled": False},
    },
}


class Served:
    """The app of the running `served` fixture, as one ASGI app: the schema is read once, at
    import, while each database gets an app of its own."""

    def __init__(self) -> None:
        self.app: Any = None
        self.database = ""
        self.auth: dict[str, str] = {}
        self.ids: dict[str, str] = {}  # path parameter -> the id of a stored thing

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


SERVED = Served()
DOCUMENT = create_app(Settings(data_dir=REPO / "data")).other_asgi_app.openapi()
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT, config=SchemathesisConfig.from_dict(CONFIG))
SCHEMA.app = SERVED
NO_COVERAGE = {**CONFIG, "phases": {**CONFIG["phases"], "coverage": {"enabled": False}}}
SCHEMA_WITHOUT_COVERAGE = schemathesis.openapi.from_dict(
    DOCUMENT, config=SchemathesisConfig.from_dict(NO_COVERAGE)
)
SCHEMA_WITHOUT_COVERAGE.app = SERVED


@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One app per database (the test's parameter) for every operation: auth on, a dataset, a
    queued job."""
    database = request.param
    with fresh_database(database) as database_url:
        settings = make_settings(
            tmp_path_factory.mktemp("data"),
            database_url,
            require_auth=True,
            max_cpu_jobs=0,  # jobs stay queued: nothing trains
            max_remote_jobs=0,
        )
        token = asyncio.run(_first_token(settings))  # as `thinker token create` makes it
        SERVED.app = create_app(settings)
        SERVED.database = database
        SERVED.auth = {"Authorization": f"Bearer {token}"}
        try:
            SERVED.ids = _store_examples()
            yield SERVED
        finally:
            shutdown_lifespans()  # the app's lifespan, started by the first request


async def _first_token(settings: Settings) -> str:
    url = settings.database_url
    engine = make_engine(url.get_secret_value() if url else sqlite_url(settings.data_dir))
    try:
        await migrate(engine)
        async with session_factory(engine)() as session:
            return (await create_token(session, "schemathesis"))[1]
    finally:
        await engine.dispose()


def _store_examples() -> dict[str, str]:
    """A dataset, a queued job on it and a spare token: generated requests name them."""
    with get_client(SERVED) as client:
        client.headers.update(SERVED.auth)
        with DATASET.open("rb") as file:
            dataset = client.post("/api/datasets", files={"file": ("train.jsonl", file)})
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        job = client.post("/api/jobs", json={"algorithm": "sl", "dataset_id": dataset_id})
        assert job.status_code == 201, job.text
        spare = client.post("/api/tokens", json={"name": "to revoke"})  # not the one in use
        assert spare.status_code == 201, spare.text
    ids = (dataset_id, job.json()["id"], spare.json()["id"])
    return dict(zip(("dataset_id", "job_id", "token_id"), ids, strict=True))


@schemathesis.hook  # global: a schema's own hooks cannot be `before_call`
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Half of the requests (chosen by a hash of the drawn values: the same on every run) name
    stored things instead; the others go as drawn. A hook here reaches every phase's cases."""
    body = case.body if isinstance(case.body, (dict, list, str, int, float)) else None
    drawn = json.dumps([case.path_parameters, case.query, body], sort_keys=True, default=str)
    if zlib.crc32(drawn.encode()) % 2:
        _name_stored(case)


def _name_stored(case: Any) -> None:
    """`case` with the ids of stored things in its path and, in a valid JSON body, the stored
    dataset and a built-in model to sample, with a few tokens (the tiny model on the CPU)."""
    negative = case.meta.is_negative_at if case.meta is not None else lambda _: False
    if case.path_parameters and not negative(ParameterLocation.PATH):
        ids = {k: SERVED.ids[k] for k in case.path_parameters if k in SERVED.ids}
        case.path_parameters = {**case.path_parameters, **ids}
    if isinstance(case.body, dict) and not negative(ParameterLocation.BODY):
        body = dict(case.body)
        if "dataset_id" in body:
            body["dataset_id"] = SERVED.ids["dataset_id"]
        if "model" in body:
            body["model"] = "thinker/tiny"
            if body.get("prompt") is not None and body.get("messages") is not None:
                body["messages"] = None  # /api/sample takes one of the two
            for key, most in (("max_tokens", 4), ("max_completion_tokens", 4), ("n", 2)):
                if type(body.get(key)) is int:
                    body[key] = min(body[key], most)
        case.body = body


# The operations (per database) whose refusal of a request without a token, or with a wrong
# one, `ignored_auth` has seen. It probes after each 2xx: about 1,850 extra requests for POST
# /api/jobs alone. Refusing belongs to the operation, not to a body, so one confirmation is
# enough, as in schemathesis's own runner (`auth_enforced_operations`).
AUTH_CONFIRMED: set[tuple[str, str]] = set()


@SCHEMA.parametrize()
@pytest.mark.parametrize("served", ["sqlite"], indirect=True)
def test_every_operation_answers_as_documented(case: Any, served: Served) -> None:
    _call_and_validate(case, served)


@SCHEMA_WITHOUT_COVERAGE.parametrize()
@pytest.mark.parametrize("served", ["postgresql"], indirect=True)
def test_every_operation_answers_as_documented_without_coverage(case: Any, served: Served) -> None:
    _call_and_validate(case, served)


def _call_and_validate(case: Any, served: Served) -> None:
    operation = (served.database, case.operation.label)
    confirmed = operation in AUTH_CONFIRMED
    response = case.call_and_validate(
        headers=served.auth, excluded_checks=[ignored_auth] if confirmed else None
    )
    negative_path = case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)
    if 200 <= response.status_code < 300 and not negative_path:  # the check probed
        AUTH_CONFIRMED.add(operation)
