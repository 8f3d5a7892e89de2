"""The `thinker` CLI: exit codes per failing stage, stderr format, metadata.json, end to end.

The commands run in-process through `thinker.cli.main` (a fresh interpreter per command
would spend seconds importing torch); one test runs `python -m thinker` for real.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from thinker.cli import main

SECRET = "tml-this-must-never-be-written-9f8e7d"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THINKER_DEBUG", raising=False)
    monkeypatch.setenv("TINKER_API_KEY", SECRET)  # present, so it must be scrubbed everywhere


def arithmetic_rows(n: int) -> list[dict[str, Any]]:
    pairs = [(a, b) for a in range(10) for b in range(10)][:n]
    return [
        {
            "messages": [
                {"role": "user", "content": f"{a}+{b}"},
                {"role": "assistant", "content": str(a + b)},
            ]
        }
        for a, b in pairs
    ]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def write_suite(directory: Path, passing: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = "assert 1 + 1 == 2" if passing else "assert 1 + 1 == 3, 'planted failure'"
    (directory / "test_planted.py").write_text(f"def test_planted():\n    {body}\n")
    return directory


def write_config(tmp_path: Path, **sections: Any) -> Path:
    """A tiny pipeline: thinker/tiny, 32 arithmetic rows, a few steps; sections override."""
    write_jsonl(tmp_path / "data" / "train.jsonl", arithmetic_rows(32))
    write_jsonl(tmp_path / "data" / "test.jsonl", arithmetic_rows(4))
    config: dict[str, Any] = {
        "name": "tiny",
        "runs_dir": "runs",
        "data_validation": {"path": "data/train.jsonl", "kind": "chat"},
        "training": {
            "algorithm": "sl",
            "base_model": "thinker/tiny",
            "backend": "local",
            "dataset": "data/train.jsonl",
            "eval_dataset": "data/test.jsonl",
            "batch_size": 8,
            "learning_rate": 5e-3,
            "lora_rank": 8,
            "max_steps": 4,
            "eval_every": 0,
            "save_every": 0,
            "max_length": 64,
            "seed": 0,
        },
        "evaluation": {"dataset": "data/test.jsonl", "max_tokens": 4, "compare_base": True},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def only_run_dir(tmp_path: Path) -> Path:
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def read_metadata(run_dir: Path) -> dict[str, Any]:
    text = (run_dir / "metadata.json").read_text()
    assert SECRET not in text
    return json.loads(text)


def assert_error_format(err: str) -> None:
    assert "Traceback" not in err
    assert re.search(r"^\[thinker\] error: ", err, re.MULTILINE), err
    assert SECRET not in err


# ---- command line ------------------------------------------------------------------------


def test_help_lists_the_commands_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for word in ("validate", "train", "eval", "run", "exit codes", "3  validation failed"):
        assert word in out


def test_python_dash_m_thinker_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "thinker", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0
    assert "--skip-validation" in proc.stdout and "--backend" in proc.stdout


def test_a_bad_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "train")  # no --config
    assert code == 2 and "--config" in err


# ---- config errors: 2 --------------------------------------------------------------------


def test_a_bad_config_exits_2_listing_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, training={"learning_rate": -1, "dataset": "data/nope.jsonl"})
    code, _, err = run_cli(capsys, "run", "--config", str(path))
    assert code == 2
    assert_error_format(err)
    assert "training.learning_rate: Input should be greater than 0" in err
    assert f"training.dataset: file not found: {tmp_path / 'data' / 'nope.jsonl'}" in err
    assert not (tmp_path / "runs").exists()  # nothing started


def test_a_secret_in_the_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, training={"api_key": "tml-in-the-file"})
    code, _, err = run_cli(capsys, "validate", "--config", str(path))
    assert code == 2
    assert "training.api_key: secrets are not accepted" in err
    assert "tml-in-the-file" not in err


def test_the_tinker_backend_without_a_key_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TINKER_API_KEY")
    path = write_config(tmp_path)
    code, _, err = run_cli(capsys, "train", "--config", str(path), "--backend", "tinker")
    assert code == 2
    assert_error_format(err)
    assert "TINKER_API_KEY" in err


def test_a_bad_run_name_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path)
    code, _, err = run_cli(capsys, "train", "--config", str(path), "--run-name", "../up")
    assert code == 2 and "--run-name" in err


# ---- validation: 3 -----------------------------------------------------------------------


def test_validate_passes_and_keeps_no_run_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path / "suite", passing=True)
    path = write_config(tmp_path, tests={"path": "suite", "args": ["-q"]})
    code, out, err = run_cli(capsys, "validate", "--config", str(path))
    assert code == 0, err
    assert "1 passed" in out  # pytest's own output, streamed
    assert "32 rows OK" in out
    assert not (tmp_path / "runs").exists()


def test_a_bad_dataset_row_exits_3_with_its_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    good = arithmetic_rows(3)
    bad = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": ""}]}
    data = write_jsonl(tmp_path / "data" / "train.jsonl", [*good[:2], bad, good[2], "{broken"])
    code, _, err = run_cli(capsys, "validate", "--config", str(path))
    assert code == 3
    assert_error_format(err)
    assert f"{data}:3: messages[1].content: is empty" in err
    assert f"{data}:5: malformed JSON" in err
    assert "2 dataset problem(s)" in err


def test_a_failing_test_suite_exits_3_and_nothing_trains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path / "suite", passing=False)
    path = write_config(tmp_path, tests={"path": "suite"})
    code, out, err = run_cli(capsys, "run", "--config", str(path))
    assert code == 3
    assert_error_format(err)
    assert "planted failure" in out  # pytest's report reached the user
    assert "test suite failed" in err
    run_dir = only_run_dir(tmp_path)
    assert not (run_dir / "checkpoints.jsonl").exists()
    assert not (run_dir / "metrics.jsonl").exists()
    meta = read_metadata(run_dir)
    assert meta["stages"]["validate"]["status"] == "failed"
    assert meta["stages"]["validate"]["metrics"]["tests"] == "failed"
    assert "train" not in meta["stages"] and "eval" not in meta["stages"]
    assert (meta["status"], meta["exit_code"]) == ("failed", 3)


def test_metadata_json_records_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_suite(tmp_path / "suite", passing=False)
    path = write_config(tmp_path, tests={"path": "suite"})
    code, _, _ = run_cli(capsys, "train", "--config", str(path), "--run-name", "r1")
    assert code == 3
    run_dir = tmp_path / "runs" / "r1"
    meta = read_metadata(run_dir)

    train_file = tmp_path / "data" / "train.jsonl"
    assert meta["run_name"] == "r1" and meta["command"] == "train"
    assert meta["config_path"] == str(path)
    assert meta["git_commit"] is None  # tmp_path is not a git repository
    assert meta["dataset_sha256"] == hashlib.sha256(train_file.read_bytes()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", meta["config_fingerprint"])
    assert meta["config"]["training"]["learning_rate"] == 5e-3
    assert meta["backend"] == "local"
    assert set(meta["versions"]) == {"thinker", "torch", "transformers", "peft", "tinker", "python"}
    assert meta["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    stage = meta["stages"]["validate"]
    assert {"started_at", "finished_at", "duration_s", "metrics"} <= set(stage)
    assert meta["exit_code"] == 3
    assert [p.name for p in run_dir.iterdir()] == ["metadata.json"]  # no temporary left behind


def test_skip_validation_goes_on_to_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failing suite is skipped; training is reached (and fails fast on an unknown model)."""
    write_suite(tmp_path / "suite", passing=False)
    path = write_config(
        tmp_path, tests={"path": "suite"}, training={"base_model": "no-such-org/no-such-model"}
    )
    code, out, err = run_cli(capsys, "train", "--config", str(path), "--skip-validation")
    assert code == 4
    assert_error_format(err)
    assert "planted failure" not in out  # the suite never ran
    assert "training failed (local backend" in err
    meta = read_metadata(only_run_dir(tmp_path))
    assert meta["stages"]["validate"]["status"] == "skipped"
    assert meta["stages"]["train"]["status"] == "failed"
    assert meta["exit_code"] == 4


def test_thinker_debug_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THINKER_DEBUG", "1")
    path = write_config(tmp_path, training={"base_model": "no-such-org/no-such-model"})
    code, _, err = run_cli(capsys, "train", "--config", str(path), "--skip-validation")
    assert code == 4
    assert "Traceback" in err and "[thinker] error: training failed" in err


# ---- evaluation: 5 -----------------------------------------------------------------------


def test_eval_without_a_trained_run_exits_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    code, _, err = run_cli(capsys, "eval", "--config", str(path))
    assert code == 5
    assert_error_format(err)
    assert "thinker train" in err
    code, _, err = run_cli(capsys, "eval", "--config", str(path), "--run-name", "never-trained")
    assert code == 5 and "thinker train" in err


# ---- end to end (the engine and the SL loop) -----------------------------------------------


def test_run_trains_evaluates_and_records_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path / "suite", passing=True)
    path = write_config(tmp_path, tests={"path": "suite", "args": ["-q"]})
    code, out, err = run_cli(capsys, "run", "--config", str(path))
    assert code == 0, err

    run_dir = only_run_dir(tmp_path)
    assert run_dir.name.startswith("tiny-")
    checkpoints = [json.loads(x) for x in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    assert checkpoints[-1]["step"] == 4
    samples = [json.loads(x) for x in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert len(samples) == 4
    assert set(samples[0]) >= {"prompt", "reference", "prediction", "exact_match", "nll"}
    assert [s["prompt"] for s in samples] == ["0+0", "0+1", "0+2", "0+3"]
    assert (run_dir / "eval_base.jsonl").is_file()

    meta = read_metadata(run_dir)
    assert (meta["status"], meta["exit_code"]) == ("succeeded", 0)
    assert [meta["stages"][s]["status"] for s in ("validate", "train", "eval")] == ["passed"] * 3
    assert meta["stages"]["train"]["steps"] == 4
    assert meta["stages"]["train"]["sampler_path"] == checkpoints[-1]["sampler_path"]
    metrics = meta["stages"]["eval"]["metrics"]
    assert metrics["num_samples"] == 4
    assert 0.0 <= metrics["exact_match"] <= 1.0
    mean_nll = sum(s["nll"] for s in samples) / len(samples)  # equal-length answers here
    assert metrics["eval_nll"] == pytest.approx(mean_nll, rel=0.05)
    # Four steps of SL lower the held-out NLL below the untrained base model's.
    assert metrics["eval_nll"] < metrics["base_eval_nll"]

    # `eval` alone picks the latest run of the config and updates its metadata.
    code, out, err = run_cli(capsys, "eval", "--config", str(path), "--skip-validation")
    assert code == 0, err
    meta = read_metadata(run_dir)
    assert meta["command"] == "eval" and meta["exit_code"] == 0
    assert meta["stages"]["validate"]["status"] == "skipped"
    assert meta["stages"]["train"]["status"] == "passed"  # kept from the first command
    assert meta["stages"]["eval"]["checkpoint"] == checkpoints[-1]["sampler_path"]
    assert meta["stages"]["eval"]["metrics"]["eval_nll"] == pytest.approx(metrics["eval_nll"])


def write_rl_config(tmp_path: Path, rows: list[Any] | None = None) -> tuple[Path, Path]:
    """A one-algorithm RL pipeline (exact match on sums), 2 tiny steps: (config, its data)."""
    rows = rows or [{"prompt": f"{a}+{a}", "answer": str(2 * a)} for a in range(8)]
    data = write_jsonl(tmp_path / "data" / "problems.jsonl", rows)
    training = {
        "algorithm": "rl",
        "base_model": "thinker/tiny",
        "dataset": "data/problems.jsonl",
        "eval_fraction": 0.25,
        "lora_rank": 8,
        "group_size": 2,
        "groups_per_batch": 2,
        "max_tokens": 4,
        "max_steps": 2,
        "eval_every": 0,
        "save_every": 0,
    }
    path = tmp_path / "rl.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny-rl", "runs_dir": "runs", "training": training}))
    return path, data


def test_an_rl_problem_the_reward_cannot_score_exits_3_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"prompt": "1+1", "answer": "2"}, {"prompt": "2+2"}, {"messages": "3+3", "answer": 6}]
    path, data = write_rl_config(tmp_path, rows)
    code, _, err = run_cli(capsys, "validate", "--config", str(path))
    assert code == 3
    assert_error_format(err)
    assert f"{data}:2: answer: missing (the exact_match reward compares completions with it)" in err
    assert f"{data}:3: messages: expected array, got string" in err
    assert "as RL problems (exact_match reward): 2 problem(s)" in err


def test_run_dispatches_to_the_rl_loop_and_records_its_held_out_reward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: a second thread only waits on a shared CPU
    try:
        path, _ = write_rl_config(tmp_path)
        code, out, err = run_cli(capsys, "run", "--config", str(path), "--run-name", "r1")
    finally:
        torch.set_num_threads(threads)
    assert code == 0, err

    run_dir = tmp_path / "runs" / "r1"
    written = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (written["log_path"], written["group_size"]) == (str(run_dir), 2)  # an RLConfig
    checkpoints = [json.loads(x) for x in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    assert checkpoints[-1]["step"] == 2
    assert (run_dir / "rollouts" / "step_000002.jsonl").is_file()  # the RL loop ran here
    meta = read_metadata(run_dir)
    assert "training_stages" not in meta
    assert meta["stages"]["train"]["steps"] == 2
    evaluation = meta["stages"]["eval"]
    assert set(evaluation["metrics"]) == {"eval_reward_mean"}
    assert evaluation["held_out_from_training"] is True
    assert not (run_dir / "eval.jsonl").exists()
    assert "no answers generated (set evaluation.dataset" in out


def test_sigterm_marks_the_run_interrupted_and_train_resumes_it(tmp_path: Path) -> None:
    """A real `python -m thinker train` killed mid-run: exit 130, then the same run resumes."""
    config = write_config(
        tmp_path, training={"max_steps": 100, "save_every": 5, "eval_every": 0, "batch_size": 4}
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "thinker", "train", "--config", str(config), "--run-name", "r1"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    checkpoints = tmp_path / "runs" / "r1" / "checkpoints.jsonl"
    deadline = time.monotonic() + 60
    while not checkpoints.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert checkpoints.exists(), proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "[thinker] error: interrupted" in err.decode()
    meta = json.loads((tmp_path / "runs" / "r1" / "metadata.json").read_text())
    assert meta["status"] == "interrupted" and meta["exit_code"] == 130
    assert meta["stages"]["train"]["status"] == "interrupted"

    saved = [json.loads(line)["step"] for line in checkpoints.read_text().splitlines()]
    resumed = subprocess.run(
        [*argv[:-2], "--run-name", "r1", "--skip-validation"],
        env={**env, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f'resumed: {{"step": {saved[-1]}' in resumed.stdout
    final = [json.loads(line)["step"] for line in checkpoints.read_text().splitlines()]
    assert final[: len(saved)] == saved and final[-1] == 100
