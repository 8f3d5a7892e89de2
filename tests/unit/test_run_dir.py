"""RunDir: the one place a run directory's files are named; CheckpointRecord: one typed line
of checkpoints.jsonl, written and read back."""

from __future__ import annotations

import json
from pathlib import Path

from thinker.runs import CheckpointRecord, RunDir


def test_checkpoint_records_round_trip_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    assert run.last_checkpoint() is None
    first = CheckpointRecord(name="000005", step=5, state_path="thinker://r/weights/000005")
    second = CheckpointRecord(
        name="000010",
        step=10,
        state_path="thinker://r/weights/000010",
        sampler_path="thinker://r/sampler_weights/000010",
        micro_batch_size=4,
    )
    run.add_checkpoint(first)
    run.add_checkpoint(second)
    with open(run.checkpoints, "a") as f:
        f.write('{"name": "000015", "st')  # a crash in the middle of the next line
    assert run.checkpoint_records() == [first, second]
    assert run.last_checkpoint() == second
    lines = [json.loads(line) for line in run.checkpoints.read_text().splitlines()[:2]]
    assert "sampler_path" not in lines[0]  # unset fields are left out of the line
    assert lines[1]["micro_batch_size"] == 4


def test_a_line_written_by_an_older_version_still_reads(tmp_path: Path) -> None:
    """Lines are read as they were written: unknown keys are ignored, missing optional ones
    default."""
    run = RunDir(tmp_path)
    line = {"name": "000001", "step": 1, "state_path": "s", "sampler_path": "p", "epoch": 0}
    run.checkpoints.write_text(json.dumps(line) + "\n")
    (record,) = run.checkpoint_records()
    assert (record.step, record.sampler_path, record.reference_path) == (1, "p", None)


def test_stages_rollouts_and_the_log_tail(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.stage("rl").checkpoints == tmp_path / "rl" / "checkpoints.jsonl"
    run.rollouts.mkdir()
    for step in (2, 10):
        run.rollout_file(step).write_text("{}\n")
    (run.rollouts / "notes.txt").write_text("not a step")
    assert run.rollout_files() == {2: run.rollout_file(2), 10: run.rollout_file(10)}
    assert run.log_tail() == ""  # no worker.log yet
    run.log.write_text("".join(f"line {i}\n" for i in range(50)))
    assert run.log_tail(3) == "line 47\nline 48\nline 49"
