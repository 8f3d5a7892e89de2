"""The typed job configs of the OpenAPI document (jobs/request_config.py) against what the
server does with a request: a field left out gets the default the document shows, the fields
marked `x-proposed` are exactly those the proposal fills, and a request that gives every
documented field is accepted as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, platform_of

DATA = {
    "sl": ("arithmetic/train.jsonl", "chat"),
    "dpo": ("preferences/train.jsonl", "preferences"),
    "rm": ("preferences/train.jsonl", "preferences"),
    "rl": ("rl/train.jsonl", "problems"),
}
STAGES = ("sl", "rm", "rl")
IDS = ("dataset_id", "eval_dataset_id")


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _configs(spec: dict[str, Any], algorithm: str) -> dict[str | None, dict[str, Any]]:
    """The documented config of a POST /api/jobs body, by stage (None: the top level)."""
    union = spec["components"]["schemas"]["JobCreate"]
    body = _resolve(spec, {"$ref": union["discriminator"]["mapping"][algorithm]})
    config = _resolve(spec, body["properties"]["config"])
    stages = STAGES if algorithm == "rlhf" else ()
    return {None: config} | {s: _resolve(spec, config["properties"][s]) for s in stages}


def _request(client: TestClient, algorithm: str) -> dict[str, Any]:
    """A job request leaving every setting out (rlhf: its stages' datasets only)."""

    def dataset(role: str) -> str:
        path, kind = DATA[role]
        return add_dataset(client, EXAMPLES / path, kind)

    if algorithm != "rlhf":
        return {"algorithm": algorithm, "dataset_id": dataset(algorithm), "config": {}}
    config = {"rm": {"dataset_id": dataset("rm")}, "rl": {"dataset_id": dataset("rl")}}
    return {"algorithm": "rlhf", "dataset_id": dataset("sl"), "config": config}


def _without_nulls(value: Any) -> Any:
    """As the document holds a default: FastAPI leaves out nulls (`exclude_none`)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _part(config: dict[str, Any], stage: str | None) -> dict[str, Any]:
    return config if stage is None else config[stage]  # type: ignore[no-any-return]


@pytest.mark.parametrize("algorithm", ["sl", "dpo", "rl", "rlhf"])
def test_the_documented_config_is_what_the_server_does(held: TestClient, algorithm: str) -> None:
    spec = held.app.other_asgi_app.openapi()  # type: ignore[attr-defined]
    request = _request(held, algorithm)
    proposal = held.post("/api/jobs/proposal", json=request)
    assert proposal.status_code == 200, proposal.text
    proposed = proposal.json()["config"]
    created = held.post("/api/jobs", json=request)
    assert created.status_code == 201, created.text
    run = platform_of(held).settings.runs_dir / created.json()["id"]
    section = json.loads((run / "job.json").read_text())["section"]

    everything: dict[str, Any] = {}  # every documented field: its default, or the proposal's
    for stage, schema in _configs(spec, algorithm).items():
        fields = schema["properties"]
        marked = {key for key, field in fields.items() if field.get("x-proposed")}
        filled = set(_part(proposed, stage)) - {*IDS, *STAGES}
        assert marked == filled, (stage, marked, filled)
        given = everything if stage is None else everything.setdefault(stage, {})
        for key, field in fields.items():
            if key in STAGES or key in IDS:
                continue
            if key in marked:
                assert "default" not in field, (stage, key)
                given[key] = _part(proposed, stage)[key]
                continue
            documented = field.get("default")  # no default in the document: null
            assert _without_nulls(_part(section, stage)[key]) == documented, (stage, key)
            given[key] = documented

    for stage in ("rm", "rl") if algorithm == "rlhf" else ():
        everything[stage]["dataset_id"] = request["config"][stage]["dataset_id"]
    again = held.post("/api/jobs", json={**request, "config": everything})
    assert again.status_code == 201, again.text
    assert again.json()["config"] == everything


@pytest.mark.postgresql
def test_a_request_gives_numbers_and_booleans_as_json_does(held: TestClient) -> None:
    """As the document types them. The configs take more (text for a number, as YAML reads
    `1e-4`; 0 or 1 for a boolean); a request is held to the document's types."""
    request = _request(held, "rl")
    config = {"learning_rate": "0.001", "drop_constant_groups": 0, "temperature": True}
    for url in ("/api/jobs", "/api/jobs/proposal"):
        refused = held.post(url, json={**request, "config": config})
        assert refused.status_code == 422, refused.text
        assert sorted(refused.json()["problems"]) == [
            "config.drop_constant_groups: Input should be a valid boolean",
            "config.learning_rate: Input should be a valid number",
            "config.temperature: Input should be a number, not true or false",
        ]
