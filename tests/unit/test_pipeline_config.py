"""The pipeline config loader (each algorithm, and the stages form), the dataset check of
the validate stage, and the pure parts of metadata and evaluation."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from thinker.algorithms.dpo_config import DPOConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.errors import ConfigError
from thinker.files import write_json_atomically
from thinker.pipeline.config import (
    DPOTraining,
    PipelineConfig,
    RLHFTraining,
    RLTraining,
    RMTraining,
    SLTraining,
    check_backend_environment,
    load_pipeline_config,
)
from thinker.pipeline.metadata import config_fingerprint, json_safe, scrub, secret_values
from thinker.pipeline.validate import validate

REPO = Path(__file__).resolve().parents[2]
ROW = {"messages": [{"role": "user", "content": "1+2"}, {"role": "assistant", "content": "3"}]}
PAIR = {"prompt": "1+2", "chosen": "3", "rejected": "I am not sure, maybe 4."}
PROBLEM = {"prompt": "1+2", "answer": "3"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp/data/train.jsonl and tmp/data/test.jsonl, configs to be written in tmp/configs/."""
    (tmp_path / "data").mkdir()
    (tmp_path / "configs").mkdir()
    for name in ("train.jsonl", "test.jsonl"):
        (tmp_path / "data" / name).write_text(json.dumps(ROW) + "\n")
    (tmp_path / "data" / "pairs.jsonl").write_text(json.dumps(PAIR) + "\n")
    (tmp_path / "data" / "problems.jsonl").write_text(json.dumps(PROBLEM) + "\n")
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


def test_every_number_is_finite_of_its_type_and_in_range(project: Path) -> None:
    """What a job request cannot send (server/limits.py refuses it first), a YAML file can:
    `.inf`, `.nan`, integers beyond 64 bits, `true` for a number."""
    path = project / "configs" / "pipe.yaml"
    path.write_text(
        "name: demo\n"
        "training:\n"
        "  dataset: ../data/train.jsonl\n"
        "  learning_rate: .inf\n"
        "  eps: .nan\n"
        f"  seed: {2**70}\n"
        "  lora_rank: 1000000000\n"
        "  max_steps: true\n"
        "  grad_clip_norm: -1\n"
        "  warmup_steps: 1000000000000000000000000000000\n"
        "  weight_decay: true\n"
        "evaluation: {temperature: .inf, max_tokens: 1.5}\n"
    )
    assert sorted(problems_of(path)) == [
        "evaluation.max_tokens: Input should be a valid integer",
        "evaluation.temperature: Input should be a finite number",
        "training.eps: Input should be a finite number",
        "training.grad_clip_norm: Input should be greater than or equal to 0",
        "training.learning_rate: Input should be a finite number",
        "training.lora_rank: Input should be less than or equal to 1024",
        "training.max_steps: Input should be an integer, not true or false",
        f"training.seed: Input should be less than or equal to {2**63 - 1}",
        "training.warmup_steps: Input should be less than or equal to 10000000",
        "training.weight_decay: Input should be a number, not true or false",
    ]
    # PyYAML reads 1e-4 (no dot) as a string: still a number here, as it always was
    path.write_text("name: demo\ntraining: {dataset: ../data/train.jsonl, learning_rate: 1e-4}\n")
    assert load_pipeline_config(path).final.learning_rate == 1e-4


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
    assert "training: Field required (or `stages:`, a list of training sections)" in problems
    assert "trainign: Extra inputs are not permitted" in problems
    assert len(problems) == 2


def test_a_disabled_test_suite_need_not_exist(project: Path) -> None:
    config = {**minimal(), "tests": {"path": "../nowhere", "enabled": False}}
    assert load_pipeline_config(write(project, config)).tests.enabled is False  # type: ignore[union-attr]


def test_the_run_directory_is_not_configurable_in_training(project: Path) -> None:
    problems = problems_of(write(project, minimal(log_path="somewhere")))
    assert len(problems) == 1 and problems[0].startswith("training.log_path: set by the pipeline")


def test_an_unknown_algorithm_is_named_with_the_choices(project: Path) -> None:
    problems = problems_of(write(project, minimal(algorithm="ppo")))
    assert problems == [
        "training.algorithm: unknown algorithm 'ppo'; expected one of sl, dpo, rl, rlhf"
    ]


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


# ---- one algorithm each -------------------------------------------------------------------


def test_each_algorithm_is_checked_by_its_own_config_class(project: Path) -> None:
    dpo = load_pipeline_config(
        write(project, minimal(algorithm="dpo", dataset="../data/pairs.jsonl", beta=0.2))
    )
    assert isinstance(dpo.training, DPOTraining) and dpo.training.beta == 0.2
    assert type(dpo.training.to_run_config(project / "r")) is DPOConfig
    rl = load_pipeline_config(
        write(
            project,
            minimal(algorithm="rl", dataset="../data/problems.jsonl", group_size=4, reward={}),
        )
    )
    assert isinstance(rl.training, RLTraining)
    assert (rl.training.group_size, rl.training.reward.type) == (4, "exact_match")
    assert type(rl.training.to_run_config(project / "r")) is RLConfig
    assert rl.final is rl.training and rl.sections == [rl.training]


def test_errors_name_the_field_not_the_algorithm(project: Path) -> None:
    """pydantic puts the union's tag in the location (training.dpo.beta); it is left out."""
    dpo = minimal(algorithm="dpo", dataset="../data/pairs.jsonl", beta=-1, train_on_what="all")
    problems = problems_of(write(project, dpo))
    assert sorted(problems) == [
        "training.beta: Input should be greater than 0",
        "training.train_on_what: Extra inputs are not permitted",  # an SL field
    ]
    rl = minimal(algorithm="rl", dataset="../data/problems.jsonl", reward={"type": "exact"})
    (problem,) = problems_of(write(project, rl))
    assert problem.startswith("training.reward.type: Input should be 'exact_match', 'regex'")


def test_after_dpo_or_rl_the_eval_stage_needs_no_evaluation_set(project: Path) -> None:
    """Their held-out metrics are logged by training; generation eval is optional."""
    for algorithm, data in (("dpo", "pairs"), ("rl", "problems")):
        path = write(project, minimal(algorithm=algorithm, dataset=f"../data/{data}.jsonl"))
        assert load_pipeline_config(path).evaluation.dataset is None


def test_rlhf_resolves_the_paths_of_its_three_sections(project: Path) -> None:
    config = {
        "name": "demo",
        "training": {
            "algorithm": "rlhf",
            "lora_rank": 8,
            "sl": {"dataset": "../data/train.jsonl"},
            "rm": {"dataset": "../data/pairs.jsonl"},
            "rl": {"dataset": "../data/problems.jsonl", "eval_dataset": "../data/nope.jsonl"},
        },
    }
    problems = problems_of(write(project, config))
    assert problems == [f"training.rl.eval_dataset: file not found: {project / 'data/nope.jsonl'}"]
    del config["training"]["rl"]["eval_dataset"]  # type: ignore[index]
    loaded = load_pipeline_config(write(project, config))
    assert isinstance(loaded.training, RLHFTraining)
    assert loaded.datasets() == {
        "training.sl.dataset": project / "data" / "train.jsonl",
        "training.rm.dataset": project / "data" / "pairs.jsonl",
        "training.rl.dataset": project / "data" / "problems.jsonl",
    }
    stages = loaded.stage_sections()
    assert stages is not None
    assert [(type(s), s.name) for s in stages] == [
        (SLTraining, "sl"),
        (RMTraining, "rm"),
        (RLTraining, "rl"),
    ]
    assert all(s.lora_rank == 8 for s in stages)  # the shared settings, in every stage
    assert stages[2].reward.type == "reward_model"  # type: ignore[union-attr]
    assert loaded.final_dir(project / "runs" / "r") == project / "runs" / "r" / "rl"


# ---- stages --------------------------------------------------------------------------------


def two_stages(**shared: Any) -> dict[str, Any]:
    return {
        "name": "demo",
        "training": shared,
        "stages": [
            {"name": "sft", "algorithm": "sl", "dataset": "../data/train.jsonl", "max_steps": 3},
            {"algorithm": "rl", "dataset": "../data/problems.jsonl", "seed": 7},
        ],
    }


def test_stages_inherit_the_shared_settings_and_a_stage_may_set_its_own(project: Path) -> None:
    config = load_pipeline_config(write(project, two_stages(lora_rank=8, seed=3)))
    sft, rl = config.sections
    assert isinstance(sft, SLTraining) and isinstance(rl, RLTraining)
    assert config.training is None and config.final is rl
    assert (sft.name, rl.name) == ("sft", "rl")  # a stage's name defaults to its algorithm
    assert (sft.lora_rank, rl.lora_rank) == (8, 8)
    assert (sft.seed, rl.seed) == (3, 7)  # the stage's own value wins
    assert (sft.dataset, rl.dataset) == (
        project / "data/train.jsonl",
        project / "data/problems.jsonl",
    )
    assert [config.where(s) for s in config.sections] == ["stages[0]", "stages[1]"]
    run = project / "runs" / "r"
    assert [config.section_dir(run, s) for s in config.sections] == [run / "sft", run / "rl"]
    assert config.final_dir(run) == run / "rl"
    assert config.base_model == "thinker/tiny" and config.backend == "local"
    assert list(config.datasets()) == ["stages[0].dataset", "stages[1].dataset"]


def test_stage_errors_are_named_by_index_and_reported_at_once(project: Path) -> None:
    config = two_stages(lora_rank=8, dataset="../data/train.jsonl")
    config["stages"][1].update(learning_rate=0, init_from="thinker://x/weights/y", lora_rank=4)
    config["stages"] += [
        {"algorithm": "rlhf"},
        {"name": "sft", "algorithm": "dpo", "dataset": "../data/pairs.jsonl", "bogus": 1},
        {"algorithm": "ppo"},
    ]
    problems = problems_of(write(project, config))
    expected = [
        "training.dataset: with `stages:`, `training:` holds only the settings every stage "
        "shares (base_model, backend, quantization, lora_rank, seed, renderer); set dataset in "
        "each stage",
        "stages[1].init_from: set by the pipeline (the previous stage's final checkpoint); "
        "remove it",
        "stages[1].lora_rank: 4 differs from stages[0]'s 8; each stage continues the previous "
        "one's weights, so all share one lora_rank (give it once in `training:`)",
        "stages[3].name: 'sft' is also the name of stages[0]; each stage needs a directory of "
        "its own",
        "stages[1].learning_rate: Input should be greater than 0",
        "stages[2].algorithm: rlhf cannot be a stage: it is itself the stages sl -> rm -> rl; "
        "use it as `training.algorithm`, or list those stages (algorithm: sl, rm, rl)",
        "stages[3].bogus: Extra inputs are not permitted",
        "stages[4].algorithm: unknown algorithm 'ppo'; expected one of sl, dpo, rl, rm",
    ]
    assert problems == expected


def test_stages_must_share_one_base_model(project: Path) -> None:
    config = two_stages()
    config["stages"][1]["base_model"] = "Qwen/Qwen3-0.6B"
    (problem,) = problems_of(write(project, config))
    assert problem.startswith("stages[1].base_model: 'Qwen/Qwen3-0.6B' differs from stages[0]'s")


def test_an_empty_stage_list_and_a_named_training_section_are_refused(project: Path) -> None:
    assert problems_of(write(project, {"name": "demo", "stages": []})) == [
        "stages: List should have at least 1 item after validation, not 0"
    ]
    assert problems_of(write(project, minimal(name="x"))) == [
        "training.name: only stages have names (the pipeline's `name` names the run)"
    ]


def test_the_backend_override_reaches_every_stage(project: Path) -> None:
    config = load_pipeline_config(write(project, two_stages(backend="local")), backend="tinker")
    assert [s.backend for s in config.sections] == ["tinker", "tinker"]
    assert config.backend == "tinker"


def test_the_stages_fingerprint_round_trips(project: Path) -> None:
    config = load_pipeline_config(write(project, two_stages(lora_rank=8)))
    dumped = config.model_dump(by_alias=True)
    assert config_fingerprint(PipelineConfig.model_validate(dumped)) == config_fingerprint(config)


# ---- the dataset check, per algorithm ------------------------------------------------------


def jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_each_dataset_is_checked_as_its_algorithm_reads_it(project: Path) -> None:
    data = project / "data"
    sft = jsonl(data / "sft.jsonl", [ROW, {"messages": [{"role": "user", "content": "1+2"}]}])
    pairs = jsonl(
        data / "bad_pairs.jsonl",
        [
            {"prompt": "1+2", "rejected": "4"},
            PAIR,
            {"prompt": "1+2", "chosen": "3", "rejected": "3"},
        ],
    )
    problems = jsonl(
        data / "bad_problems.jsonl",
        [PROBLEM, {"prompt": "1+2"}, {"prompt": "1+2", "messages": [], "answer": 3}, "[1]"],
    )
    config = {
        "name": "demo",
        "stages": [
            {"algorithm": "sl", "dataset": str(sft)},
            {"algorithm": "dpo", "dataset": str(pairs)},
            {"algorithm": "rl", "dataset": str(problems), "eval_dataset": str(problems)},
        ],
    }
    err = io.StringIO()
    report = validate(load_pipeline_config(write(project, config)), out=io.StringIO(), err=err)

    assert not report.ok
    by_path = {check.path: check for check in report.datasets}
    assert list(by_path) == [sft, pairs, problems]  # the RL file is checked once
    assert by_path[sft].errors == [f"{sft}:2: messages: has no assistant message"]
    assert by_path[pairs].errors == [
        f"{pairs}:1: chosen: missing",
        f"{pairs}:3: rejected: is identical to chosen: the pair carries no preference",
    ]
    assert by_path[problems].errors == [
        f"{problems}:2: answer: missing (the exact_match reward compares completions with it)",
        f"{problems}:3: messages: is empty",
        f"{problems}:3: prompt: give exactly one of 'prompt' or 'messages'",
        f"{problems}:4: row is a JSON array, expected an object",
    ]
    assert by_path[problems].kind == "RL problems (exact_match reward)"
    assert f"{problems}:2: answer: missing" in err.getvalue()
    assert report.metrics()["dataset_errors"] == 7


def test_the_reward_decides_what_a_problem_needs(project: Path) -> None:
    """exact_match reads `answer`, code reads `tests`, a regex reward neither."""
    data = jsonl(project / "data" / "p.jsonl", [{"prompt": "x"}, {"prompt": "y", "tests": ["1"]}])

    def errors(reward: dict[str, Any]) -> list[str]:
        training = minimal(algorithm="rl", dataset=str(data), reward=reward)
        config = load_pipeline_config(write(project, training))
        return validate(config, out=io.StringIO(), err=io.StringIO()).datasets[0].errors

    assert errors({"type": "code"}) == [
        f"{data}:1: tests: missing (the code reward runs completions against them)"
    ]
    assert len(errors({"type": "exact_match"})) == 2
    assert errors({"type": "regex", "pattern": "x"}) == []


@pytest.mark.parametrize(
    ("kind", "good", "bad", "message"),
    [
        ("preferences", PAIR, {"prompt": "1+2", "chosen": "3"}, "rejected: missing"),
        ("problems", PROBLEM, {"prompt": "1+2"}, "answer or tests: missing"),
    ],
)
def test_data_validation_kinds_for_preferences_and_problems(
    project: Path, kind: str, good: Any, bad: Any, message: str
) -> None:
    path = jsonl(project / "data" / f"{kind}.jsonl", [good, bad])
    config = {**minimal(), "data_validation": {"path": str(path), "kind": kind}}
    (check,) = validate(
        load_pipeline_config(write(project, config)), out=io.StringIO(), err=io.StringIO()
    ).datasets
    assert len(check.errors) == 1 and check.errors[0].startswith(f"{path}:2: {message}")


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


def test_to_run_config_writes_into_the_run_directory(project: Path) -> None:
    config = load_pipeline_config(write(project, minimal(learning_rate=0.003, max_steps=5)))
    assert isinstance(config.training, SLTraining)
    sl = config.training.to_run_config(project / "runs" / "r1", init_from="thinker://a/weights/b")
    assert type(sl) is SLConfig
    assert sl.log_path == project / "runs" / "r1"
    assert (sl.learning_rate, sl.max_steps, sl.dataset) == (0.003, 5, config.training.dataset)
    assert sl.init_from == "thinker://a/weights/b"


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "configs").glob("[a-z]*.yaml")))
def test_the_presets_load(name: str) -> None:
    config = load_pipeline_config(REPO / "configs" / f"{name}.yaml")
    assert config.name == name
    assert config.base_model == "thinker/tiny"
    assert config.backend == "local"
    assert config.runs_dir == REPO / "runs"
    header = (REPO / "configs" / f"{name}.yaml").read_text().splitlines()[0]
    assert re.fullmatch(rf"# thinker (run|train) --config configs/{name}\.yaml", header), header


@pytest.mark.parametrize(
    ("name", "algorithms"), [("sl_then_dpo", ["sl", "dpo"]), ("rl", ["sl", "rl"])]
)
def test_the_stage_presets(name: str, algorithms: list[str]) -> None:
    config = load_pipeline_config(REPO / "configs" / f"{name}.yaml")
    assert [s.algorithm for s in config.sections] == algorithms
    assert all(s.init_from is None for s in config.sections)  # set by the pipeline
    report = validate(config, out=io.StringIO(), err=io.StringIO())
    assert report.ok, report.failure()


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
    from thinker.algorithms.evaluation import weighted_nll

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


def test_rl_loss_settings_are_checked_when_the_config_loads() -> None:
    """A missing dro beta or a setting the loss does not read fails before any rollout."""
    from pydantic import ValidationError

    from thinker.algorithms.rl_config import RLConfig

    with pytest.raises(ValidationError, match="loss 'dro' needs"):
        RLConfig(dataset=Path("p.jsonl"), loss_fn="dro")
    with pytest.raises(ValidationError, match=r"\['beta'\] not read by 'ppo'"):
        RLConfig(dataset=Path("p.jsonl"), loss_fn="ppo", loss_fn_config={"beta": 1.0})
    assert RLConfig(dataset=Path("p.jsonl"), loss_fn="dro", loss_fn_config={"beta": 0.1})
