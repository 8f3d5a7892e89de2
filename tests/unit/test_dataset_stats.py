"""Dataset preview and statistics (thinker.data.stats) against the renderers' own weights.

The expected strings are role_colon's format over thinker/tiny's byte-level tokenizer (one
token per UTF-8 byte, no BOS): "User: 3+4\\n\\nAssistant: 7\\n\\nUser:", where the reply's
output " 7\\n\\n" and the stop overlap "User:" train, as test_renderers.py spells out.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tokenizer_fixtures import llama3_tokenizer

from thinker.algorithms.dpo import _render as dpo_render
from thinker.cli import main as cli_main
from thinker.cli.datasets import STYLE_CUT, STYLE_RESET, STYLE_TRAINED, print_report
from thinker.data.preferences import check_pair, row_pair
from thinker.dataprep.stats import (
    DatasetStats,
    PreviewRow,
    Rendering,
    RenderOptions,
    compute_stats,
    histogram,
    load_rendering,
    preview,
    preview_row,
    segments,
    summarize,
)
from thinker.renderers import Message, TrainOnWhat, get_renderer
from thinker.renderers.turns import decode
from thinker.services.inspect import inspect_file

Row = dict[str, object]


def chat(*turns: tuple[str, str], **flags: bool) -> Row:
    return {"messages": [{"role": r, "content": c, **flags} for r, c in turns]}


TWO_TURNS = chat(("user", "1+1"), ("assistant", "2"), ("user", "3+4"), ("assistant", "7"))


def tiny(**options: object) -> Rendering:
    return load_rendering(RenderOptions(**options))  # type: ignore[arg-type]


def trained_texts(row: PreviewRow, sequence: int = 0) -> list[str]:
    return [s.text for s in row.sequences[sequence].segments if s.trained]


def whole_text(row: PreviewRow, sequence: int = 0) -> str:
    return "".join(s.text for s in row.sequences[sequence].segments)


def renderer_trained_texts(rendering: Rendering, messages: list[Message], mode: str) -> list[str]:
    """What the renderer itself trains: each run of weight > 0 tokens, decoded, skipping the
    first token (never a target)."""
    tokens, weights = rendering.renderer.build_supervised_example(messages, TrainOnWhat(mode))
    runs: list[list[int]] = []
    for i, (token, weight) in enumerate(zip(tokens, weights, strict=True)):
        if i > 0 and weight > 0:
            if i > 1 and weights[i - 1] > 0 and runs:
                runs[-1].append(token)
            else:
                runs.append([token])
    return [decode(rendering.tokenizer, run) for run in runs]


# ---- preview marks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("last_assistant_message", [" 7\n\nUser:"]),
        ("all_assistant_messages", [" 2\n\n", " 7\n\nUser:"]),
    ],
)
def test_chat_preview_marks_what_the_renderer_trains(mode: str, expected: list[str]) -> None:
    rendering = tiny(train_on_what=mode)
    row = preview_row(1, TWO_TURNS, "chat", rendering)
    messages: list[Message] = TWO_TURNS["messages"]  # type: ignore[assignment]
    assert trained_texts(row) == expected
    assert trained_texts(row) == renderer_trained_texts(rendering, messages, mode)
    assert whole_text(row) == "User: 1+1\n\nAssistant: 2\n\nUser: 3+4\n\nAssistant: 7\n\nUser:"
    assert row.num_tokens == len(whole_text(row))  # one token per byte, all ASCII here
    assert row.num_trained_tokens == sum(len(t) for t in expected)
    assert not row.truncated


def test_prompt_completion_preview_trains_the_completion_and_stop() -> None:
    row = preview_row(4, {"prompt": "abc", "completion": "cba"}, "prompt_completion", tiny())
    marks = [(s.text, s.trained) for s in row.sequences[0].segments]
    assert marks == [("User: abc\n\nAssistant:", False), (" cba\n\nUser:", True)]
    assert row.line == 4 and row.num_trained_tokens == len(" cba\n\nUser:")


def test_preview_on_a_special_token_renderer_marks_the_end_of_turn() -> None:
    tokenizer = llama3_tokenizer()
    options = RenderOptions(base_model="llama-3-fixture", renderer="llama3")
    rendering = Rendering(tokenizer, get_renderer("llama3", tokenizer), options)
    row = preview_row(1, chat(("user", "2+2"), ("assistant", "4")), "chat", rendering)
    assert trained_texts(row) == ["4<|eot_id|>"]
    assert whole_text(row).startswith("<|begin_of_text|><|start_header_id|>user")


def test_preference_preview_trains_each_completion_as_dpo_renders_it() -> None:
    rendering = tiny()
    row_data: Row = {"prompt": "3+4", "chosen": "7", "rejected": "maybe 8"}
    row = preview_row(2, row_data, "preferences", rendering)
    assert [s.name for s in row.sequences] == ["chosen", "rejected"]
    assert trained_texts(row, 0) == [" 7\n\nUser:"]
    assert trained_texts(row, 1) == [" maybe 8\n\nUser:"]
    # The datums dpo.py trains on: same tokens, and our marks are their weights.
    chosen, rejected = dpo_render(rendering.renderer, row_pair(row_data), 1024)
    for datum, sequence in zip((chosen, rejected), row.sequences, strict=True):
        weights = datum.loss_fn_inputs["weights"].data
        assert sequence.num_tokens == len(weights) + 1
        assert sequence.num_trained_tokens == sum(1 for w in weights if w > 0)


def test_problem_preview_is_the_generation_prompt_with_nothing_trained() -> None:
    rendering = tiny()
    row = preview_row(1, {"prompt": "1+2", "answer": "3"}, "problems", rendering)
    assert whole_text(row) == "User: 1+2\n\nAssistant:"
    assert trained_texts(row) == [] and row.num_trained_tokens == 0


def test_truncated_text_is_marked_and_never_garbled_mid_character() -> None:
    # "é" is 2 bytes; max_length 25 cuts the third in half. The text still reads whole.
    row = preview_row(1, chat(("user", "x"), ("assistant", "é" * 6)), "chat", tiny(max_length=25))
    full = "User: x\n\nAssistant: " + "é" * 6 + "\n\nUser:"
    assert whole_text(row) == full
    kept = "".join(s.text for s in row.sequences[0].segments if not s.truncated)
    assert kept == "User: x\n\nAssistant: éé"  # the half "é" goes with the cut-off text
    assert row.truncated and row.num_trained_tokens == 6  # " ", two "é" and half of one


def test_segments_move_a_boundary_past_a_split_character_where_decoding_would_replace_it() -> None:
    tokenizer = llama3_tokenizer()  # byte-level BPE: a lone half of "é" decodes to U+FFFD
    tokens = list(tokenizer.encode("aéb", add_special_tokens=False))
    assert len(tokens) == 4
    parts = segments(tokenizer, tokens, [False, False, True, True], cut=4)
    assert "".join(p.text for p in parts) == "aéb"
    assert all("\ufffd" not in p.text for p in parts)


def test_preview_takes_the_first_rows_and_reports_a_refused_row_with_its_line() -> None:
    rows = [(1, TWO_TURNS), (2, chat(("user", "x"), ("assistant", "y"))), (3, TWO_TURNS)]
    shown = preview(rows, "chat", tiny(train_on_what="customized"), limit=2)
    assert [r.line for r in shown] == [1, 2]
    assert shown[0].error is not None and "'trainable' flag" in shown[0].error


# ---- statistics --------------------------------------------------------------------------


def stats_of(rows: list[Row], kind: str = "chat", **options: object) -> DatasetStats:
    return compute_stats(list(enumerate(rows, start=1)), kind, tiny(**options))


def test_rows_that_train_no_token_are_errors_with_their_lines() -> None:
    ends_with_user = chat(("user", "1+1"), ("assistant", "2"), ("user", "and 3+4?"))
    rows = [TWO_TURNS, ends_with_user, TWO_TURNS]
    result = stats_of(rows)
    assert result.zero_trained.count == 1 and result.zero_trained.lines == [2]
    assert [e.line for e in result.errors] == [2] and result.error_count == 1
    assert not result.trainable
    # All assistant messages: the first reply trains, so the row is fine.
    assert stats_of(rows, train_on_what="all_assistant_messages").trainable


def test_customized_rows_with_an_untrainable_reply_or_no_flags_are_errors() -> None:
    flagged_off = chat(("user", "1+1"), ("assistant", "2"), trainable=False)
    flagged_on = chat(("user", "1+1"), ("assistant", "2"), trainable=True)
    unflagged = chat(("user", "1+1"), ("assistant", "2"))
    result = stats_of([flagged_on, flagged_off, unflagged], train_on_what="customized")
    assert result.zero_trained.lines == [2]
    assert result.unrenderable.lines == [3]
    assert result.error_count == 2
    assert "'trainable' flag" in result.errors[1].message


def test_truncation_counts_rows_and_those_that_lose_trained_tokens() -> None:
    short = chat(("user", "1"), ("assistant", "2"))  # 28 tokens, trained from 19 on
    rows = [
        short,
        chat(("user", "1"), ("assistant", "2" * 20)),
        chat(("user", "1" * 30), ("assistant", "2")),
    ]
    result = stats_of(rows, max_length=28)
    assert result.truncated.lines == [2, 3]
    assert result.truncated_losing_trained.lines == [2, 3]
    # Row 3's prompt alone is over 28 tokens: truncation leaves it nothing to train.
    assert result.zero_trained.lines == [3]
    assert "max_length=28 cuts off" in result.errors[0].message
    assert stats_of(rows, max_length=1024).truncated.count == 0


def test_token_summary_and_histogram_sum_to_the_rows() -> None:
    rows = [chat(("user", "1" * n), ("assistant", "2")) for n in (1, 5, 40, 100)]
    result = stats_of(rows)
    lengths = [27 + n for n in (1, 5, 40, 100)]  # "User: " + n + "\n\nAssistant: 2\n\nUser:"
    assert result.tokens.min == min(lengths) and result.tokens.max == max(lengths)
    assert result.tokens.total == sum(lengths)
    assert sum(b.count for b in result.histogram) == result.rows == 4
    assert result.roles == {"user": 4, "assistant": 4} and result.turns == {"2": 4}


def test_summary_and_histogram_by_hand() -> None:
    """Lengths 1, 3, 3, 8: mean 15/4, median (3 + 3) / 2, p95 the 4th of 4 (nearest rank);
    power-of-two bins [1,2) 1, [2,4) 2, [4,8) 0, [8,16) 1."""
    counts = Counter({1: 1, 3: 2, 8: 1})
    summary = summarize(counts)
    assert (summary.min, summary.mean, summary.median, summary.p95, summary.max) == (
        1,
        3.75,
        3.0,
        8,
        8,
    )
    bins = [(b.lo, b.hi, b.count) for b in histogram(counts)]
    assert bins == [(1, 2, 1), (2, 4, 2), (4, 8, 0), (8, 16, 1)]
    assert histogram(Counter()) == [] and summarize(Counter()).total == 0


def test_preference_pairs_that_render_alike_are_counted() -> None:
    # Validation compares the raw values, which differ; rendered, the two are the same.
    same: Row = {
        "prompt": "3+4",
        "chosen": "7",
        "rejected": [{"role": "assistant", "content": "7"}],
    }
    assert check_pair(2, same) == []
    different: Row = {"prompt": "3+4", "chosen": "7", "rejected": "8"}
    result = stats_of([different, same], kind="preferences")
    assert result.identical_pairs is not None and result.identical_pairs.lines == [2]
    assert result.empty_sides is not None and result.empty_sides.count == 0
    assert result.roles == {"user": 2, "assistant": 4}


def test_a_preference_side_cut_away_by_truncation_is_an_empty_side() -> None:
    row: Row = {"prompt": "x" * 40, "chosen": "7", "rejected": "8"}
    result = stats_of([row], kind="preferences", max_length=30)
    assert result.empty_sides is not None and result.empty_sides.lines == [1]
    assert result.zero_trained.lines == [1] and not result.trainable


def test_problem_stats_count_answers_and_tests_and_train_nothing() -> None:
    rows: list[Row] = [
        {"prompt": "1+2", "answer": "3"},
        {"prompt": "write f", "tests": ["assert f() == 1"]},
        {"messages": [{"role": "user", "content": "2+2"}], "answer": 4},
    ]
    result = stats_of(rows, kind="problems")
    assert (result.with_answer, result.with_tests) == (2, 1)
    assert result.tokens.min == len("User: 1+2\n\nAssistant:")
    assert result.trainable and result.zero_trained.count == 0 and result.truncated.count == 0


# ---- thinker datasets inspect ------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


def inspect_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = cli_main(["datasets", "inspect", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("example", "kind", "rows"),
    [
        ("arithmetic/train.jsonl", "chat", 100),
        ("reversal/train.jsonl", "prompt_completion", 400),
        ("preferences/train.jsonl", "preferences", 300),
        ("rl/train.jsonl", "problems", 80),
    ],
)
def test_inspect_finds_the_shipped_examples_trainable(
    capsys: pytest.CaptureFixture[str], example: str, kind: str, rows: int
) -> None:
    code, found = inspect_json(capsys, str(EXAMPLES / example))
    assert code == 0
    assert (found["format"], found["kind"], found["detected"]) == (
        "jsonl",
        kind,
        ["format", "kind", "mapping"],
    )
    assert found["validation"]["error_count"] == 0 and found["stats"]["rows"] == rows
    assert sum(b["count"] for b in found["stats"]["histogram"]) == rows
    assert len(found["preview"]) == 3 and found["trainable"]


@pytest.mark.parametrize(
    ("broken", "line", "error_kind"),
    [
        ("bad_json.jsonl", 2, "malformed_json"),
        ("missing_field.jsonl", 3, "missing"),
        ("empty_content.jsonl", 2, "empty"),
    ],
)
def test_inspect_reports_a_broken_file_with_the_bad_line(
    capsys: pytest.CaptureFixture[str], broken: str, line: int, error_kind: str
) -> None:
    code, found = inspect_json(capsys, str(EXAMPLES / "broken" / broken))
    assert code == 3 and not found["trainable"]
    assert found["validation"]["by_kind"] == {error_kind: 1}
    assert [e["line"] for e in found["validation"]["errors"]] == [line]


def write_jsonl(path: Path, rows: list[Row]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_inspect_fails_rows_that_train_nothing_and_prints_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ends_with_user = chat(("user", "1+1"), ("assistant", "2"), ("user", "and 3+4?"))
    path = write_jsonl(tmp_path / "chat.jsonl", [TWO_TURNS, ends_with_user])
    assert cli_main(["datasets", "inspect", str(path)]) == 3
    report = capsys.readouterr().out
    assert "line 2: the row trains no token" in report
    assert "Assistant:⟦ 7\n\n    User:⟧" in report  # trained text marked off a terminal
    assert "NOT trainable: 1 rows that train no token" in report
    code, found = inspect_json(capsys, str(path), "--train-on-what", "all_assistant_messages")
    assert code == 0 and found["stats"]["zero_trained"]["count"] == 0


def test_inspect_maps_fields_given_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("question,reply\nabc,cba\nxyz,zyx\n")
    argv = [str(path), "--kind", "prompt_completion", "--map", "prompt=question"]
    code, found = inspect_json(capsys, *argv, "--map", "completion=reply", "--rows", "1")
    assert code == 0 and found["mapping"] == {"prompt": "question", "completion": "reply"}
    assert found["format"] == "csv" and found["detected"] == ["format"]
    segments_ = found["preview"][0]["sequences"][0]["segments"]
    assert [s["text"] for s in segments_ if s["trained"]] == [" cba\n\nUser:"]
    assert found["preview"][0]["line"] == 2  # the CSV header is line 1


@pytest.mark.parametrize(
    "argv",
    [
        ["missing.jsonl"],
        ["{example}", "--map", "prompt"],
        ["{example}", "--renderer", "nope"],
        ["{example}", "--kind", "essays"],
        ["{example}", "--max-length", "1"],
    ],
)
def test_inspect_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    example = str(EXAMPLES / "arithmetic" / "train.jsonl")
    assert cli_main(["datasets", "inspect", *(a.replace("{example}", example) for a in argv)]) == 2
    assert capsys.readouterr().out == ""


def test_inspect_report_on_a_terminal_styles_instead_of_bracketing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [TWO_TURNS])
    inspection = inspect_file(path, "chat", {}, RenderOptions(max_length=50))
    out = io.StringIO()
    print_report(inspection, out, color=True)
    report = out.getvalue()
    # 55 tokens cut at 50: the reply " 7\n\n" trains, its stop "User:" is cut off.
    unindented = report.replace("\n    ", "\n")
    assert f"{STYLE_TRAINED} 7\n\n{STYLE_RESET}{STYLE_CUT}User:{STYLE_RESET}" in unindented
    assert "⟦" not in report and "⟪" not in report
