"""A job request's `config` per algorithm, as the pydantic models the OpenAPI document shows.

Each is derived from the section the worker runs (pipeline/config.py's SLTraining, DPOTraining,
RLTraining and RLHFTraining, whose stages are SLConfig, RewardModelConfig and RLConfig), so a
field keeps its type, bounds, default and description, less what a request does not give:
the SERVER_SET keys (paths), the keys given beside `config` (algorithm, backend, base_model)
and a pipeline stage's `name`; datasets are named by id (`eval_dataset_id`, and rlhf's
`rm.dataset_id` and `rl.dataset_id`), each with the kinds it takes (`x-dataset-kinds`). A field
the proposal fills when it is left out says so (`x-proposed`) instead of claiming a default.

build_spec (spec.py) checks a request against the sections themselves, with every problem at
once; these models add one check, json_type_problems: a request's JSON types are the document's
(a number is a JSON number), where a YAML config may give `1e-4` as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from copy import copy
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictInt,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo

from thinker.algorithms.evaluation_config import MAX_MODELS, EvalModel
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.rlhf import SHARED_FIELDS as RLHF_SHARED
from thinker.algorithms.sl_config import SLConfig
from thinker.data.kinds import TRAINS_ON, DatasetKind
from thinker.engine.local.hub import ModelFacts
from thinker.pipeline.config import (
    ALGORITHMS,
    BatchRun,
    DPOTraining,
    EvalRun,
    ReviewRun,
    RLHFTraining,
    RLTraining,
    RMTraining,
    SLTraining,
)
from thinker.pipeline.proposal import DataFacts, propose
from thinker.rewards.config import RewardConfig

# Keys that would name files or checkpoints outside the job: the server sets them.
SERVER_SET = ("dataset", "eval_dataset", "log_path", "init_from", "reference_path")
# Given beside `config` (refused in it), or a pipeline stage's directory: not a job's setting.
NOT_IN_CONFIG = ("algorithm", "backend", "base_model", "name")
# The dashboard shows descriptions as help: said for users, not for API clients (x-proposed
# tells those, and POST /api/jobs/proposal gives the value).
PROPOSED_NOTE = "Left out, the server proposes it from the data and the base model."
PREFIX = {
    "sl": "SL",
    "dpo": "DPO",
    "rl": "RL",
    "rlhf": "RLHF",
    "rm": "RM",
    "batch": "Batch",
    "eval": "Eval",
    "review": "Review",
}


def proposed_keys() -> dict[str, frozenset[str]]:
    """The settings the proposal fills when a request leaves them out, by stage (sl, dpo, rm,
    rl): the keys `propose` returns for an empty request, on a model with random weights and
    on a pretrained one."""
    models = (
        ModelFacts("scratch", "builtin", True, "llama", 64, None),
        ModelFacts("pretrained", "hub", False, "qwen3", 1024, None),
    )
    data = DataFacts("", 1000, 10)
    found: dict[str, set[str]] = {}
    for model in models:
        for algorithm in ALGORITHMS:
            proposal = propose(algorithm, model, {"main": data, "rm": data, "rl": data}, {})
            for stage in proposal.stages:
                found.setdefault(stage.stage, set()).update(stage.config)
    return {stage: frozenset(keys) for stage, keys in found.items()}


PROPOSED = proposed_keys()


def dataset_id_field(kinds: Collection[DatasetKind], what: str, then: str = "") -> Any:
    """A dataset id, with the kinds of dataset it may name (`x-dataset-kinds`)."""
    return Field(
        None,
        description=f"{what}, of kind {' or '.join(kinds)}{then}.",
        json_schema_extra={"x-dataset-kinds": [str(k) for k in kinds]},
    )


def _eval_dataset_id(stage: str) -> tuple[Any, Any]:
    field = dataset_id_field(
        TRAINS_ON[stage],
        "The id of a held-out dataset",
        "; left out, eval_fraction of the dataset is held out",
    )
    return (str | None, field)


def _mark_proposed(proposed: frozenset[str]) -> Callable[[dict[str, Any]], None]:
    """The schema of a proposed field: `x-proposed` and why, instead of a default."""

    def mark(schema: dict[str, Any]) -> None:
        for key in proposed & schema.get("properties", {}).keys():
            field = schema["properties"][key]
            field.pop("default", None)
            field["x-proposed"] = True
            field["description"] = f"{field.get('description', '')} {PROPOSED_NOTE}".strip()

    return mark


def _derive(
    name: str,
    doc: str,
    source: type[BaseModel],
    drop: Collection[str],
    proposed: frozenset[str] = frozenset(),
    added: dict[str, tuple[Any, Any]] | None = None,
) -> type[BaseModel]:
    """`source`'s fields less `drop`, with `added` (which may replace some)."""
    added = added or {}
    fields: dict[str, Any] = {
        key: (info.annotation, _with_default_shown(info))
        for key, info in source.model_fields.items()
        if key not in drop and key not in added
    }
    config = ConfigDict(extra="forbid", allow_inf_nan=False)
    if proposed:
        config["json_schema_extra"] = _mark_proposed(proposed)
    return create_model(  # type: ignore[no-any-return, call-overload]
        name, __config__=config, __doc__=doc, __module__=__name__, **fields, **added
    )


def _with_default_shown(info: FieldInfo) -> FieldInfo:
    """A copy of `info` whose schema shows its default, also one a factory makes (pydantic
    leaves those out of schemas)."""
    info = copy(info)
    if info.default_factory is not None:
        made = info.get_default(call_default_factory=True, validated_data={})
        annotation: Any = info.annotation
        default = TypeAdapter(annotation).dump_python(made, mode="json")
        info.json_schema_extra = {**(info.json_schema_extra or {}), "default": default}  # type: ignore[dict-item]
    return info


def _section(algorithm: str, source: type[BaseModel]) -> type[BaseModel]:
    """The config of an sl, dpo or rl job."""
    return _derive(
        f"{PREFIX[algorithm]}JobConfig",
        f"The settings of a {PREFIX[algorithm]} job; each left out takes its default or the "
        "server's proposal.",
        source,
        {*SERVER_SET, *NOT_IN_CONFIG},
        PROPOSED[algorithm],
        {"eval_dataset_id": _eval_dataset_id(algorithm)},
    )


def _stage(stage: str, source: type[BaseModel], dataset: str | None) -> type[BaseModel]:
    """An rlhf stage's section: its algorithm's settings less those given once for all."""
    added: dict[str, tuple[Any, Any]] = {"eval_dataset_id": _eval_dataset_id(stage)}
    if dataset is not None:
        field = dataset_id_field(TRAINS_ON[stage], f"Required: the id of the {dataset}")
        added["dataset_id"] = (str | None, field)
    if stage == "rl":  # scored by the judge the rm stage trains (RLHFConfig sets the type)
        judge = RewardConfig.model_validate({"type": "reward_model"})
        field = Field(
            default_factory=judge.model_copy,
            description="The judge the rm stage trains scores the completions: reward_model is "
            "the only type (null: the judge, as left out).",
            json_schema_extra={"default": judge.model_dump(mode="json")},
        )
        added["reward"] = (RewardConfig | None, field)
    return _derive(
        f"RLHF{PREFIX[stage]}StageConfig",
        f"The settings of the RLHF job's {stage} stage.",
        source,
        {*SERVER_SET, *NOT_IN_CONFIG, *RLHF_SHARED},
        PROPOSED[stage],
        added,
    )


def _shared(key: str) -> tuple[Any, Any]:
    """A field rlhf gives once for its stages, described as the SL stage describes it."""
    info = copy(RLHFTraining.model_fields[key])
    described = SLConfig.model_fields[key].description
    info.description = f"{described} One value for the three stages."
    return (info.annotation, info)


def _stage_field(model: type[BaseModel], description: str, default: bool) -> tuple[Any, Any]:
    extra: JsonDict | None = {"default": {}} if default else None
    field: Any = Field(default_factory=dict, description=description, json_schema_extra=extra)
    return (model, field)


SLJobConfig = _section("sl", SLTraining)
RMJobConfig = _section("rm", RMTraining)
DPOJobConfig = _section("dpo", DPOTraining)
RLJobConfig = _section("rl", RLTraining)
RLHFJobConfig = _derive(
    "RLHFJobConfig",
    "The settings of an RLHF job: those of every stage once, then each stage's own.",
    RLHFTraining,
    {*SERVER_SET, *NOT_IN_CONFIG},
    added={
        **{key: _shared(key) for key in RLHF_SHARED if key not in NOT_IN_CONFIG},
        "sl": _stage_field(
            _stage("sl", SLConfig, None),
            "Stage 1: SL on the demonstrations (the request's dataset_id).",
            default=True,
        ),
        "rm": _stage_field(
            _stage("rm", RewardModelConfig, "preference pairs the judge learns from"),
            "Stage 2: a reward model (a judge) trained on preference pairs; required, with its "
            "dataset_id.",
            default=False,
        ),
        "rl": _stage_field(
            _stage("rl", RLConfig, "prompts the policy answers"),
            "Stage 3: RL from the SL stage's weights, scored by the judge; required, with its "
            "dataset_id.",
            default=False,
        ),
    },
)
BatchJobConfig = _derive(
    "BatchJobConfig",
    "The settings of a batch job (a model answers every row of its dataset over a pool of "
    "actors); each left out takes its default.",
    BatchRun,
    {*SERVER_SET, *NOT_IN_CONFIG},
)
EvalJobConfig = _derive(
    "EvalJobConfig",
    "The settings of an eval job (the base model, then each of `models`, answer every row of "
    "its dataset; the answers are scored and every pair of models compared); each left out "
    "takes its default.",
    EvalRun,
    {*SERVER_SET, *NOT_IN_CONFIG},
    added={
        "models": (
            list[EvalModel | str],
            Field(
                default_factory=list,
                max_length=MAX_MODELS - 1,
                description="The models evaluated after the base model, each compared with it "
                "and with one another: a library model (mdl_...), a base model, or sampler "
                "weights on the server; an object gives it a `name`.",
                json_schema_extra={"default": []},
            ),
        )
    },
)
# A review job's committee: the server puts in the reward model's checkpoints, head and length.
REVIEW_SERVER_SET = ("reward_models", "head", "max_length")
COMMITTEE_DEFAULT, COMMITTEE_MAX = 3, 8
ReviewJobConfig = _derive(
    "ReviewJobConfig",
    "The settings of a review job (the checkpoints of the reward model named as base_model "
    "score every preference pair of its dataset; the least certain make a queue for a "
    "person); each left out takes its default.",
    ReviewRun,
    {*SERVER_SET, *NOT_IN_CONFIG, *REVIEW_SERVER_SET},
    added={
        "committee": (
            StrictInt,
            Field(
                COMMITTEE_DEFAULT,
                gt=0,
                le=COMMITTEE_MAX,
                description="How many of the reward model's checkpoints score each pair: it "
                "and the ones its job saved before it, the latest first.",
            ),
        )
    },
)
JOB_CONFIGS: dict[str, type[BaseModel]] = {
    "sl": SLJobConfig,
    "dpo": DPOJobConfig,
    "rl": RLJobConfig,
    "rlhf": RLHFJobConfig,
    "rm": RMJobConfig,
    "batch": BatchJobConfig,
    "eval": EvalJobConfig,
    "review": ReviewJobConfig,
}


def by_algorithm(
    family: str, fields: type[BaseModel], doc: str, algorithms: tuple[str, ...] = ALGORITHMS
) -> type[RootModel[Any]]:
    """`family` (a request body) as one model per algorithm, told apart by `algorithm`: each
    is `fields` with that algorithm's `config` and the kinds of its `dataset_id`."""
    variants = []
    for algorithm in algorithms:
        main = "sl" if algorithm == "rlhf" else algorithm
        what, then = "The id of the dataset to train on", ""
        if algorithm == "batch":
            what = "The id of the dataset whose rows the model answers"
        if algorithm == "eval":
            what = "The id of the eval set the models answer"
        if algorithm == "rm":
            what = "The id of the preference pairs the reward model learns from"
        if algorithm == "review":
            what = "The id of the preference pairs the reward model's checkpoints score"
        if algorithm == "rlhf":
            what = "The id of the SL stage's demonstrations"
            then = "; config.rm and config.rl name theirs"
        config: Any = Field(
            default_factory=dict,
            description="The algorithm's settings; each left out takes its default or the "
            "server's proposal.",
            json_schema_extra={"default": {}},
        )
        variants.append(
            create_model(
                f"{PREFIX[algorithm]}{family}",
                __base__=fields,
                __module__=__name__,
                algorithm=(Literal[algorithm], ...),  # type: ignore[arg-type]
                dataset_id=(str | None, dataset_id_field(TRAINS_ON[main], what, then)),
                config=(JOB_CONFIGS[algorithm], config),
            )
        )
    # a union of classes made here: no annotation can name it
    union: Any = Annotated[Union[tuple(variants)], Field(discriminator="algorithm")]  # noqa: UP007
    return create_model(  # type: ignore[no-any-return, call-overload]
        family,
        __base__=RootModel[union],
        __module__=__name__,
        __doc__=doc,
    )


def json_type_problems(algorithm: str, config: dict[str, Any]) -> list[str]:
    """The settings a request gives as JSON of another type than the document's, though the
    configs take them (YAML reads `1e-4` as text): a number as text, 0 or 1 for a boolean.
    Other problems are left to the config's own checks, in their words."""
    model = JOB_CONFIGS.get(algorithm)
    if model is None:
        return []
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    try:
        adapter.validate_json(json.dumps(config), strict=True)
    except ValidationError as e:
        strict = e.errors()
    else:
        return []
    try:
        adapter.validate_python(config)
        lax: set[tuple[Any, ...]] = set()
    except ValidationError as e:
        lax = {tuple(err["loc"]) for err in e.errors()}
    return [
        f"config.{'.'.join(str(part) for part in err['loc'])}: {err['msg']}"
        for err in strict
        if tuple(err["loc"]) not in lax
    ]
