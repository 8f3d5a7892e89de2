"""The pipeline config: one YAML file describing validate -> train -> eval.

```yaml
name: arithmetic
runs_dir: ../runs                 # default: ../runs next to this file
tests: {path: ../tests/unit, markers: "not slow", args: ["-q"], enabled: true}
data_validation: {path: ../data/examples/arithmetic/train.jsonl, kind: chat}
training: {algorithm: sl, dataset: ../data/examples/arithmetic/train.jsonl, ...}  # SLConfig
evaluation: {dataset: ../data/examples/arithmetic/test.jsonl, max_samples: 50}
```

Every relative path is resolved against the YAML file's directory, so a config means the
same thing whatever directory the command runs from. Every problem (schema errors, missing
files, secrets) is collected and raised at once as one `ConfigError`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from thinker.algorithms.sl_config import SLConfig
from thinker.errors import ConfigError
from thinker.renderers import RENDERER_NAMES

Backend = Literal["local", "tinker"]

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
    be JSON objects; give `kind` for the structural checks of chat / prompt-completion rows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    path: Path
    kind: Literal["chat", "prompt_completion"] | None = None
    fields: list[SchemaFieldConfig] | None = Field(None, alias="schema")  # checked on top of kind
    max_examples: int | None = Field(None, gt=0)  # None = the whole file
    max_errors: int = Field(20, gt=0)  # how many problems to print


class TrainingConfig(SLConfig):
    """`algorithm` plus every `SLConfig` field; the run directory is set by the pipeline."""

    algorithm: Literal["sl"] = "sl"
    log_path: Path = Field(Path("runs/sl"), exclude=True)  # refused below; not in dumps

    @field_validator("log_path")
    @classmethod
    def _log_path_is_the_run_dir(cls, value: Path) -> Path:
        raise ValueError("set by the pipeline (the run directory <runs_dir>/<run name>); remove it")

    @field_validator("renderer")
    @classmethod
    def _renderer_exists(cls, value: str | None) -> str | None:
        if value is not None and value not in RENDERER_NAMES:
            raise ValueError(
                f"unknown renderer {value!r}; expected one of {', '.join(RENDERER_NAMES)}"
            )
        return value

    def to_sl_config(self, run_dir: Path) -> SLConfig:
        """The SL loop's config, writing into `run_dir`."""
        fields = self.model_dump(exclude={"algorithm"})
        return SLConfig.model_validate({**fields, "log_path": run_dir})


class EvaluationConfig(BaseModel):
    """Held-out NLL and exact match of greedy answers on an evaluation set."""

    model_config = ConfigDict(extra="forbid")

    # None = training.eval_dataset, else the split that training held out (eval_fraction, seed)
    dataset: Path | None = None
    max_samples: int | None = Field(None, gt=0)  # None = every example
    max_tokens: int = Field(64, gt=0)  # per generated answer
    temperature: float = Field(0.0, ge=0.0)  # 0 = greedy
    output: Path | None = None  # per-sample JSONL; None = <run dir>/eval.jsonl
    compare_base: bool = False  # also evaluate the untrained base model (eval_base.jsonl)


class PipelineConfig(BaseModel):
    """A whole pipeline, every path absolute. Build it with `load_pipeline_config`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    runs_dir: Path
    tests: TestsConfig | None = None
    data_validation: DataValidationConfig | None = None
    training: TrainingConfig
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)

    _source: Path | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _name_is_a_directory_name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError("use letters, digits, '.', '_' or '-' (it names the run directory)")
        return value

    @model_validator(mode="after")
    def _evaluation_has_data(self) -> PipelineConfig:
        t = self.training
        if self.evaluation.dataset is None and t.eval_dataset is None and t.eval_fraction == 0:
            raise ValueError(
                "evaluation.dataset: nothing to evaluate on; set evaluation.dataset, "
                "training.eval_dataset, or training.eval_fraction > 0"
            )
        return self

    @property
    def source(self) -> Path | None:
        """The YAML file this config was loaded from."""
        return self._source

    def fingerprint_json(self) -> dict[str, Any]:
        """The resolved config as plain JSON (what the fingerprint is computed over)."""
        return self.model_dump(mode="json", by_alias=True)


# (section, key, what must exist): "file", "path" (file or directory), or None (no check).
_PATH_KEYS: list[tuple[str | None, str, str | None]] = [
    (None, "runs_dir", None),
    ("tests", "path", "path"),
    ("data_validation", "path", "file"),
    ("training", "dataset", "file"),
    ("training", "eval_dataset", "file"),
    ("evaluation", "dataset", "file"),
    ("evaluation", "output", None),
]


def load_pipeline_config(path: str | Path, backend: Backend | None = None) -> PipelineConfig:
    """Read, resolve and validate a pipeline YAML file.

    Args:
        path: The YAML file.
        backend: Overrides `training.backend` ("local" or "tinker").

    Raises:
        ConfigError: With every problem found in `problems`, each one
            `"<section>.<key>: <what is wrong>"`.
    """
    path = Path(path).expanduser().resolve()
    raw = _read_yaml(path)
    raw.setdefault("name", path.stem)
    raw.setdefault("runs_dir", "../runs")
    if backend is not None and isinstance(raw.get("training"), dict):
        raw["training"]["backend"] = backend
    problems = _find_secrets(raw)
    problems += _resolve_paths(raw, path.parent)
    problems += _base_model_path(raw, path.parent)
    try:
        config = PipelineConfig.model_validate(raw)
    except ValidationError as e:
        problems += [_format_error(err) for err in e.errors()]
        config = None
    if problems or config is None:
        raise ConfigError(f"invalid pipeline config {path}", problems)
    config._source = path
    return config


def check_backend_environment(config: PipelineConfig) -> None:
    """Fail fast where the chosen backend cannot work from this environment."""
    if config.training.backend == "tinker" and not os.environ.get("TINKER_API_KEY"):
        raise ConfigError(
            "training.backend is 'tinker' but TINKER_API_KEY is not set; export it in the "
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


def _find_secrets(node: object, where: str = "") -> list[str]:
    """Report every secret-looking key, and drop it so that it is not reported twice."""
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in _find_secrets(item, f"{where}[{i}]")]
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
            problems += _find_secrets(node[key], name)
    return problems


def _resolve_paths(raw: dict[str, Any], base: Path) -> list[str]:
    """Make every path key absolute (in place) and report the inputs that do not exist."""
    problems = []
    for section, key, must_exist in _PATH_KEYS:
        holder = raw if section is None else raw.get(section)
        if not isinstance(holder, dict) or not isinstance(holder.get(key), str):
            continue
        resolved = (base / Path(holder[key]).expanduser()).resolve()
        holder[key] = str(resolved)
        if section == "tests" and holder.get("enabled") is False:
            continue
        name = f"{section}.{key}" if section else key
        if must_exist == "file" and not resolved.is_file():
            what = "not a file" if resolved.exists() else "file not found"
            problems.append(f"{name}: {what}: {resolved}")
        elif must_exist == "path" and not resolved.exists():
            problems.append(f"{name}: not found: {resolved}")
    return problems


def _base_model_path(raw: dict[str, Any], base: Path) -> list[str]:
    """A base model written as a local path (./, ../, /, ~) is resolved like any other path;
    hub ids and built-ins (`thinker/tiny`) are left alone."""
    training = raw.get("training")
    model = training.get("base_model") if isinstance(training, dict) else None
    if not isinstance(model, str) or not model.startswith((".", "/", "~")):
        return []
    resolved = (base / Path(model).expanduser()).resolve()
    training["base_model"] = str(resolved)
    return [] if resolved.exists() else [f"training.base_model: not found: {resolved}"]


def _format_error(error: Any) -> str:
    """`training.learning_rate: Input should be greater than 0` from one pydantic error."""
    where = ""
    for part in error["loc"]:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
