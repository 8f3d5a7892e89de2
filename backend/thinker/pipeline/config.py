"""The pipeline config: one YAML file describing validate -> train -> eval.

```yaml
name: arithmetic
runs_dir: ../runs                 # default: ../runs next to this file
tests: {path: ../tests/unit, markers: "not slow", args: ["-q"], enabled: true}
data_validation: {path: ../data/examples/arithmetic/train.jsonl, kind: chat}
training: {algorithm: sl, dataset: ../data/examples/arithmetic/train.jsonl, ...}
evaluation: {dataset: ../data/examples/arithmetic/test.jsonl, max_samples: 50}
```

`training.algorithm` (default `sl`) picks the config class that checks the rest of the
section: `sl` SLConfig, `dpo` DPOConfig, `rl` RLConfig, `rlhf` RLHFConfig (its own three
stages sl -> rm -> rl in `sl:`, `rm:`, `rl:` sub-sections). The multi-stage form replaces
`training:` by a list of sl, dpo or rl sections, each with a `name` (default: its
algorithm), each starting from the previous stage's final checkpoint; `training:` then
holds only the settings every stage shares, given once:

```yaml
training: {base_model: thinker/tiny, backend: local, lora_rank: 32, seed: 0}
stages:
  - {name: sft, algorithm: sl, dataset: ../data/sft.jsonl, max_steps: 100}
  - {name: pref, algorithm: dpo, dataset: ../data/pairs.jsonl, max_steps: 40}
```

Every relative path is resolved against the YAML file's directory, so a config means the
same thing whatever directory the command runs from. Every problem (schema errors, missing
files, secrets, stages that do not fit together) is collected and raised at once as one
`ConfigError`, each named by where it is: `stages[1].learning_rate: ...`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from thinker.algorithms.batch_config import BatchConfig
from thinker.algorithms.dpo_config import DPOConfig
from thinker.algorithms.evaluation_config import EvalConfig
from thinker.algorithms.review_config import ReviewConfig
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.rlhf import STAGE_NAMES as RLHF_STAGES
from thinker.algorithms.rlhf import RLHFConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.bounds import MAX_TEMPERATURE, MAX_TOKENS, STRICT_NUMBERS, Number
from thinker.errors import ConfigError
from thinker.renderers import known_renderer

Backend = Literal["local", "tinker"]
ALGORITHMS = ("sl", "dpo", "rl", "rlhf")  # what trains (and what a proposal is made for)
# What a job of the server may run: rm retrains a reward model (from one, or the base model)
JOB_ALGORITHMS = (*ALGORITHMS, "rm", "batch", "eval", "review")
# rlhf is itself three stages (it links its own); rm, a judge for a later rl stage, is a stage
STAGE_ALGORITHMS = ("sl", "dpo", "rl", "rm")
# What `training:` may give once for every stage (a stage's own value wins), and what every
# stage must share: each stage continues the previous one's adapter on the same base model.
SHARED_FIELDS = ("base_model", "backend", "quantization", "lora_rank", "seed", "renderer")
SAME_IN_EVERY_STAGE = ("base_model", "backend", "quantization", "lora_rank")
NO_TRAINING = "training: Field required (or `stages:`, a list of training sections)"

# Key names that hold credentials. `max_tokens` must not match, `hf_token` must.
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|token|secret|secret_key|password|passwd|private_key|access_key|credentials?)$"
)
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class TestsConfig(BaseModel):
    """The pytest suite that must pass before anything trains."""

    __test__ = False  # not a pytest test class, whatever its name says
    model_config = ConfigDict(extra="forbid")

    path: Path  # a test file or directory
    markers: str | None = None  # a pytest -m expression, e.g. "not slow"
    args: list[str] = Field(default_factory=list)  # extra pytest arguments, e.g. ["-x", "-q"]
    enabled: bool = True


class SchemaFieldConfig(BaseModel):
    """One top-level field of a dataset row (see `thinker.data.SchemaField`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: Literal["string", "number", "integer", "boolean", "object", "array"]
    required: bool = True
    allow_empty: bool = False


class DataValidationConfig(BaseModel):
    """The dataset check of the validate stage. Without `kind` or `schema`, rows need only
    be JSON objects; give `kind` for the structural checks of each kind of row: `chat` and
    `prompt_completion` (SL), `preferences` (DPO pairs), `problems` (RL prompts)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    path: Path
    kind: Literal["chat", "prompt_completion", "preferences", "problems"] | None = None
    fields: list[SchemaFieldConfig] | None = Field(None, alias="schema")  # checked on top of kind
    max_examples: StrictInt | None = Field(None, gt=0)  # None = the whole file
    max_errors: StrictInt = Field(20, gt=0, le=100_000)  # how many problems to print


class _PipelineSection(BaseModel):
    """What the pipeline adds to an algorithm's config: `algorithm`, a stage `name`, and the
    run directory, which the pipeline sets (so the file may not)."""

    name: str | None = None  # stages only: the stage's directory in the run; default algorithm
    log_path: Path = Field(Path("runs"), exclude=True)  # refused below; not in dumps

    @field_validator("log_path", check_fields=False)
    @classmethod
    def _log_path_is_the_run_dir(cls, value: Path) -> Path:
        raise ValueError("set by the pipeline (the run directory <runs_dir>/<run name>); remove it")

    @field_validator("renderer", check_fields=False)
    @classmethod
    def _renderer_exists(cls, value: str | None) -> str | None:
        return known_renderer(value)

    @field_validator("name")
    @classmethod
    def _name_is_a_directory_name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_PATTERN.match(value):
            raise ValueError("use letters, digits, '.', '_' or '-' (it names the stage directory)")
        return value

    def _run_fields(self, run_dir: Path, overrides: dict[str, Any]) -> dict[str, Any]:
        fields = self.model_dump(exclude={"algorithm", "name"})
        return {**fields, **overrides, "log_path": run_dir}


class SLTraining(_PipelineSection, SLConfig):
    """`algorithm: sl` and every `SLConfig` field."""

    algorithm: Literal["sl"] = "sl"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> SLConfig:
        """The SL loop's config, writing into `run_dir`, with `overrides` (e.g. init_from)."""
        return SLConfig.model_validate(self._run_fields(run_dir, overrides))


class DPOTraining(_PipelineSection, DPOConfig):
    """`algorithm: dpo` and every `DPOConfig` field."""

    algorithm: Literal["dpo"] = "dpo"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> DPOConfig:
        """The DPO loop's config, writing into `run_dir`, with `overrides`."""
        return DPOConfig.model_validate(self._run_fields(run_dir, overrides))


class RLTraining(_PipelineSection, RLConfig):
    """`algorithm: rl` and every `RLConfig` field."""

    algorithm: Literal["rl"] = "rl"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> RLConfig:
        """The RL loop's config, writing into `run_dir`, with `overrides`."""
        return RLConfig.model_validate(self._run_fields(run_dir, overrides))


class RLHFTraining(_PipelineSection, RLHFConfig):
    """`algorithm: rlhf` and every `RLHFConfig` field (its `sl`, `rm` and `rl` sections).

    It trains as the three stages it names, in `<run>/sl`, `<run>/rm` and `<run>/rl`, with the
    stages form's mechanism (`pipeline.stages`): RL from SL's final state, scored by the judge
    the rm stage trained from the base model.
    """

    algorithm: Literal["rlhf"] = "rlhf"

    def stages(self) -> list[StageSection]:
        """Its stages, each a section of the stages form named after its algorithm."""
        parts = (
            (SLTraining, "sl", self.sl),
            (RMTraining, "rm", self.rm),
            (RLTraining, "rl", self.rl),
        )
        return [
            cls.model_validate({**part.model_dump(exclude={"log_path"}), "name": name})
            for cls, name, part in parts
        ]


class RMTraining(_PipelineSection, RewardModelConfig):
    """`algorithm: rm`: a pairwise judge that later rl stages with `reward: {type:
    reward_model}` are scored by. As a stage it trains from the base model, not from the stage
    before it, so it owes nothing to the policy it judges (as in `algorithm: rlhf`); as a job
    of the server it trains a reward model anew or retrains a library one (`base_model:
    mdl_...`, on the answers of a review job, say)."""

    algorithm: Literal["rm"] = "rm"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> RewardModelConfig:
        """The reward-model loop's config, writing into `run_dir`."""
        return RewardModelConfig.model_validate(self._run_fields(run_dir, overrides))


class BatchRun(_PipelineSection, BatchConfig):
    """`algorithm: batch` (a job of the server): a model answers every input of the dataset
    over a pool of actors (algorithms/batch.py); nothing is trained."""

    algorithm: Literal["batch"] = "batch"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> BatchConfig:
        """The batch run's config, writing into `run_dir`."""
        return BatchConfig.model_validate(self._run_fields(run_dir, overrides))


class EvalRun(_PipelineSection, EvalConfig):
    """`algorithm: eval` (a job of the server): models answer the eval set, their answers are
    scored and every pair is compared with its significance (algorithms/evaluation.py);
    nothing is trained."""

    algorithm: Literal["eval"] = "eval"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> EvalConfig:
        """The evaluation's config, writing into `run_dir`."""
        return EvalConfig.model_validate(self._run_fields(run_dir, overrides))


class ReviewRun(_PipelineSection, ReviewConfig):
    """`algorithm: review` (a job of the server): a reward model's checkpoints score preference
    pairs and the least certain make a queue for a person (algorithms/review.py); nothing is
    trained."""

    algorithm: Literal["review"] = "review"

    def to_run_config(self, run_dir: Path, **overrides: Any) -> ReviewConfig:
        """The review's config, writing into `run_dir`."""
        return ReviewConfig.model_validate(self._run_fields(run_dir, overrides))


StageSection = SLTraining | DPOTraining | RLTraining | RMTraining
TrainingSection = SLTraining | DPOTraining | RLTraining | RLHFTraining | RMTraining
JobSection = TrainingSection | BatchRun | EvalRun | ReviewRun
WorkSection = BatchRun | EvalRun | ReviewRun  # jobs that train nothing: no report, no model
_STAGE_CLASSES: dict[str, type[StageSection]] = {
    "sl": SLTraining,
    "dpo": DPOTraining,
    "rl": RLTraining,
    "rm": RMTraining,
}


def _algorithm_of(value: Any) -> str | None:
    """The union's tag: the section's `algorithm`, `sl` where it is left out."""
    if isinstance(value, dict):
        return value.get("algorithm", "sl")  # type: ignore[no-any-return]
    return getattr(value, "algorithm", None)


TrainingConfig = Annotated[
    Annotated[SLTraining, Tag("sl")]
    | Annotated[DPOTraining, Tag("dpo")]
    | Annotated[RLTraining, Tag("rl")]
    | Annotated[RLHFTraining, Tag("rlhf")],
    Discriminator(_algorithm_of),
]
# What a job of the server runs: a training section, or batch work.
JobConfig = Annotated[
    Annotated[SLTraining, Tag("sl")]
    | Annotated[DPOTraining, Tag("dpo")]
    | Annotated[RLTraining, Tag("rl")]
    | Annotated[RLHFTraining, Tag("rlhf")]
    | Annotated[RMTraining, Tag("rm")]
    | Annotated[BatchRun, Tag("batch")]
    | Annotated[EvalRun, Tag("eval")]
    | Annotated[ReviewRun, Tag("review")],
    Discriminator(_algorithm_of),
]
StageConfig = Annotated[
    Annotated[SLTraining, Tag("sl")]
    | Annotated[DPOTraining, Tag("dpo")]
    | Annotated[RLTraining, Tag("rl")]
    | Annotated[RMTraining, Tag("rm")],
    Discriminator(_algorithm_of),
]


class EvaluationConfig(BaseModel):
    """Held-out NLL and exact match of greedy answers on an evaluation set of chat rows.

    After SL it always runs; after DPO or RL (whose held-out metrics training already logs)
    only where `dataset` is given."""

    model_config = STRICT_NUMBERS

    # None = the final section's eval_dataset, else the split that SL held out (SL only)
    dataset: Path | None = None
    max_samples: StrictInt | None = Field(None, gt=0)  # None = every example
    max_tokens: StrictInt = Field(64, gt=0, le=MAX_TOKENS)  # per generated answer
    temperature: Number = Field(0.0, ge=0.0, le=MAX_TEMPERATURE)  # 0 = greedy
    output: Path | None = None  # per-sample JSONL; None = <run dir>/eval.jsonl
    compare_base: bool = False  # also evaluate the untrained base model (eval_base.jsonl)


class PipelineConfig(BaseModel):
    """A whole pipeline, every path absolute. Build it with `load_pipeline_config`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    runs_dir: Path
    tests: TestsConfig | None = None
    data_validation: DataValidationConfig | None = None
    training: TrainingConfig | None = None  # one algorithm; None in the stages form
    stages: list[StageConfig] | None = Field(None, min_length=1)  # each from the previous one
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)

    _source: Path | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _name_is_a_directory_name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError("use letters, digits, '.', '_' or '-' (it names the run directory)")
        return value

    @model_validator(mode="after")
    def _one_form_with_data_to_evaluate(self) -> PipelineConfig:
        if self.training is None and self.stages is None:
            raise ValueError(NO_TRAINING)
        if self.training is not None and self.stages is not None:
            raise ValueError("stages: give either `training:` (one algorithm) or `stages:`")
        final = self.final  # after SL the eval stage needs a held-out set; else it is optional
        if (
            isinstance(final, SLTraining)
            and self.evaluation.dataset is None
            and final.eval_dataset is None
            and final.eval_fraction == 0
        ):
            where = self.where(final)
            raise ValueError(
                "evaluation.dataset: nothing to evaluate on; set evaluation.dataset, "
                f"{where}.eval_dataset, or {where}.eval_fraction > 0"
            )
        return self

    @property
    def source(self) -> Path | None:
        """The YAML file this config was loaded from."""
        return self._source

    @property
    def sections(self) -> list[TrainingSection]:
        """What trains, in order: the stages, or the one `training` section."""
        if self.stages is not None:
            return list(self.stages)
        assert self.training is not None
        return [self.training]

    @property
    def final(self) -> TrainingSection:
        """The section whose weights the run ends with."""
        return self.sections[-1]

    @property
    def backend(self) -> Backend:
        return self.sections[0].backend

    @property
    def base_model(self) -> str:
        return self.sections[0].base_model

    def stage_sections(self) -> list[StageSection] | None:
        """The stages that train, each in its own directory: the `stages:` list, or those of
        an `algorithm: rlhf` section; None when one algorithm trains in the run directory."""
        if self.stages is not None:
            return list(self.stages)
        return self.training.stages() if isinstance(self.training, RLHFTraining) else None

    def where(self, section: TrainingSection) -> str:
        """How errors and metadata name a section: `training`, `training.rl` (an rlhf stage)
        or `stages[i]`."""
        if self.stages is None:
            return "training" if section.name is None else f"training.{section.name}"
        return f"stages[{next(i for i, s in enumerate(self.stages) if s is section)}]"

    def section_dir(self, run_dir: Path, section: TrainingSection) -> Path:
        """Where a section writes: the run directory itself, or `<run>/<stage name>/`."""
        return run_dir if section.name is None else run_dir / section.name

    def final_dir(self, run_dir: Path) -> Path:
        """Where the final weights' checkpoints.jsonl is (the last stage's directory)."""
        stages = self.stage_sections()
        return self.section_dir(run_dir, stages[-1] if stages else self.final)

    def datasets(self) -> dict[str, Path]:
        """Every training dataset named, by where: `training.dataset`, `stages[1].eval_dataset`,
        `training.rm.dataset` (RLHF), ..."""
        named: dict[str, Path] = {}
        for section in self.sections:
            parts = [(self.where(section), section)]
            if isinstance(section, RLHFTraining):
                parts = [(f"training.{n}", getattr(section, n)) for n in RLHF_STAGES]
            for where, part in parts:
                for key in _TRAINING_FILES:
                    if getattr(part, key) is not None:
                        named[f"{where}.{key}"] = getattr(part, key)
        return named

    def fingerprint_json(self) -> dict[str, Any]:
        """The resolved config as plain JSON (what the fingerprint is computed over)."""
        return self.model_dump(mode="json", by_alias=True)


# (section, key, what must exist) outside training: "file", "path" (file or directory), None.
_PATH_KEYS: list[tuple[str | None, str, str | None]] = [
    (None, "runs_dir", None),
    ("tests", "path", "path"),
    ("data_validation", "path", "file"),
    ("evaluation", "dataset", "file"),
    ("evaluation", "output", None),
]
_TRAINING_FILES = ("dataset", "eval_dataset")  # in `training` and in each stage


def load_pipeline_config(path: str | Path, backend: Backend | None = None) -> PipelineConfig:
    """Read, resolve and validate a pipeline YAML file.

    Args:
        path: The YAML file.
        backend: Overrides the backend of `training` and of every stage ("local" or "tinker").

    Raises:
        ConfigError: With every problem found in `problems`, each one
            `"<section>.<key>: <what is wrong>"`.
    """
    path = Path(path).expanduser().resolve()
    raw = _read_yaml(path)
    raw.setdefault("name", path.stem)
    raw.setdefault("runs_dir", "../runs")
    problems = find_secrets(raw)
    problems += _inherit_shared_settings(raw)
    problems += _resolve_paths(raw, path.parent)
    if backend is not None:
        for _, section in _training_sections(raw):
            section["backend"] = backend
    problems += _check_sections(raw)
    try:
        config = PipelineConfig.model_validate(raw)
    except ValidationError as e:
        problems += [format_error(err) for err in e.errors()]
        config = None
    if problems or config is None:
        raise ConfigError(f"invalid pipeline config {path}", list(dict.fromkeys(problems)))
    config._source = path
    return config


def check_backend_environment(config: PipelineConfig) -> None:
    """Fail fast where the chosen backend cannot work from this environment."""
    if config.backend == "tinker" and not os.environ.get("TINKER_API_KEY"):
        raise ConfigError(
            "the backend is 'tinker' but TINKER_API_KEY is not set; export it in the "
            "environment (it is never read from config files)"
        )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        what = " ".join(p for p in (e.context, e.problem) if p)
        raise ConfigError(f"invalid YAML in {where}: {what}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML in {path}: {e}") from None
    if data is None:
        raise ConfigError(f"config file is empty: {path}")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, not a list/value")
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def find_secrets(node: object, where: str = "") -> list[str]:
    """Report every secret-looking key, and drop it so that it is not reported twice."""
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in find_secrets(item, f"{where}[{i}]")]
    if not isinstance(node, dict):
        return []
    problems = []
    for key in list(node):
        name = f"{where}.{key}" if where else str(key)
        if _SECRET_KEY.search(str(key).lower().replace("-", "_")):
            del node[key]
            problems.append(
                f"{name}: secrets are not accepted in config files; set them in the environment "
                "(TINKER_API_KEY, HF_TOKEN) instead"
            )
        else:
            problems += find_secrets(node[key], name)
    return problems


def _resolve_paths(raw: dict[str, Any], base: Path) -> list[str]:
    """Make every path key absolute (in place) and report the inputs that do not exist."""
    problems = []
    for section, key, must_exist in _PATH_KEYS:
        holder = raw if section is None else raw.get(section)
        if section == "tests" and isinstance(holder, dict) and holder.get("enabled") is False:
            must_exist = None
        name = f"{section}.{key}" if section else key
        problems += _resolve(holder, key, name, base, must_exist)
    for where, section in _training_sections(raw, nested=True):
        for key in _TRAINING_FILES:
            problems += _resolve(section, key, f"{where}.{key}", base, "file")
        # A base model written as a local path (./, ../, /, ~) is resolved like any other
        # path; hub ids and built-ins (`thinker/tiny`) are left alone.
        model = section.get("base_model")
        if isinstance(model, str) and model.startswith((".", "/", "~")):
            problems += _resolve(section, "base_model", f"{where}.base_model", base, "path")
    return problems


def _resolve(holder: object, key: str, name: str, base: Path, must_exist: str | None) -> list[str]:
    if not isinstance(holder, dict) or not isinstance(holder.get(key), str):
        return []
    resolved = (base / Path(holder[key]).expanduser()).resolve()
    holder[key] = str(resolved)
    if must_exist == "file" and not resolved.is_file():
        what = "not a file" if resolved.exists() else "file not found"
        return [f"{name}: {what}: {resolved}"]
    if must_exist == "path" and not resolved.exists():
        return [f"{name}: not found: {resolved}"]
    return []


def _training_sections(
    raw: dict[str, Any], nested: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """`training` and each `stages[i]` that is a mapping, with the names errors give them;
    with `nested`, also the stage sections inside an RLHF section (`training.sl`, ...)."""
    found = [("training", raw["training"])] if isinstance(raw.get("training"), dict) else []
    stages = raw.get("stages")
    if isinstance(stages, list):
        found += [(f"stages[{i}]", s) for i, s in enumerate(stages) if isinstance(s, dict)]
    if nested and found and found[0][0] == "training" and found[0][1].get("algorithm") == "rlhf":
        rlhf = found[0][1]
        found += [(f"training.{n}", rlhf[n]) for n in RLHF_STAGES if isinstance(rlhf.get(n), dict)]
    return found


def _inherit_shared_settings(raw: dict[str, Any]) -> list[str]:
    """The stages form: `training:` holds settings given once for every stage; copy each into
    the stages that do not set their own, and report anything else found there."""
    if "stages" not in raw or "training" not in raw:
        return []
    shared = raw.pop("training")
    if not isinstance(shared, dict):
        return ["training: with `stages:`, a mapping of the settings every stage shares"]
    allowed = ", ".join(SHARED_FIELDS)
    problems = [
        f"training.{key}: with `stages:`, `training:` holds only the settings every stage "
        f"shares ({allowed}); set {key} in each stage"
        for key in shared
        if key not in SHARED_FIELDS
    ]
    for _, stage in _training_sections(raw):
        for key in SHARED_FIELDS:
            if key in shared:
                stage.setdefault(key, shared[key])
    return problems


def _check_sections(raw: dict[str, Any]) -> list[str]:
    """What no one section's schema can see: a missing `training`, stage names, and stages
    that could not continue one another's weights."""
    if "training" not in raw and "stages" not in raw:
        return [NO_TRAINING]
    training = raw.get("training")
    if isinstance(training, dict) and "name" in training:
        return ["training.name: only stages have names (the pipeline's `name` names the run)"]
    stages = raw.get("stages")
    if not isinstance(stages, list):
        if isinstance(training, dict) and _judged(training):
            return [f"training.reward.type: {NO_JUDGE}"]
        return []  # the schema says what is wrong
    problems: list[str] = []
    named: dict[object, int] = {}
    judge_before = False
    for i, stage in enumerate(stages):
        if not isinstance(stage, dict):
            continue
        if _judged(stage) and not judge_before:
            problems.append(f"stages[{i}].reward.type: {NO_JUDGE}")
        judge_before = judge_before or stage.get("algorithm") == "rm"
        stage.setdefault("name", stage.get("algorithm", "sl"))
        if stage["name"] in named:
            problems.append(
                f"stages[{i}].name: {stage['name']!r} is also the name of "
                f"stages[{named[stage['name']]}]; each stage needs a directory of its own"
            )
        named.setdefault(stage["name"], i)
        if i > 0 and "init_from" in stage:
            problems.append(
                f"stages[{i}].init_from: set by the pipeline (the previous stage's final "
                "checkpoint); remove it"
            )
        if i > 0 and isinstance(stages[0], dict):
            problems += _differences(stages[0], stage, i)
    return problems


NO_JUDGE = (
    "reward_model needs a judge: use `algorithm: rlhf`, or put an `algorithm: rm` stage "
    "before this rl stage"
)


def _judged(section: dict[str, Any]) -> bool:
    """Whether `section` is an rl section scored by a reward model."""
    reward = section.get("reward")
    return (
        section.get("algorithm") == "rl"
        and isinstance(reward, dict)
        and reward.get("type") == "reward_model"
    )


def _differences(first: dict[str, Any], stage: dict[str, Any], i: int) -> list[str]:
    """The settings in which stage `i` could not continue from the first stage's weights."""
    problems = []
    for key in SAME_IN_EVERY_STAGE:
        mine, theirs = _effective(stage, key), _effective(first, key)
        if mine is not _UNKNOWN and theirs is not _UNKNOWN and mine != theirs:
            problems.append(
                f"stages[{i}].{key}: {mine!r} differs from stages[0]'s {theirs!r}; each "
                f"stage continues the previous one's weights, so all share one {key} "
                "(give it once in `training:`)"
            )
    return problems


_UNKNOWN = object()  # the default of a stage whose algorithm is unknown


def _effective(stage: dict[str, Any], key: str) -> object:
    """A stage's value of `key`, its algorithm's default where the file leaves it out."""
    if key in stage:
        return stage[key]
    cls = _STAGE_CLASSES.get(str(stage.get("algorithm", "sl")))
    field = cls.model_fields.get(key) if cls is not None else None
    return field.default if field is not None else _UNKNOWN


def format_error(error: Any) -> str:
    """`training.learning_rate: Input should be greater than 0` from one pydantic error."""
    loc = list(error["loc"])
    # A discriminated union puts the chosen algorithm in the location: drop it, so that
    # `training.dpo.beta` reads `training.beta` and `stages.1.rl.seed` `stages[1].seed`.
    tag_at = 1 if loc[:1] == ["training"] else 2 if loc[:1] == ["stages"] else None
    if (
        tag_at is not None
        and len(loc) > tag_at
        and loc[tag_at] in {*JOB_ALGORITHMS, *STAGE_ALGORITHMS}
    ):
        del loc[tag_at]
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    expected = ", ".join(STAGE_ALGORITHMS if tag_at == 2 else ALGORITHMS)
    if error["type"] == "union_tag_invalid":
        tag = (error.get("ctx") or {}).get("tag")
        message = f"{where}.algorithm: unknown algorithm {tag!r}; expected one of {expected}"
        if tag == "rlhf":
            message = (
                f"{where}.algorithm: rlhf cannot be a stage: it is itself the stages "
                f"{' -> '.join(RLHF_STAGES)}; use it as `training.algorithm`, or list those "
                "stages (algorithm: sl, rm, rl)"
            )
        return message
    if error["type"] == "union_tag_not_found":
        return f"{where}: expected a mapping of settings with `algorithm` ({expected})"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "int_type" and isinstance(error.get("input"), bool):
        message = "Input should be an integer, not true or false"
    return f"{where}: {message}" if where else message
