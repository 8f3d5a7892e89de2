"""The stages form through the CLI, on thinker/tiny: [sl (3 steps) -> rl (2 steps)] and
[sl -> dpo], each stage in <run>/<stage>/ starting from the previous one's final checkpoint,
one metadata.json listing them, and a second start of the run skipping or resuming them.

The commands run in-process through `thinker.cli.main`, as in test_cli.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from thinker.cli import main
from thinker.files import read_jsonl
from thinker.runs import RunDir

SL_STAGE = {
    "name": "warmup",
    "algorithm": "sl",
    "dataset": "data/warmup.jsonl",
    "eval_fraction": 0.0,
    "batch_size": 8,
    "learning_rate": 5.0e-3,
    "max_steps": 3,
    "eval_every": 0,
    "save_every": 0,
    "max_length": 64,
}
RL_STAGE = {
    "name": "rl",
    "algorithm": "rl",
    "dataset": "data/problems.jsonl",
    "eval_dataset": "data/problems_test.jsonl",
    "group_size": 2,
    "groups_per_batch": 2,
    "max_tokens": 4,
    "learning_rate": 3.0e-4,
    "max_steps": 2,
    "eval_every": 0,
    "save_every": 1,
}
DPO_STAGE = {
    "name": "pref",
    "algorithm": "dpo",
    "dataset": "data/pairs.jsonl",
    "eval_fraction": 0.25,
    "batch_size": 4,
    "learning_rate": 1.0e-3,
    "max_steps": 2,
    "eval_every": 0,
    "save_every": 0,
    "max_length": 64,
}


@pytest.fixture(autouse=True, scope="module")
def one_cpu_thread() -> Iterator[None]:
    # Many tiny forwards: on two cores shared with other work, a second OpenMP thread
    # mostly waits for a descheduled peer (see test_dpo_learns.py).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THINKER_DEBUG", raising=False)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_project(root: Path, stages: list[dict[str, Any]], **sections: Any) -> Path:
    """Tiny data sets and a pipeline of `stages` sharing thinker/tiny, rank 8, seed 0."""
    sums = [(f"{a}+{b}", str(a + b)) for a in range(4) for b in range(4)]
    write_jsonl(
        root / "data" / "warmup.jsonl",
        [{"messages": [_message("user", q), _message("assistant", a)]} for q, a in sums],
    )
    write_jsonl(root / "data" / "problems.jsonl", [{"prompt": q, "answer": a} for q, a in sums[:8]])
    write_jsonl(
        root / "data" / "problems_test.jsonl", [{"prompt": q, "answer": a} for q, a in sums[-2:]]
    )
    write_jsonl(
        root / "data" / "pairs.jsonl",
        [{"prompt": q, "chosen": a, "rejected": f"maybe {int(a) + 1}"} for q, a in sums[:8]],
    )
    config = {
        "name": "staged",
        "runs_dir": "runs",
        "training": {"base_model": "thinker/tiny", "backend": "local", "lora_rank": 8, "seed": 0},
        "stages": stages,
        **sections,
    }
    path = root / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _message(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def metadata(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "metadata.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def sl_then_rl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """One finished `thinker run` of [sl -> rl]: (config, run dir, its stdout)."""
    root = tmp_path_factory.mktemp("sl_then_rl")
    path = write_project(root, [SL_STAGE, RL_STAGE])
    out, err = io.StringIO(), io.StringIO()  # capsys is function-scoped
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", "--config", str(path), "--run-name", "r1"])
    assert code == 0, err.getvalue()
    return path, root / "runs" / "r1", out.getvalue()


def test_each_stage_trains_in_its_own_directory_from_the_previous_checkpoint(
    sl_then_rl: tuple[Path, Path, str],
) -> None:
    _, run_dir, out = sl_then_rl
    sl_checkpoints = read_jsonl(RunDir(run_dir / "warmup").checkpoints)
    rl_checkpoints = read_jsonl(RunDir(run_dir / "rl").checkpoints)
    assert [c["step"] for c in sl_checkpoints] == [3]
    assert [c["step"] for c in rl_checkpoints] == [1, 2]
    sl_state = sl_checkpoints[-1]["state_path"]

    rl_config = yaml.safe_load((run_dir / "rl" / "config.yaml").read_text())
    assert rl_config["init_from"] == sl_state
    assert rl_config["log_path"] == str(run_dir / "rl")
    assert f'initialised: {{"from": "{sl_state}"}}' in out  # the RL loop really started there
    assert (run_dir / "rl" / "rollouts" / "step_000002.jsonl").is_file()
    assert not (RunDir(run_dir).checkpoints).exists()  # nothing trains in the run root


def test_metadata_json_lists_the_stages(sl_then_rl: tuple[Path, Path, str]) -> None:
    _, run_dir, _ = sl_then_rl
    meta = metadata(run_dir)
    sl_last = read_jsonl(RunDir(run_dir / "warmup").checkpoints)[-1]
    rl_last = read_jsonl(RunDir(run_dir / "rl").checkpoints)[-1]

    warmup, rl = meta["training_stages"]
    assert (warmup["name"], warmup["algorithm"], warmup["status"]) == ("warmup", "sl", "passed")
    assert (rl["name"], rl["algorithm"], rl["status"]) == ("rl", "rl", "passed")
    assert warmup["run_dir"] == str(run_dir / "warmup") and rl["run_dir"] == str(run_dir / "rl")
    assert (warmup["state_path"], warmup["sampler_path"]) == (
        sl_last["state_path"],
        sl_last["sampler_path"],
    )
    assert (rl["state_path"], rl["steps"]) == (rl_last["state_path"], 2)
    assert warmup["init_from"] is None and rl["init_from"] == sl_last["state_path"]
    assert "train_mean_nll" in warmup["final_metrics"]
    assert {"reward_mean", "eval_reward_mean"} <= set(rl["final_metrics"])

    assert (meta["status"], meta["exit_code"]) == ("succeeded", 0)
    assert meta["stages"]["train"]["sampler_path"] == rl_last["sampler_path"]
    evaluation = meta["stages"]["eval"]
    assert evaluation["held_out_from_training"] is True  # RL logged its held-out reward
    assert evaluation["metrics"] == {"eval_reward_mean": rl["final_metrics"]["eval_reward_mean"]}
    assert set(evaluation["held_out_first_logged"]) == {"eval_reward_mean"}  # at step 0
    assert not (run_dir / "eval.jsonl").exists()  # no evaluation.dataset: nothing generated
    assert set(meta["datasets"]) == {
        "stages[0].dataset",
        "stages[1].dataset",
        "stages[1].eval_dataset",
    }


def test_starting_the_run_again_skips_the_finished_stages(
    sl_then_rl: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_dir, _ = sl_then_rl
    before = metadata(run_dir)["training_stages"]
    code, out, err = run_cli(
        capsys, "train", "--config", str(path), "--run-name", "r1", "--skip-validation"
    )
    assert code == 0, err
    assert "stage warmup finished before; skipped" in out
    assert "stage rl finished before; skipped" in out
    assert "initialised" not in out and "step 1:" not in out  # no model was even loaded
    assert [c["step"] for c in read_jsonl(RunDir(run_dir / "rl").checkpoints)] == [1, 2]
    assert metadata(run_dir)["training_stages"] == before


def test_an_interrupted_stage_resumes_from_its_checkpoints(
    sl_then_rl: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """As an interrupt after RL's first checkpoint leaves it: checkpoints.jsonl ends at step 1
    and metadata.json says "interrupted". The SL stage is skipped; RL resumes at step 1."""
    path, finished, _ = sl_then_rl
    run_dir = finished.parent / "r2"
    shutil.copytree(finished, run_dir)  # thinker:// paths are relative to the run directory
    checkpoints = RunDir(run_dir / "rl").checkpoints
    first = checkpoints.read_text().splitlines()[0]
    checkpoints.write_text(first + "\n")
    meta = metadata(run_dir)
    meta["training_stages"][1].update(status="interrupted", state_path=None)
    (run_dir / "metadata.json").write_text(json.dumps(meta))

    code, out, err = run_cli(
        capsys, "train", "--config", str(path), "--run-name", "r2", "--skip-validation"
    )
    assert code == 0, err
    assert "stage warmup finished before; skipped" in out
    assert "from its checkpoints.jsonl" in out and 'resumed: {"step": 1' in out
    assert [c["step"] for c in read_jsonl(checkpoints)] == [1, 2]
    rl = metadata(run_dir)["training_stages"][1]
    assert (rl["status"], rl["resumed"], rl["steps"]) == ("passed", True, 2)


def test_a_finished_stage_whose_settings_changed_is_refused(
    sl_then_rl: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, _, _ = sl_then_rl
    changed = yaml.safe_load(path.read_text())
    changed["stages"][0]["learning_rate"] = 1.0e-3
    edited = path.with_name("edited.yaml")
    edited.write_text(yaml.safe_dump(changed))
    code, _, err = run_cli(capsys, "train", "--config", str(edited), "--run-name", "r1")
    assert code == 2
    assert "stage 'warmup' (stages[0]) of run r1 finished with other settings" in err


def test_a_dpo_stage_starts_from_sl_and_keeps_it_as_its_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluation = {"dataset": "data/warmup.jsonl", "max_samples": 2, "max_tokens": 4}
    path = write_project(tmp_path, [SL_STAGE, DPO_STAGE], evaluation=evaluation)
    code, out, err = run_cli(capsys, "run", "--config", str(path), "--run-name", "d1")
    assert code == 0, err

    run_dir = tmp_path / "runs" / "d1"
    sl_last = read_jsonl(RunDir(run_dir / "warmup").checkpoints)[-1]
    dpo_config = yaml.safe_load((run_dir / "pref" / "config.yaml").read_text())
    assert dpo_config["init_from"] == sl_last["state_path"]
    assert dpo_config["reference_path"] == sl_last["sampler_path"]
    meta = metadata(run_dir)
    assert [s["status"] for s in meta["training_stages"]] == ["passed", "passed"]
    metrics = meta["stages"]["eval"]["metrics"]
    assert {"eval_accuracy", "eval_margin"} <= set(metrics)  # logged by DPO's training
    assert {"exact_match", "eval_nll"} <= set(metrics)  # generated on evaluation.dataset
    assert metrics["num_samples"] == 2
    assert "dpo held-out metrics logged by training, first -> last: eval_dpo_loss=0.6931->" in out
    # At step 0 the policy is its reference (SL's final weights), so every margin is ~0; had
    # the reference been the base model, SL's three steps would show here.
    assert abs(meta["stages"]["eval"]["held_out_first_logged"]["eval_margin"]) < 1e-4


def test_sl_rm_rl_stages_score_rl_with_the_judge_of_the_rm_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[sl -> rm -> rl]: the judge starts from the base model, RL from SL's weights, and RL's
    reward comes from the judge (the round robin of a group averages exactly 0.5)."""
    rm_stage = {**DPO_STAGE, "name": "judge", "algorithm": "rm"}
    rl_stage = {**RL_STAGE, "reward": {"type": "reward_model"}, "save_every": 0}
    path = write_project(tmp_path, [SL_STAGE, rm_stage, rl_stage])
    code, _, err = run_cli(capsys, "train", "--config", str(path), "--run-name", "j1")
    assert code == 0, err

    run_dir = tmp_path / "runs" / "j1"
    sl_last = read_jsonl(RunDir(run_dir / "warmup").checkpoints)[-1]
    rm_config = yaml.safe_load((run_dir / "judge" / "config.yaml").read_text())
    rl_config = yaml.safe_load((run_dir / "rl" / "config.yaml").read_text())
    assert rm_config["init_from"] is None
    assert rl_config["init_from"] == sl_last["state_path"]
    rl_steps = [m for m in read_jsonl(run_dir / "rl" / "metrics.jsonl") if m["step"] > 0]
    assert [m["reward_mean"] for m in rl_steps] == pytest.approx([0.5, 0.5])
    assert "rm_eval_accuracy" in read_jsonl(run_dir / "judge" / "metrics.jsonl")[-1]
    stages = metadata(run_dir)["training_stages"]
    assert [(s["name"], s["status"]) for s in stages] == [
        ("warmup", "passed"),
        ("judge", "passed"),
        ("rl", "passed"),
    ]


def test_an_rl_stage_scored_by_a_judge_needs_an_rm_stage_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rl_stage = {**RL_STAGE, "reward": {"type": "reward_model"}}
    path = write_project(tmp_path, [SL_STAGE, rl_stage])
    code, _, err = run_cli(capsys, "train", "--config", str(path), "--run-name", "j2")
    assert code == 2  # refused with the config, before anything trains
    assert "stages[1].reward.type: reward_model needs a judge" in err
    assert not (tmp_path / "runs" / "j2").exists()


def test_rlhf_runs_its_own_three_stages_in_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`algorithm: rlhf` is the stages sl -> rm -> rl, recorded like a `stages:` list; the CLI
    finds its final checkpoint in <run>/rl and records the judge's and the policy's held-out
    figures."""
    write_project(tmp_path, [SL_STAGE])  # the data
    small = {"max_steps": 2, "eval_every": 0, "save_every": 0}
    training = {
        "algorithm": "rlhf",
        "base_model": "thinker/tiny",
        "lora_rank": 8,
        "sl": {**small, "dataset": "data/warmup.jsonl", "batch_size": 8, "max_length": 64},
        "rm": {**small, "dataset": "data/pairs.jsonl", "eval_fraction": 0.25, "batch_size": 4},
        "rl": {
            **small,
            "dataset": "data/problems.jsonl",
            "eval_dataset": "data/problems_test.jsonl",  # "answer" is the judge's reference
            "group_size": 2,
            "groups_per_batch": 2,
            "max_tokens": 4,
        },
    }
    path = tmp_path / "rlhf.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny-rlhf", "runs_dir": "runs", "training": training}))
    code, out, err = run_cli(capsys, "run", "--config", str(path), "--run-name", "h1")
    assert code == 0, err

    run_dir = tmp_path / "runs" / "h1"
    rl_last = read_jsonl(RunDir(run_dir / "rl").checkpoints)[-1]
    meta = metadata(run_dir)
    stages = [(s["name"], s["algorithm"], s["status"]) for s in meta["training_stages"]]
    assert stages == [("sl", "sl", "passed"), ("rm", "rm", "passed"), ("rl", "rl", "passed")]
    assert "eval_win_rate_vs_sl" in meta["training_stages"][2]["final_metrics"]
    assert meta["stages"]["train"]["sampler_path"] == rl_last["sampler_path"]
    assert meta["stages"]["eval"]["checkpoint"] == rl_last["sampler_path"]
    held_out = meta["stages"]["eval"]["metrics"]
    assert {"rm_eval_accuracy", "eval_reward_mean"} <= set(held_out)
    assert set(meta["datasets"]) >= {"training.sl.dataset", "training.rm.dataset"}
