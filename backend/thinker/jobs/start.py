"""Where a job starts: its base model checked, a library model resolved, its settings proposed.

A job names its start as `base_model`: a built-in, a hub id, a directory on the server, or a
library model id (`mdl_...`, a sampler checkpoint of an earlier job). A library model is
continued: the new job trains from that model's training state (`init_from`), on that
model's own base model, and a DPO job takes it as its frozen reference. The checks run at
creation, so a model that cannot be had is refused with its reason, not found missing by
the worker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from sqlalchemy import select

from thinker.algorithms.evaluation import names_weights
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rlhf import STAGE_NAMES as RLHF_STAGES
from thinker.bounds import MAX_STEPS
from thinker.engine.local import checkpoints
from thinker.engine.local.hub import ModelFacts, inspect_model
from thinker.errors import CheckpointError, ConfigError, DamagedError, NotFoundError
from thinker.jobs.request_config import COMMITTEE_DEFAULT, COMMITTEE_MAX
from thinker.jobs.spec import DatasetRef
from thinker.pipeline.proposal import DataFacts, Proposal, propose
from thinker.store import Job, Model

INSPECT_TIMEOUT_S = 30.0  # a hub that does not answer: refuse rather than hang the request


@dataclass(frozen=True)
class StartPoint:
    """The base model a job trains on and, when it continues a library model, that model."""

    base_model: str  # the model whose weights load (a library model's own base model)
    facts: ModelFacts
    parent: Model | None = None  # the library model continued
    init_from: str | None = None  # its training state: a directory here, or a tinker:// path
    sampler_path: str | None = None  # its sampler weights, the same way

    def overrides(self, algorithm: str) -> dict[str, str]:
        """The settings the server sets for a continued model (users may not)."""
        if self.init_from is None:
            return {}
        values = {"init_from": self.init_from}
        if algorithm == "dpo" and self.sampler_path is not None:
            values["reference_path"] = self.sampler_path  # DPO's reference: where it starts
        return values


def checkpoint_dirs(runs_dir: Path, model: Model) -> list[Path]:
    """Where a model's job keeps its checkpoints: its run directory, or its stage's in it."""
    checkpoints.check_name(model.job_id)  # server-made ids; checked since they become paths
    run_dir = runs_dir / model.job_id
    if model.stage:
        checkpoints.check_name(model.stage)
        return [run_dir / model.stage, run_dir]
    return [run_dir]


def local_checkpoint(runs_dir: Path, model: Model, path: str) -> Path:
    """The directory of one of `model`'s local checkpoints (`path` a tinker:// path).

    Raises:
        NotFoundError: its files are gone.
    """
    for storage_dir in checkpoint_dirs(runs_dir, model):
        try:
            return checkpoints.resolve(path, storage_dir)
        except CheckpointError:
            continue
    raise NotFoundError(
        f"the files of model {model.id} are gone: its job's run directory has no checkpoint {path}"
    )


async def resolve_start(session: Any, runs_dir: Path, base_model: str, backend: str) -> StartPoint:
    """Check `base_model` and say what the job starts from.

    Raises:
        ConfigError: An unknown library model, one of another backend or without a training
            state, or a base model that cannot be had (the reason, on `base_model`).
    """
    if base_model.startswith("mdl_"):
        return await _library_start(session, runs_dir, base_model, backend)
    if backend == "tinker":
        return StartPoint(base_model, _tinker_facts(base_model))
    return StartPoint(base_model, await _inspect(base_model))


async def _library_model(session: Any, model_id: str, backend: str, where: str, verb: str) -> Model:
    """The library model `model_id`, of `backend` (what the job would `verb` it with)."""
    model = await session.get(Model, model_id)
    if model is None:
        raise ConfigError(f"{where}: no model {model_id!r} in the library")
    if model.backend != backend:
        raise ConfigError(
            f"{where}: {model_id} was trained on the {model.backend} backend; {verb} it "
            f"with backend {model.backend}"
        )
    return model  # type: ignore[no-any-return]


async def _library_start(session: Any, runs_dir: Path, model_id: str, backend: str) -> StartPoint:
    model = await _library_model(session, model_id, backend, "base_model", "continue")
    if model.state_path is None:
        raise ConfigError(
            f"base_model: {model_id} has no training state to continue from (only sampler "
            "weights); choose a checkpoint that saved its state"
        )
    if backend == "tinker":
        facts = _tinker_facts(model.base_model)
        return StartPoint(model.base_model, facts, model, model.state_path, model.sampler_path)
    try:
        state = local_checkpoint(runs_dir, model, model.state_path)
        sampler = local_checkpoint(runs_dir, model, model.sampler_path)
    except NotFoundError as e:
        raise ConfigError(f"base_model: {e}") from None
    facts = await _inspect(model.base_model)
    return StartPoint(model.base_model, facts, model, str(state), str(sampler))


async def resolve_eval_models(
    session: Any, runs_dir: Path, base_model: str, config: dict[str, Any], backend: str
) -> tuple[StartPoint, dict[str, Any]]:
    """An eval job's models: its `base_model` first (the baseline), then `config.models`,
    each a base model (checked as a job's base model is), sampler weights, or a library
    model (its sampler weights, its name and id). Returns where the job starts (the
    baseline's base model) and the config with the models resolved.

    Raises:
        ConfigError: A model that cannot be had, named by where it is given.
    """
    given = config.get("models", [])
    if not isinstance(given, list):
        return await resolve_start(session, runs_dir, base_model, backend), config
    entries: list[tuple[str, Any]] = [("base_model", base_model)]
    entries += [(f"config.models[{i}]", entry) for i, entry in enumerate(given)]
    resolved: list[Any] = []
    start: StartPoint | None = None
    for where, entry in entries:
        ref = entry if isinstance(entry, str) else None
        if isinstance(entry, dict):
            ref = entry.get("id") or entry.get("model")
        if not isinstance(ref, str) or not ref:
            resolved.append(entry)  # the schema says what is wrong with it
            continue
        model, point = await _eval_model(session, runs_dir, ref, backend, where)
        if isinstance(entry, dict) and entry.get("name") is not None:
            model["name"] = entry["name"]
        if isinstance(entry, dict) and model.get("base_model") is None:
            model["base_model"] = entry.get("base_model")
        resolved.append(model)
        start = start or point
    assert start is not None  # the base model comes first
    scorer = config.get("scorer")
    if isinstance(scorer, dict) and str(scorer.get("reward_model", "")).startswith("mdl_"):
        config = {**config, "scorer": await _reward_model(session, runs_dir, scorer, backend)}
    if (
        isinstance(scorer, dict)
        and not scorer.get("judge_url")
        and str(scorer.get("judge_model", "")).startswith("mdl_")
    ):
        where = "config.scorer.judge_model"
        judge, _ = await _eval_model(session, runs_dir, scorer["judge_model"], backend, where)
        scorer = {**scorer, "judge_model": judge["model"], "judge_base": judge["base_model"]}
        config = {**config, "scorer": scorer}
    return start, {**config, "models": resolved}


RM_DEFAULTS = RewardModelConfig.model_fields  # what an rlhf job's rm stage trains by default


def rm_settings(job: Job | None) -> dict[str, Any]:
    """The settings a reward model trained with: an rm job's config, an rlhf job's rm stage."""
    if job is None:
        return {}
    config = job.config or {}
    return config if job.algorithm == "rm" else config.get("rm", {})  # type: ignore[no-any-return]


async def resolve_review(
    session: Any, runs_dir: Path, base_model: str, config: dict[str, Any], backend: str
) -> tuple[StartPoint, dict[str, Any]]:
    """A review job's committee: the library reward model named as its `base_model` (an RLHF
    job's rm stage) and the `config.committee` - 1 checkpoints its stage saved before it, oldest
    first, with the head and max_length it trained with. Returns where the job starts (the
    reward model as its parent, on its base model) and the config with the committee in it.

    Raises:
        ConfigError: Not a library reward model, or its files are gone.
    """
    if not base_model.startswith("mdl_"):
        raise ConfigError(
            f"base_model: a review job reviews a library reward model (mdl_...), not {base_model!r}"
        )
    model = await _library_model(session, base_model, backend, "base_model", "review")
    if model.stage != "rm":
        raise ConfigError(
            f"base_model: {model.id} is not a reward model (an RLHF job's rm stage trains one)"
        )
    config = dict(config)
    size = config.pop("committee", COMMITTEE_DEFAULT)
    if type(size) is not int or not 0 < size <= COMMITTEE_MAX:
        raise ConfigError(f"config.committee: a whole number from 1 to {COMMITTEE_MAX}")
    rows = await session.scalars(
        select(Model)
        .where(Model.job_id == model.job_id, Model.stage == "rm", Model.step <= model.step)
        .order_by(Model.step.desc())
        .limit(size)
    )
    committee = list(rows)[::-1]  # oldest first: the reviewed model last
    paths = []
    for member in committee:
        path = member.sampler_path
        if backend == "local":
            try:
                path = str(local_checkpoint(runs_dir, member, path))
            except NotFoundError as e:
                raise ConfigError(f"base_model: {e}") from None
        paths.append(path)
    job = await session.get(Job, model.job_id)
    trained = rm_settings(job)
    config.update(
        reward_models=paths,
        head=trained.get("head", RM_DEFAULTS["head"].default),
        max_length=trained.get("max_length") or RM_DEFAULTS["max_length"].default,
    )
    facts = (
        _tinker_facts(model.base_model) if backend == "tinker" else await _inspect(model.base_model)
    )
    return StartPoint(model.base_model, facts, model, None, None), config


async def _reward_model(
    session: Any, runs_dir: Path, scorer: dict[str, Any], backend: str
) -> dict[str, Any]:
    """An eval scorer naming a library reward model (an RLHF job's rm stage): its weights,
    and its head, base model and max_length from the job that trained it."""
    where = "config.scorer.reward_model"
    model = await _library_model(session, scorer["reward_model"], backend, where, "score")
    if model.stage != "rm":
        raise ConfigError(
            f"{where}: {model.id} is not a reward model (an RLHF job's rm stage trains one)"
        )
    path = model.sampler_path
    if backend == "local":
        try:
            path = str(local_checkpoint(runs_dir, model, path))
        except NotFoundError as e:
            raise ConfigError(f"{where}: {e}") from None
    job = await session.get(Job, model.job_id)
    trained = rm_settings(job)
    return {
        **scorer,
        "reward_model": path,
        "reward_model_base": model.base_model,
        "head": trained.get("head", RM_DEFAULTS["head"].default),
        "max_length": scorer.get("max_length")
        or trained.get("max_length")
        or RM_DEFAULTS["max_length"].default,
    }


async def _eval_model(
    session: Any, runs_dir: Path, ref: str, backend: str, where: str
) -> tuple[dict[str, Any], StartPoint]:
    if not ref.startswith("mdl_"):
        if names_weights(ref):
            return {"model": ref}, StartPoint(ref, _tinker_facts(ref))  # sampler weights
        try:
            point = await resolve_start(session, runs_dir, ref, backend)
        except ConfigError as e:
            raise ConfigError(str(e).replace("base_model:", f"{where}:", 1)) from None
        return {"model": ref}, point
    model = await _library_model(session, ref, backend, where, "evaluate")
    path = model.sampler_path
    if path is None:
        raise ConfigError(f"{where}: {ref} has no sampler weights to answer with")
    if backend == "local":
        try:
            path = str(local_checkpoint(runs_dir, model, path))
        except NotFoundError as e:
            raise ConfigError(f"{where}: {e}") from None
        facts = await _inspect(model.base_model)
    else:
        facts = _tinker_facts(model.base_model)
    entry = {"model": path, "name": model.name, "id": model.id, "base_model": model.base_model}
    return entry, StartPoint(model.base_model, facts)  # evaluated, not continued: no parent


async def _inspect(name: str) -> ModelFacts:
    try:
        return await asyncio.wait_for(asyncio.to_thread(inspect_model, name), INSPECT_TIMEOUT_S)
    except TimeoutError:
        raise ConfigError(
            f"base_model: fetching {name!r}'s config from the Hugging Face hub took longer than "
            f"{INSPECT_TIMEOUT_S:.0f} s; check the server's network, or give a directory"
        ) from None


def _tinker_facts(name: str) -> ModelFacts:
    """Tinker's models are pretrained hub models the server does not load; the proposal
    needs the family and width, which their names give well enough."""
    lowered = name.lower()
    hidden = 4096
    for size, width in (("0.6b", 1024), ("1b", 2048), ("3b", 3072), ("4b", 2560), ("30b", 2048)):
        if size in lowered:
            hidden = width
    model_type = "qwen3" if "qwen" in lowered else "llama"
    return ModelFacts(name, "tinker", False, model_type, hidden, None)


def check_dataset_files(
    algorithm: str,
    dataset_id: str | None,
    config: dict[str, Any],
    lookup: Callable[[str], DatasetRef | None],
) -> None:
    """Refuse a job on a dataset whose stored file is gone (its row alone is no data).

    Raises:
        DamagedError: The first such dataset, with its id and path.
    """
    parts = (
        [config, *(config.get(s) for s in ("sl", "rm", "rl"))] if algorithm == "rlhf" else [config]
    )
    named = [dataset_id]
    for part in parts:
        if isinstance(part, dict):
            named += [part.get("dataset_id"), part.get("eval_dataset_id")]
    for ref in (lookup(i) for i in named if isinstance(i, str)):
        if ref is not None and not ref.path.is_file():
            raise DamagedError(
                f"dataset {ref.id}: its file {ref.path} is missing on disk (removed outside "
                "Thinker); restore the file, or upload the data again as a new dataset"
            )


def dataset_facts(ref: DatasetRef) -> DataFacts:
    """Rows, and for RL problems the longest reference answer (max_tokens follows it)."""
    longest = 0
    if ref.kind == "problems":
        with open(ref.path, encoding="utf-8") as f:
            for line in f:
                answer = json.loads(line).get("answer")
                if isinstance(answer, str):
                    longest = max(longest, len(answer))
    return DataFacts(ref.id, ref.rows, longest)


def proposal_for(
    algorithm: str,
    start: StartPoint,
    dataset_id: str | None,
    config: dict[str, Any],
    lookup: Callable[[str], DatasetRef | None],
) -> Proposal:
    """The proposal for a job request; datasets it cannot find are left to build_spec to
    report (with the rest of the request's problems)."""
    ids = {"main": dataset_id}
    if algorithm == "rlhf":
        for stage in ("rm", "rl"):
            part = config.get(stage)
            ids[stage] = part.get("dataset_id") if isinstance(part, dict) else None
    facts = {}
    for role, ds_id in ids.items():
        ref = lookup(ds_id) if isinstance(ds_id, str) else None
        facts[role] = dataset_facts(ref) if ref else DataFacts("", 0)
    return propose(algorithm, start.facts, facts, config, continues=start.parent is not None)


def job_config(algorithm: str, proposal: Proposal, given: dict[str, Any]) -> dict[str, Any]:
    """The config a job is created with: what the request gave, the rest proposed. An rlhf
    proposal holds its stages only: the settings given once for all three (lora_rank, seed,
    ...) are kept from the request, else they would be neither used nor checked."""
    config = proposal.request_config()
    if algorithm != "rlhf":
        return config
    return {**{k: v for k, v in given.items() if k not in RLHF_STAGES}, **config}


def fit_problems(
    algorithm: str, proposal: Proposal, config: dict[str, Any], facts: ModelFacts
) -> list[str]:
    """What the settings ask beyond this data and model, with where: a batch larger than
    the rows to train on, more steps in all than a job may take (epochs x steps per epoch),
    a LoRA rank above the model's hidden size."""
    problems = []
    for stage in proposal.stages:
        part = config.get(stage.stage, {}) if algorithm == "rlhf" else config
        part = part if isinstance(part, dict) else {}
        where = f"config.{stage.stage}" if algorithm == "rlhf" else "config"
        key = "groups_per_batch" if stage.stage == "rl" else "batch_size"
        value = part.get(key)
        if _is_int(value) and stage.train_rows and value > stage.train_rows:
            problems.append(
                f"{where}.{key}: {value} is larger than the {stage.train_rows} training rows "
                f"of the dataset; use at most {stage.train_rows}"
            )
        if stage.steps > MAX_STEPS and "max_steps" not in part:
            problems.append(
                f"{where}.num_epochs: {stage.steps:,} steps in all, more than the "
                f"{MAX_STEPS:,} a job may take; lower num_epochs or set max_steps"
            )
    rank = config.get("lora_rank")
    if _is_int(rank) and facts.hidden_size and rank > facts.hidden_size:
        problems.append(
            f"config.lora_rank: {rank} is larger than the hidden size of {facts.name} "
            f"({facts.hidden_size}); use at most {facts.hidden_size}"
        )
    return problems


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
