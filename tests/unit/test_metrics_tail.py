"""MetricsTail: read_metrics of a growing metrics.jsonl, parsing only what was appended."""

from __future__ import annotations

from pathlib import Path

from thinker.runs import MetricsTail, RunDir, RunLogger, read_metrics


def test_it_matches_read_metrics_as_the_file_grows_and_rewinds(tmp_path: Path) -> None:
    logger = RunLogger(tmp_path)
    path = RunDir(tmp_path).metrics
    tail = MetricsTail(path)
    assert tail.rows() == []  # no file yet
    seen = []
    for step in range(1, 6):
        logger.log_metrics({"loss": 1.0 / step}, step)
        seen.append(tail.rows())
        assert seen[-1] == read_metrics(path)
    assert [r["step"] for r in seen[-1]] == [1, 2, 3, 4, 5]
    logger.rewind(3)  # a resume from step 3: steps 4 and 5 are trained again
    assert [r["step"] for r in tail.rows()] == [1, 2, 3]
    logger.log_metrics({"loss": 0.1}, 4)
    assert [r["step"] for r in tail.rows()] == [1, 2, 3, 4]
    assert tail.rows() == read_metrics(path)
    assert len(seen[0]) == 1  # earlier answers are copies: later rows do not change them


def test_a_line_being_written_waits_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = RunDir(tmp_path).metrics
    tail = MetricsTail(path)
    path.write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "lo')
    assert [r["step"] for r in tail.rows()] == [1]
    with open(path, "ab") as f:
        f.write(b'ss": 1.5}\n')  # the writer finishes its line
    assert [r["step"] for r in tail.rows()] == [1, 2]
    with open(path, "ab") as f:  # garbage (a crash mid-line), NaN (json, not orjson), more rows
        f.write(b'{"step": 3, \n{"step": 4, "loss": NaN}\n[1, 2]\n{"step": 5}\n')
    assert [r["step"] for r in tail.rows()] == [1, 2, 4, 5]
    assert tail.rows() == read_metrics(path)


def test_a_file_that_shrank_or_went_is_read_again(tmp_path: Path) -> None:
    path = RunDir(tmp_path).metrics
    tail = MetricsTail(path)
    path.write_text('{"step": 1}\n{"step": 2}\n')
    assert len(tail.rows()) == 2
    path.write_text('{"step": 7}\n')  # replaced by a shorter file
    assert [r["step"] for r in tail.rows()] == [7]
    path.unlink()
    assert tail.rows() == []
    path.write_text('{"step": 9}\n{"step": 10}\n')
    assert [r["step"] for r in tail.rows()] == [9, 10]
