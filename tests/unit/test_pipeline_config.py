"""The pipeline config loader, plus the pure parts of metadata and evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from thinker.errors import ConfigError
from thinker.pipeline.config import (
    PipelineConfig,
    check_backend_environment,
    load_pipeline_config,
)
from thinker.pipeline.metadata import (
    config_fingerprint,
    json_safe,
    scrub,
    secret_values,
    write_json_atomically,
)

REPO = Path(__file__).resolve().parents[2]
ROW = {"messages": [{"role": "user", "content": "1+2"}, {"role": "assistant", "content": "3"}]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp/data/train.jsonl and tmp/data/test.jsonl, configs to be written in tmp/configs/."""
    (tmp_path / "data").mkdir()
    (tmp_path / "configs").mkdir()
    for name in ("train.jsonl", "test.jsonl"):
        (tmp_path / "data" / name).write_text(json.dumps(ROW) + "\n")
    return tmp_path


def write(project: Path, config: dict[str, Any], name: str = "pipe.yaml") -> Path:
    path = project / "configs" / name
    path.write_text(yaml.safe_dump(config))
    return path


def minimal(**training: Any) -> dict[str, Any]:
    return {"name": "demo", "training": {"dataset": "../data/train.jsonl", **training}}


def problems_of(path: Path, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_pipeline_config(path, **kwargs)
    return info.value.problems


# ---- paths ---------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_yaml_file_not_the_cwd(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {
        **minimal(eval_dataset="../data/test.jsonl"),
        "tests": {"path": "../data"},
        "data_validation": {"path": "../data/train.jsonl", "kind": "chat"},
        "evaluation": {"dataset": "../data/test.jsonl", "output": "out/eval.jsonl"},
    }
    path = write(project, config)
    monkeypatch.chdir(project / "data")  # somewhere else entirely

    loaded = load_pipeline_config(path)

    assert loaded.runs_dir == project / "runs"  # default ../runs next to the file
    assert loaded.training.dataset == project / "data" / "train.jsonl"
    assert loaded.training.eval_dataset == project / "data" / "test.jsonl"
    assert loaded.tests is not None and loaded.tests.path == project / "data"
    assert loaded.data_validation is not None
    assert loaded.data_validation.path == project / "data" / "train.jsonl"
    assert loaded.evaluation.dataset == project / "data" / "test.jsonl"
    assert loaded.evaluation.output == project / "configs" / "out" / "eval.jsonl"
    assert loaded.source == path


def test_absolute_paths_and_hub_ids_are_kept(project: Path) -> None:
    absolute = str(project / "data" / "train.jsonl")
    path = write(project, minimal(dataset=absolute, base_model="Qwen/Qwen3-0.6B"))
    loaded = load_pipeline_config(path)
    assert loaded.training.dataset == Path(absolute)
    assert loaded.training.base_model == "Qwen/Qwen3-0.6B"


def test_a_local_base_model_path_resolves_too(project: Path) -> None:
    (project / "model").mkdir()
    loaded = load_pipeline_config(write(project, minimal(base_model="../model")))
    assert loaded.training.base_model == str(project / "model")


def test_the_name_defaults_to_the_file_stem(project: Path) -> None:
    config = minimal()
    del config["name"]
    assert load_pipeline_config(write(project, config, "my-pipe.yaml")).name == "my-pipe"


# ---- every error at once ---------------------------------------------------------------


def test_all_problems_are_reported_at_once(project: Path) -> None:
    config = {
        "name": "demo",
        "tests": {"path": "../no_tests"},
        "data_validation": {"path": "../data/missing.jsonl", "kind": "chatty"},
        "training": {
            "dataset": "../data/train.jsonl",
            "learning_rate": 0,
            "lora_rank": -1,
            "bogus": 1,
        },
        "evaluation": {"max_tokens": 0},
    }
    problems = problems_of(write(project, config))

    missing = (project / "data" / "missing.jsonl").resolve()
    assert f"data_validation.path: file not found: {missing}" in problems
    assert f"tests.path: not found: {(project / 'no_tests').resolve()}" in problems
    assert "training.learning_rate: Input should be greater than 0" in problems
    assert "training.lora_rank: Input should be greater than 0" in problems
    assert "training.bogus: Extra inputs are not permitted" in problems
    assert "evaluation.max_tokens: Input should be greater than 0" in problems
    assert any(p.startswith("data_validation.kind:") for p in problems)
    assert len(problems) == 7


def test_the_error_message_lists_every_problem(project: Path) -> None:
    path = write(project, minimal(learning_rate=-1, batch_size=0))
    with pytest.raises(ConfigError) as info:
        load_pipeline_config(path)
    text = str(info.value)
    assert str(path) in text
    assert "training.learning_rate" in text and "training.batch_size" in text
    assert isinstance(info.value, ValueError)


def test_missing_sections_and_unknown_sections(project: Path) -> None:
    problems = problems_of(write(project, {"name": "demo", "trainign": {}}))
    assert "training: Field required" in problems
    assert "trainign: Extra inputs are not permitted" in problems


def test_a_disabled_test_suite_need_not_exist(project: Path) -> None:
    config = {**minimal(), "tests": {"path": "../nowhere", "enabled": False}}
    assert load_pipeline_config(write(project, config)).tests.enabled is False  # type: ignore[union-attr]


def test_the_run_directory_is_not_configurable_in_training(project: Path) -> None:
    problems = problems_of(write(project, minimal(log_path="somewhere")))
    assert len(problems) == 1 and problems[0].startswith("training.log_path: set by the pipeline")


def test_only_the_sl_algorithm_exists_for_now(project: Path) -> None:
    problems = problems_of(write(project, minimal(algorithm="ppo")))
    assert problems == ["training.algorithm: Input should be 'sl'"]


def test_evaluation_needs_something_to_evaluate_on(project: Path) -> None:
    problems = problems_of(write(project, minimal(eval_fraction=0.0)))
    assert len(problems) == 1 and problems[0].startswith("evaluation.dataset: nothing to evaluate")


def test_an_explicit_schema_is_parsed(project: Path) -> None:
    schema = [
        {"name": "prompt", "type": "string"},
        {"name": "meta", "type": "object", "required": False},
    ]
    config = {**minimal(), "data_validation": {"path": "../data/train.jsonl", "schema": schema}}
    fields = load_pipeline_config(write(project, config)).data_validation.fields  # type: ignore[union-attr]
    assert [(f.name, f.type, f.required) for f in fields or []] == [
        ("prompt", "string", True),
        ("meta", "object", False),
    ]


def test_a_bad_schema_type_names_its_index(project: Path) -> None:
    config = {
        **minimal(),
        "data_validation": {
            "path": "../data/train.jsonl",
            "schema": [{"name": "x", "type": "str"}],
        },
    }
    problems = problems_of(write(project, config))
    assert len(problems) == 1 and problems[0].startswith("data_validation.schema[0].type:")


def test_a_name_must_be_usable_as_a_directory_name(project: Path) -> None:
    problems = problems_of(write(project, {**minimal(), "name": "../escape"}))
    assert len(problems) == 1 and problems[0].startswith("name:")


# ---- YAML itself -----------------------------------------------------------------------


def test_a_yaml_syntax_error_names_the_file_and_line(project: Path) -> None:
    path = project / "configs" / "broken.yaml"
    path.write_text("name: demo\ntraining:\n  dataset: [unclosed\n  lr: 1\n")
    with pytest.raises(ConfigError) as info:
        load_pipeline_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "line 4" in message


def test_duplicate_keys_are_refused_with_their_line(project: Path) -> None:
    path = project / "configs" / "dup.yaml"
    path.write_text("name: demo\ntraining:\n  dataset: ../data/train.jsonl\n  seed: 1\n  seed: 2\n")
    with pytest.raises(ConfigError, match=r"line 5.*duplicate key 'seed'"):
        load_pipeline_config(path)


def test_a_missing_or_empty_or_non_mapping_file(project: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_pipeline_config(project / "nope.yaml")
    (project / "empty.yaml").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="empty"):
        load_pipeline_config(project / "empty.yaml")
    (project / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_pipeline_config(project / "list.yaml")


# ---- secrets -----------------------------------------------------------------------------


def test_secrets_are_refused_wherever_they_are(project: Path) -> None:
    config = {
        **minimal(api_key="tml-123"),
        "hf_token": "hf_abc",
        "evaluation": {"extra": {"TINKER-API-KEY": "x"}},
    }
    problems = problems_of(write(project, config))
    refused = [p for p in problems if "secrets are not accepted" in p]
    assert sorted(p.split(":")[0] for p in refused) == [
        "evaluation.extra.TINKER-API-KEY",
        "hf_token",
        "training.api_key",
    ]
    assert all("environment" in p for p in refused)
    assert not any("tml-123" in p or "hf_abc" in p for p in problems)
    assert "training.api_key: Extra inputs are not permitted" not in problems  # said once


def test_token_counts_are_not_secrets(project: Path) -> None:
    config = {**minimal(max_length=64), "evaluation": {"max_tokens": 8}}
    assert load_pipeline_config(write(project, config)).evaluation.max_tokens == 8


# ---- backend -------------------------------------------------------------------------------


def test_the_backend_override_wins_over_the_file(project: Path) -> None:
    path = write(project, minimal(backend="local"))
    assert load_pipeline_config(path).training.backend == "local"
    assert load_pipeline_config(path, backend="tinker").training.backend == "tinker"


def test_tinker_needs_its_key_in_the_environment(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_pipeline_config(write(project, minimal()), backend="tinker")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="TINKER_API_KEY"):
        check_backend_environment(config)
    monkeypatch.setenv("TINKER_API_KEY", "tml-not-a-real-key")
    check_backend_environment(config)
    check_backend_environment(load_pipeline_config(write(project, minimal())))  # local: no key


def test_to_sl_config_writes_into_the_run_directory(project: Path) -> None:
    config = load_pipeline_config(write(project, minimal(learning_rate=0.003, max_steps=5)))
    sl = config.training.to_sl_config(project / "runs" / "r1")
    assert sl.log_path == project / "runs" / "r1"
    assert (sl.learning_rate, sl.max_steps, sl.dataset) == (0.003, 5, config.training.dataset)


@pytest.mark.parametrize("name", ["arithmetic", "reversal", "code_review"])
def test_the_presets_load(name: str) -> None:
    config = load_pipeline_config(REPO / "configs" / f"{name}.yaml")
    assert config.name == name
    assert config.training.base_model == "thinker/tiny"
    assert config.training.backend == "local"
    assert config.runs_dir == REPO / "runs"
    header = (REPO / "configs" / f"{name}.yaml").read_text().splitlines()[0]
    assert header == f"# thinker run --config configs/{name}.yaml"


# ---- metadata helpers ----------------------------------------------------------------------


def test_the_fingerprint_is_stable_and_follows_the_resolved_config(project: Path) -> None:
    path = write(project, minimal())
    first = config_fingerprint(load_pipeline_config(path))
    assert first == config_fingerprint(load_pipeline_config(path))
    assert len(first) == 64
    assert first != config_fingerprint(load_pipeline_config(path, backend="tinker"))
    other = write(project, minimal(learning_rate=0.5), "other.yaml")
    assert first != config_fingerprint(load_pipeline_config(other))
    dumped = load_pipeline_config(path).model_dump(by_alias=True)
    assert first == config_fingerprint(PipelineConfig.model_validate(dumped))  # round trip


def test_scrub_hides_secret_environment_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "tml-sekrit-value")
    monkeypatch.setenv("MY_TOKEN", "abc123456")
    monkeypatch.setenv("SOME_KEY", "1")  # too short to scrub safely
    assert "tml-sekrit-value" in secret_values()
    text = "failed with key tml-sekrit-value and abc123456, retry 1"
    assert scrub(text) == "failed with key *** and ***, retry 1"
    assert scrub({"a": ["tml-sekrit-value", 3]}) == {"a": ["***", 3]}


def test_metadata_json_is_strict_and_written_atomically(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    write_json_atomically(path, json_safe({"loss": math.nan, "steps": [1, math.inf]}))
    assert json.loads(path.read_text()) == {"loss": None, "steps": [1, None]}
    assert [p.name for p in tmp_path.iterdir()] == ["metadata.json"]  # no temporary left


# ---- evaluation arithmetic ------------------------------------------------------------------


def test_weighted_nll_by_hand() -> None:
    """logprobs [None, -1, -2, -0.5], weights [0, 0, 1, 1]: NLL 2 + 0.5 = 2.5 over 2 tokens."""
    from thinker.pipeline.evaluate import weighted_nll

    assert weighted_nll([None, -1.0, -2.0, -0.5], [0.0, 0.0, 1.0, 1.0]) == (2.5, 2.0)


def test_eval_nll_is_a_mean_per_trained_token_not_per_example() -> None:
    """(2.5 over 2 tokens) and (1.0 over 1 token): (2.5 + 1.0) / 3, not (1.25 + 1.0) / 2."""
    from thinker.pipeline.evaluate import SampleResult, summarize

    results = [
        SampleResult(0, "q", "a", "a", True, 1.25, 2.0, "stop"),
        SampleResult(1, "q", "b", "c", False, 1.0, 1.0, "stop"),
    ]
    metrics = summarize(results)
    assert metrics["eval_nll"] == pytest.approx(3.5 / 3)
    assert metrics["exact_match"] == 0.5
    assert metrics["num_samples"] == 2.0


def test_without_an_eval_set_evaluation_uses_the_split_training_held_out(project: Path) -> None:
    from thinker.data import load_conversations, split_train_eval
    from thinker.pipeline.evaluate import eval_conversations

    rows = [
        {"messages": [{"role": "user", "content": f"{i}"}, {"role": "assistant", "content": "x"}]}
        for i in range(20)
    ]
    (project / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = load_pipeline_config(write(project, minimal(eval_fraction=0.25, seed=3)))
    _, held_out = split_train_eval(load_conversations(config.training.dataset), 0.25, 3)
    assert eval_conversations(config) == held_out and len(held_out) == 5
    limited = load_pipeline_config(
        write(project, {**minimal(eval_fraction=0.25, seed=3), "evaluation": {"max_samples": 2}})
    )
    assert eval_conversations(limited) == held_out[:2]
