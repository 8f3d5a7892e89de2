"""From a job request to the training section its worker runs, checked before it is queued.

A request names datasets by id (`dataset_id`, and `eval_dataset_id` or, for rlhf,
`config.rm.dataset_id` / `config.rl.dataset_id`), never by path: the server turns ids into
the stored files. Every problem is collected and raised at once as one ConfigError, each
named by where it is (`config.learning_rate: ...`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from thinker.data.kinds import TRAINS_ON
from thinker.errors import ConfigError
from thinker.jobs.request_config import SERVER_SET, json_type_problems
from thinker.pipeline.config import JobConfig, find_secrets, format_error

RLHF_STAGE_ALGORITHMS = {"sl": "sl", "rm": "rm", "rl": "rl"}
_ADAPTER: TypeAdapter[Any] = TypeAdapter(JobConfig)
_MISSING = "/nonexistent/dataset.jsonl"


@dataclass
class DatasetRef:
    id: str
    kind: str
    path: Path
    rows: int = 0


@dataclass
class JobSpec:
    """What the worker runs (`section`, paths resolved) and the datasets it reads, by role."""

    section: dict[str, Any]
    datasets: dict[str, DatasetRef]


def build_spec(
    algorithm: str,
    backend: str,
    base_model: str,
    dataset_id: str | None,
    config: dict[str, Any],
    lookup: Callable[[str], DatasetRef | None],
    server_set: dict[str, str] | None = None,
    problems: list[str] | None = None,
) -> JobSpec:
    """Resolve dataset ids and validate the whole config; raises ConfigError listing every
    problem (with `problems` found before). `server_set` holds the SERVER_SET values the
    server itself chose (a continued model's `init_from` and DPO `reference_path`)."""
    raw = _copy(config)
    problems = [*(problems or []), *json_type_problems(algorithm, config), *_request_problems(raw)]
    datasets: dict[str, DatasetRef] = {}
    parts = _parts(algorithm, raw, problems)
    for where, part, stage_algorithm, top in parts:
        problems += _server_set_keys(part, where)
        main_id = dataset_id if top else part.pop("dataset_id", None)
        problems += _resolve(part, "dataset", main_id, where, stage_algorithm, datasets, lookup)
        eval_id = part.pop("eval_dataset_id", None)
        if eval_id is not None:
            problems += _resolve(
                part, "eval_dataset", eval_id, where, stage_algorithm, datasets, lookup
            )
    # also when a dataset is missing (a placeholder stands in): report everything at once
    section = _validate(raw, algorithm, backend, base_model, server_set or {}, problems)
    if problems:
        raise ConfigError("invalid job", list(dict.fromkeys(problems)))
    return JobSpec(section, datasets)


def config_problems(
    algorithm: str, backend: str, base_model: str, config: dict[str, Any]
) -> list[str]:
    """The problems of a request's own settings, its datasets aside (what a proposal refuses:
    a proposal is asked for before every dataset is chosen)."""
    raw = _copy(config)
    problems = [*json_type_problems(algorithm, config), *_request_problems(raw)]
    if algorithm == "rlhf":
        for stage in RLHF_STAGE_ALGORITHMS:
            raw.setdefault(stage, {})
    for where, part, _, top in _parts(algorithm, raw, problems):
        problems += _server_set_keys(part, where)
        if not top:
            problems += _id_problems(part.pop("dataset_id", None), f"{where}.dataset_id")
        part["dataset"] = _MISSING
        eval_id = part.pop("eval_dataset_id", None)
        problems += _id_problems(eval_id, f"{where}.eval_dataset_id")
        if eval_id is not None:
            part["eval_dataset"] = _MISSING
    _validate(raw, algorithm, backend, base_model, {}, problems)
    return list(dict.fromkeys(problems))


def _id_problems(dataset_id: object, field: str) -> list[str]:
    """A dataset id that is not one (the datasets themselves may not be chosen yet)."""
    if dataset_id is None or isinstance(dataset_id, str):
        return []
    return [f"{field}: Input should be a valid string"]


def _request_problems(raw: dict[str, Any]) -> list[str]:
    """Secrets and top-level keys given in `config` (each dropped from `raw`)."""
    problems = find_secrets(raw, "config")
    for key in ("algorithm", "backend", "base_model"):
        if key in raw:
            problems.append(f"config.{key}: give it at the top level of the request, not in config")
            raw.pop(key)
    return problems


def _validate(
    raw: dict[str, Any],
    algorithm: str,
    backend: str,
    base_model: str,
    server_set: dict[str, str],
    problems: list[str],
) -> dict[str, Any]:
    """The section as the worker reads it, or the schema's problems added to `problems`."""
    fixed = {"algorithm": algorithm, "backend": backend, "base_model": base_model}
    section = {**raw, **server_set, **fixed}
    try:
        validated = _ADAPTER.validate_python(section)
    except ValidationError as e:
        problems += [_config_error(err) for err in e.errors()]
        return section
    return validated.model_dump(mode="json", exclude={"log_path"})


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _parts(
    algorithm: str, raw: dict[str, Any], problems: list[str]
) -> list[tuple[str, dict[str, Any], str, bool]]:
    """(where, section, its algorithm, whether the request's dataset_id is its dataset)."""
    if algorithm != "rlhf":
        return [("config", raw, algorithm, True)]
    raw.setdefault("sl", {})  # the SL stage may take every default; its data is the request's
    parts = []
    for stage in ("sl", "rm", "rl"):
        part = raw.get(stage)
        if not isinstance(part, dict):
            problems.append(
                f"config.{stage}: a mapping of the {stage} stage's settings, with a dataset_id"
            )
            raw[stage] = {"dataset": _MISSING}  # reported once, here, not again by the schema
            continue
        parts.append((f"config.{stage}", part, stage, stage == "sl"))
    return parts


def _server_set_keys(part: dict[str, Any], where: str) -> list[str]:
    problems = []
    for key in SERVER_SET:
        if key in part:
            part.pop(key)
            hint = f"use {key}_id with a dataset id" if "dataset" in key else "set by the server"
            problems.append(f"{where}.{key}: paths are not accepted in a job ({hint})")
    return problems


def _resolve(
    part: dict[str, Any],
    key: str,
    dataset_id: object,
    where: str,
    algorithm: str,
    datasets: dict[str, DatasetRef],
    lookup: Callable[[str], DatasetRef | None],
) -> list[str]:
    field = "dataset_id" if where == "config" and key == "dataset" else f"{where}.{key}_id"
    part[key] = _MISSING  # until resolved: lets the schema check the rest
    if dataset_id is None:
        return [
            f"{field}: required (the id of a dataset of kind {' or '.join(TRAINS_ON[algorithm])})"
        ]
    ref = lookup(str(dataset_id)) if isinstance(dataset_id, str) else None
    if ref is None:
        return [f"{field}: no dataset with id {dataset_id!r}"]
    if ref.kind not in TRAINS_ON[algorithm]:
        uses = "answers" if algorithm in ("batch", "eval") else "trains on"
        return [
            f"{field}: dataset {ref.id} holds {ref.kind} rows; {algorithm} {uses} "
            f"{' or '.join(TRAINS_ON[algorithm])}"
        ]
    part[key] = str(ref.path)
    datasets[f"{where}.{key}"] = ref
    return []


def _config_error(error: Any) -> str:
    """`config.learning_rate: ...` (the pipeline's wording, rooted at `config`)."""
    message = format_error({**error, "loc": ("training", *error["loc"])})
    return "config" + message.removeprefix("training")
