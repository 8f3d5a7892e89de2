"""thinker.data.detect: the kind and mapping of realistic dataset layouts, in every format,
and the mapping language applied to rows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from thinker.data.loading import check_conversation_row
from thinker.data.preferences import check_pair
from thinker.data.problems import check_problem_row
from thinker.data.validation import RowError
from thinker.dataprep.detect import apply_mapping, detect_file, mapping_problems, source_fields

Row = dict[str, object]
HUMAN_GPT = [{"from": "human", "value": "3+4"}, {"from": "gpt", "value": "7"}]
USER_ASSISTANT = [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]
HH_CHOSEN = "\n\nHuman: What is 3+4?\n\nAssistant: 7\n\nHuman: Sure?\n\nAssistant: Yes, 7."
HH_REJECTED = "\n\nHuman: What is 3+4?\n\nAssistant: 7\n\nHuman: Sure?\n\nAssistant: No, 8."
LONG = "Rayleigh scattering: shorter wavelengths scatter more, so the sky looks blue."

# (name, rows, kind, mapping, does detection ask the user to confirm?)
VARIANTS: list[tuple[str, list[Row], str | None, dict[str, str], bool]] = [
    ("openai messages", [{"messages": USER_ASSISTANT}], "chat", {}, False),
    (
        "sharegpt",
        [{"id": "a1", "conversations": HUMAN_GPT}],
        "chat",
        {"messages": "sharegpt:conversations"},
        False,
    ),
    (
        "messages holding from/value",
        [{"messages": HUMAN_GPT}],
        "chat",
        {"messages": "sharegpt:messages"},
        False,
    ),
    (
        "conversations as messages",
        [{"conversations": USER_ASSISTANT}],
        "chat",
        {"messages": "conversations"},
        False,
    ),
    ("dialog", [{"dialog": USER_ASSISTANT}], "chat", {"messages": "dialog"}, True),
    (
        "guanaco text",
        [{"text": "### Human: 3+4?### Assistant: 7"}],
        "chat",
        {"messages": "transcript:text"},
        True,
    ),
    (
        "alpaca",
        [
            {"instruction": "Add the numbers.", "input": "3 4", "output": "7"},
            {"instruction": "Say hello.", "input": "", "output": "Hello!"},
        ],
        "prompt_completion",
        {"prompt": "instruction+input", "completion": "output"},
        False,
    ),
    (
        "alpaca without input",
        [{"instruction": "Say hello.", "output": "Hello!"}],
        "prompt_completion",
        {"prompt": "instruction", "completion": "output"},
        False,
    ),
    ("canonical pc", [{"prompt": "abc", "completion": "cba"}], "prompt_completion", {}, False),
    (
        "prompt/response",
        [{"prompt": "abc", "response": "cba"}],
        "prompt_completion",
        {"completion": "response"},
        True,
    ),
    (
        "query/response",
        [{"query": "abc", "response": "cba"}],
        "prompt_completion",
        {"prompt": "query", "completion": "response"},
        True,
    ),
    (
        "input/target",
        [{"input": "abc", "target": "cba"}],
        "prompt_completion",
        {"prompt": "input", "completion": "target"},
        True,
    ),
    (
        "question/long answer",
        [{"question": "Why is the sky blue?", "answer": LONG}],
        "prompt_completion",
        {"prompt": "question", "completion": "answer"},
        True,
    ),
    (
        "question/short answer",
        [{"question": "3+4", "answer": "7"}, {"question": "2+2", "answer": 4}],
        "problems",
        {"prompt": "question"},
        True,
    ),
    ("rl canonical", [{"prompt": "3+4", "answer": "7"}], "problems", {}, False),
    (
        "rl ground truth",
        [{"question": "3+4", "ground_truth": "7"}],
        "problems",
        {"prompt": "question", "answer": "ground_truth"},
        True,
    ),
    (
        "rl code tests",
        [{"prompt": "Write f() returning 1.", "tests": ["assert f() == 1"]}],
        "problems",
        {},
        False,
    ),
    (
        "mbpp",
        [{"text": "Write f() returning 1.", "test_list": ["assert f() == 1"]}],
        None,
        {},
        True,
    ),
    (
        "pairs of strings",
        [{"prompt": "3+4", "chosen": "7", "rejected": "8"}],
        "preferences",
        {},
        False,
    ),
    (
        "pairs of messages",
        [
            {
                "messages": [{"role": "user", "content": "3+4"}],
                "chosen": [{"role": "assistant", "content": "7"}],
                "rejected": [{"role": "assistant", "content": "8"}],
            }
        ],
        "preferences",
        {},
        False,
    ),
    (
        "anthropic hh",
        [{"chosen": HH_CHOSEN, "rejected": HH_REJECTED}],
        "preferences",
        {"chosen": "reply:chosen", "rejected": "reply:rejected", "messages": "context:chosen"},
        False,
    ),
    (
        "ultrafeedback",
        [
            {
                "prompt": "3+4",
                "chosen": USER_ASSISTANT,
                "rejected": [USER_ASSISTANT[0], {"role": "assistant", "content": "8"}],
            }
        ],
        "preferences",
        {"chosen": "reply:chosen", "rejected": "reply:rejected"},
        False,
    ),
    (
        "pairs with a question",
        [{"question": "3+4", "chosen": "7", "rejected": "8"}],
        "preferences",
        {"prompt": "question"},
        True,
    ),
    ("raw text", [{"text": "Once upon a time."}], None, {}, True),
    (
        "typos",
        [{"Promt": "abc", "completoin": "cba"}],
        "prompt_completion",
        {"prompt": "Promt", "completion": "completoin"},
        True,
    ),
]
CHECKS = {
    "chat": check_conversation_row,
    "prompt_completion": check_conversation_row,
    "preferences": check_pair,
    "problems": check_problem_row,
}


def write_jsonl(path: Path, rows: list[Row]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows: list[Row]) -> Path:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: v if isinstance(v, str) else json.dumps(v) for k, v in row.items()})
    path.write_text(out.getvalue())
    return path


def write_parquet(path: Path, rows: list[Row]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize(
    ("name", "rows", "kind", "mapping", "asks"), VARIANTS, ids=[v[0] for v in VARIANTS]
)
def test_each_layout_is_detected_and_maps_to_rows_that_pass(
    tmp_path: Path,
    name: str,
    rows: list[Row],
    kind: str | None,
    mapping: dict[str, str],
    asks: bool,
) -> None:
    detection = detect_file(write_jsonl(tmp_path / "data.jsonl", rows))
    assert (detection.format, detection.kind, detection.mapping) == ("jsonl", kind, mapping)
    assert bool(detection.suggestions) == asks, detection.suggestions
    assert detection.sample == rows[:5]
    if kind is not None:  # the proposal, applied, gives rows that training accepts
        for line, row in enumerate(rows, start=1):
            assert CHECKS[kind](line, apply_mapping(row, mapping)) == []


def test_columnar_formats_detect_like_jsonl(tmp_path: Path) -> None:
    alpaca = [{"instruction": "Add.", "input": "3 4", "output": "7"}] * 3
    sharegpt = [{"conversations": HUMAN_GPT}] * 3
    questions = [{"question": "3+4", "ground_truth": "7"}] * 3
    columns = {k: [r[k] for r in questions] for k in questions[0]}
    (tmp_path / "q.json").write_text(json.dumps(columns))
    alpaca_mapping = {"prompt": "instruction+input", "completion": "output"}
    question_mapping = {"prompt": "question", "answer": "ground_truth"}
    cases = [
        (write_csv(tmp_path / "a.csv", alpaca), "csv", "prompt_completion", alpaca_mapping),
        (
            write_parquet(tmp_path / "a.parquet", alpaca),
            "parquet",
            "prompt_completion",
            alpaca_mapping,
        ),
        # A CSV cell holding a JSON list of turns is read as the list.
        (
            write_csv(tmp_path / "s.csv", sharegpt),
            "csv",
            "chat",
            {"messages": "sharegpt:conversations"},
        ),
        (
            write_parquet(tmp_path / "s.parquet", sharegpt),
            "parquet",
            "chat",
            {"messages": "sharegpt:conversations"},
        ),
        (write_parquet(tmp_path / "q.parquet", questions), "parquet", "problems", question_mapping),
        (tmp_path / "q.json", "json", "problems", question_mapping),
    ]
    for path, fmt, kind, mapping in cases:
        detection = detect_file(path, path.name)
        assert (detection.format, detection.kind, detection.mapping) == (fmt, kind, mapping)
        assert detection.fields == list(detection.sample[0])


def test_fields_are_in_first_seen_order_and_the_sample_is_five_rows(tmp_path: Path) -> None:
    rows: list[Row] = [
        {"prompt": f"{i}", "completion": "x", **({"id": i} if i else {})} for i in range(9)
    ]
    rows[3]["system"] = "Be brief."
    detection = detect_file(write_jsonl(tmp_path / "d.jsonl", rows), sample_rows=4)
    assert detection.fields == ["prompt", "completion", "id", "system"]
    assert detection.sample == rows[:4]


def test_unreadable_and_unknown_files_say_why(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    detection = detect_file(broken)
    assert (detection.kind, detection.fields, detection.sample) == (None, [], [])
    assert "no rows" in detection.suggestions[0]
    unknown = detect_file(write_jsonl(tmp_path / "u.jsonl", [{"foo": "a", "bar": "b"}]))
    assert unknown.kind is None and unknown.mapping == {}
    assert unknown.suggestions[0].startswith('cannot tell the kind from the fields ("foo", "bar")')


def test_near_miss_suggestions_are_worded_for_the_user(tmp_path: Path) -> None:
    detection = detect_file(write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a", "response": "b"}]))
    assert detection.suggestions == ["field `response` looks like the completion: map it?"]
    text = detect_file(write_jsonl(tmp_path / "t.jsonl", [{"text": "Once upon a time."}]))
    assert "raw text (`text`)" in text.suggestions[0]
    assert "chat renderer" in text.suggestions[0] and '"completion": "text"' in text.suggestions[0]
    short = detect_file(write_jsonl(tmp_path / "s.jsonl", [{"question": "3+4", "answer": "7"}]))
    assert "RL reference answers" in short.suggestions[-1]


# ---- the mapping language ----------------------------------------------------------------


def test_rename_keeps_unmapped_fields_and_drops_the_sources() -> None:
    row: Row = {"id": 7, "question": "3+4", "answer": "7"}
    mapped = apply_mapping(row, {"prompt": "question", "completion": "answer"})
    assert mapped == {"prompt": "3+4", "completion": "7", "id": 7}
    assert list(mapped) == ["prompt", "completion", "id"]  # canonical fields first
    assert apply_mapping(row, {}) is row


def test_join_skips_absent_and_empty_parts_and_passes_a_wrong_type_on() -> None:
    mapping = {"prompt": "instruction+input", "completion": "output"}
    both = {"instruction": "Add.", "input": "3 4", "output": "7"}
    assert apply_mapping(both, mapping)["prompt"] == "Add.\n\n3 4"
    assert apply_mapping({**both, "input": ""}, mapping)["prompt"] == "Add."
    assert apply_mapping({"instruction": "Add.", "output": "7"}, mapping)["prompt"] == "Add."
    assert "prompt" not in apply_mapping({"output": "7"}, mapping)  # validation says missing
    assert apply_mapping({**both, "input": [3, 4]}, mapping)["prompt"] == [3, 4]


def test_sharegpt_turns_become_messages() -> None:
    turns = [
        {"from": "system", "value": "Be brief."},
        {"from": "human", "value": "3+4"},
        {"from": "gpt", "value": "7", "weight": 1},
        {"from": "narrator", "value": "?"},
        "not a turn",
    ]
    messages = apply_mapping({"conversations": turns}, {"messages": "sharegpt:conversations"})
    assert messages == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "3+4"},
            {"role": "assistant", "content": "7"},
            {"role": "narrator", "content": "?"},  # left for validation to name
            "not a turn",
        ]
    }


def test_hh_transcripts_split_into_context_and_replies() -> None:
    mapping = {"messages": "context:chosen", "chosen": "reply:chosen", "rejected": "reply:rejected"}
    pair = apply_mapping({"chosen": HH_CHOSEN, "rejected": HH_REJECTED}, mapping)
    assert pair == {
        "messages": [
            {"role": "user", "content": "What is 3+4?"},
            {"role": "assistant", "content": "7"},
            {"role": "user", "content": "Sure?"},
        ],
        "chosen": "Yes, 7.",
        "rejected": "No, 8.",
    }
    assert check_pair(1, pair) == []
    transcript = apply_mapping({"text": HH_CHOSEN}, {"messages": "transcript:text"})
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"] * 2  # type: ignore[union-attr]


def test_operations_pass_values_of_the_wrong_shape_through() -> None:
    for expression in ("sharegpt:x", "transcript:x", "context:x", "reply:x"):
        assert apply_mapping({"x": 5}, {"messages": expression}) == {"messages": 5}
    no_marker = apply_mapping({"x": "plain text"}, {"messages": "transcript:x"})
    assert no_marker == {"messages": "plain text"}
    errors = check_conversation_row(1, no_marker)
    assert [(e.field, e.kind) for e in errors] == [("messages", "wrong_type")]


def test_mapping_problems_and_source_fields() -> None:
    assert mapping_problems({"prompt": "question", "messages": "sharegpt:conversations"}) == []
    assert mapping_problems(["prompt"]) == [
        "mapping must be a JSON object of {canonical field: source expression}"
    ]
    problems = mapping_problems({"prompt": "", "messages": "chatml:x", "completion": "a+"})
    assert problems == [
        "mapping['prompt'] must be a non-empty string",
        "mapping['messages']: unknown operation 'chatml' (sharegpt, transcript, context, reply)",
        "mapping['completion']: empty field name in 'a+'",
    ]
    assert source_fields("instruction+input") == ["instruction", "input"]
    assert source_fields("reply:chosen") == ["chosen"]


def test_mapped_rows_report_missing_fields_through_validation() -> None:
    mapped = apply_mapping({"question": "3+4"}, {"prompt": "question", "completion": "answer"})
    errors = check_conversation_row(4, mapped)
    assert errors == [RowError(4, "completion", "missing", "missing")]
