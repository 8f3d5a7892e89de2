"""Dataset loading, validation, splitting and fingerprinting (thinker.data)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from thinker.data import (
    RowError,
    SchemaField,
    dataset_sha256,
    load_conversations,
    schema_for_kind,
    split_train_eval,
    validate_jsonl,
)
from thinker.data.rows import encode_row
from thinker.data.validation import MAX_ROW_DEPTH, DuplicateFinder, ErrorSummary
from thinker.errors import ConfigError, DatasetError
from thinker.services.dataset_files import Plan, scan
from thinker.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
GOOD_CHAT = {
    "messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]
}


def write_lines(tmp_path: Path, *lines: str | bytes | dict[str, object]) -> Path:
    """A JSONL file with one line per argument: dicts as JSON, str and bytes as given."""
    path = tmp_path / "data.jsonl"
    parts = [
        line if isinstance(line, bytes) else (json.dumps(line) if isinstance(line, dict) else line)
        for line in lines
    ]
    path.write_bytes(b"".join((p if isinstance(p, bytes) else p.encode()) + b"\n" for p in parts))
    return path


def found(path: Path, kind: str | None = None, **kwargs: object) -> list[tuple[int, str | None]]:
    """(line, field) of every error validate_jsonl reports."""
    result = validate_jsonl(path, kind=kind, **kwargs)  # type: ignore[arg-type]
    return [(e.line, e.field) for e in result.errors]


# --- validate_jsonl: one test per failure kind, with exact lines and fields -----------------


def test_clean_chat_file_is_ok(tmp_path: Path) -> None:
    path = write_lines(tmp_path, GOOD_CHAT, "", "   ", GOOD_CHAT)
    result = validate_jsonl(path, kind="chat")
    assert result.ok
    assert result.rows_checked == 2  # blank lines are skipped, not rows
    assert result.summary() == f"{path}: 2 rows OK"


def test_invalid_utf8_is_reported_and_later_lines_still_checked(tmp_path: Path) -> None:
    path = write_lines(tmp_path, GOOD_CHAT, b'{"prompt": "ab\xff"}', {"messages": []})
    result = validate_jsonl(path, kind="chat")
    assert [(e.line, e.field, e.kind) for e in result.errors] == [
        (2, None, "invalid_utf8"),
        (3, "messages", "empty"),
    ]
    assert result.errors[0].message == "invalid UTF-8: byte 0xff at byte offset 14"


def test_a_binary_file_is_one_error_not_a_line_of_invalid_utf8_each(tmp_path: Path) -> None:
    path = tmp_path / "file.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    result = validate_jsonl(path, kind="chat")
    assert [(e.line, e.kind) for e in result.errors] == [(0, "not_text")]
    assert result.summary().splitlines()[1] == (
        f"  {path}: not a text file (it looks binary: NUL byte at byte 8); "
        "upload JSONL, JSON, CSV or Parquet"
    )


def test_malformed_json_and_non_object_rows(tmp_path: Path) -> None:
    path = write_lines(tmp_path, '{"prompt": "a",', "[1, 2]", '"text"', "NaN", GOOD_CHAT)
    result = validate_jsonl(path)
    assert [(e.line, e.kind) for e in result.errors] == [
        (1, "malformed_json"),
        (2, "not_object"),
        (3, "not_object"),
        (4, "malformed_json"),
    ]
    assert result.errors[1].message == "row is a JSON array, expected an object"


def test_missing_wrong_type_and_empty_fields(tmp_path: Path) -> None:
    schema = [
        SchemaField("prompt", "string"),
        SchemaField("score", "number"),
        SchemaField("n", "integer"),
        SchemaField("flag", "boolean"),
        SchemaField("meta", "object", required=False),
        SchemaField("tags", "array", allow_empty=True),
    ]
    good = {"prompt": "p", "score": 1, "n": 2, "flag": False, "tags": []}
    path = write_lines(
        tmp_path,
        good,  # integers are numbers; an empty list is allowed here; optional meta absent
        {**good, "prompt": None, "meta": None},  # null in a required field; optional is fine
        {k: v for k, v in good.items() if k != "n"},
        {**good, "score": True, "n": 2.5, "flag": 0},  # a bool is never a number
        {**good, "prompt": "  ", "meta": {}},
    )
    result = validate_jsonl(path, schema=schema)
    assert [(e.line, e.field, e.kind, e.message) for e in result.errors] == [
        (2, "prompt", "wrong_type", "expected string, got null"),
        (3, "n", "missing", "missing"),
        (4, "score", "wrong_type", "expected number, got boolean"),
        (4, "n", "wrong_type", "expected integer, got number"),
        (4, "flag", "wrong_type", "expected boolean, got integer"),
        (5, "prompt", "empty", "is empty"),
        (5, "meta", "empty", "is empty"),
    ]


def test_chat_message_structure(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": "hi"},
        {
            "messages": [
                "hi",
                {"role": "robot", "content": "x"},
                {"content": 3},
                {"role": "assistant", "content": "", "trainable": "yes"},
            ]
        },
        {"messages": [{"role": "tool", "content": "r"}, {"role": "assistant", "content": "ok"}]},
    )
    assert found(path, kind="chat") == [
        (1, "messages"),  # no assistant message
        (2, "messages"),  # not a list
        (3, "messages[0]"),
        (3, "messages[1].role"),
        (3, "messages[2].role"),
        (3, "messages[2].content"),
        (3, "messages[3].content"),
        (3, "messages[3].trainable"),
    ]


def test_prompt_completion_kind(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        {"prompt": "abc", "completion": "cba", "system": "Reverse."},
        {"prompt": "", "completion": 3},
        {"completion": "x", "system": ""},
    )
    assert found(path, kind="prompt_completion") == [
        (2, "prompt"),
        (2, "completion"),
        (3, "prompt"),
        (3, "system"),
    ]


def test_schema_adds_to_the_kind_and_wins_where_both_name_a_field(tmp_path: Path) -> None:
    path = write_lines(tmp_path, {"prompt": "a", "completion": "", "id": 1})
    schema = [SchemaField("completion", "string", allow_empty=True), SchemaField("id", "string")]
    assert found(path, kind="prompt_completion", schema=schema) == [(1, "id")]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = write_lines(tmp_path, "", "  ")
    result = validate_jsonl(empty)
    assert [(e.line, e.kind) for e in result.errors] == [(0, "no_rows")]
    assert result.errors[0].format(empty) == f"{empty}: file has no rows"
    missing = validate_jsonl(tmp_path / "nope.jsonl")
    assert [e.message for e in missing.errors] == ["file does not exist"]


def test_max_examples_stops_early(tmp_path: Path) -> None:
    path = write_lines(tmp_path, GOOD_CHAT, "", GOOD_CHAT, "not json")
    result = validate_jsonl(path, kind="chat", max_examples=2)
    assert result.ok and result.rows_checked == 2
    with pytest.raises(ConfigError):
        validate_jsonl(path, max_examples=0)


def test_unknown_kind_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown dataset kind 'qa'"):
        validate_jsonl(write_lines(tmp_path, GOOD_CHAT), kind="qa")


def test_summary_shows_first_errors_then_counts_by_kind(tmp_path: Path) -> None:
    path = write_lines(tmp_path, *(["{"] * 3 + ['{"prompt": "x"}'] * 2))
    lines = validate_jsonl(path, kind="prompt_completion").summary(max_errors=2).splitlines()
    assert lines == [
        f"{path}: 5 problem(s) in 5 row(s) checked (3 malformed_json, 2 missing)",
        f"  {path}:1: malformed JSON: Expecting property name enclosed in double quotes (column 2)",
        f"  {path}:2: malformed JSON: Expecting property name enclosed in double quotes (column 2)",
        "  ... and 3 more not shown",
    ]


def test_row_error_format() -> None:
    assert RowError(7, "messages[2].role", "missing").format("a.jsonl") == (
        "a.jsonl:7: messages[2].role: missing"
    )
    assert RowError(3, None, "bad").format(Path("a.jsonl")) == "a.jsonl:3: bad"


def test_schema_for_kind() -> None:
    assert [f.name for f in schema_for_kind("chat")] == ["messages"]
    assert [(f.name, f.required) for f in schema_for_kind("prompt_completion")] == [
        ("prompt", True),
        ("completion", True),
        ("system", False),
    ]


# --- load_conversations ----------------------------------------------------------------------


def test_load_both_forms_with_system_prompt_and_trainable(tmp_path: Path) -> None:
    chat = {
        "messages": [
            {"role": "user", "content": "q", "name": "ignored"},
            {"role": "assistant", "content": "a", "trainable": False},
        ]
    }
    path = write_lines(
        tmp_path,
        {"prompt": "abc", "completion": "cba"},
        "",
        {"prompt": "abc", "completion": "cba", "system": "Reverse it."},
        chat,
    )
    assert load_conversations(path) == [
        [{"role": "user", "content": "abc"}, {"role": "assistant", "content": "cba"}],
        [
            {"role": "system", "content": "Reverse it."},
            {"role": "user", "content": "abc"},
            {"role": "assistant", "content": "cba"},
        ],
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "trainable": False},
        ],
    ]
    assert len(load_conversations(path, max_examples=2)) == 2


def test_load_reports_every_problem_at_once(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        GOOD_CHAT,
        b"\xc3\x28",
        "{oops",
        {"text": "neither form"},
        {"prompt": "p"},
        {"messages": [{"role": "user", "content": "q"}]},
        {"messages": [{"role": "assistant", "content": "a"}], "prompt": "p"},
    )
    with pytest.raises(DatasetError) as info:
        load_conversations(path)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{path}: 6 problem(s) in 7 row(s) checked")
    assert [line.strip().split(": ")[0:2] for line in lines[1:]] == [
        [f"{path}:2", "invalid UTF-8"],
        [f"{path}:3", "malformed JSON"],
        [f"{path}:4", "messages"],
        [f"{path}:5", "completion"],
        [f"{path}:6", "messages"],
        [f"{path}:7", "messages"],
    ]


def test_load_lists_first_twenty_problems_and_the_total(tmp_path: Path) -> None:
    path = write_lines(tmp_path, *(['{"prompt": "p"}'] * 25))
    with pytest.raises(DatasetError) as info:
        load_conversations(path)
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path}: 25 problem(s) in 25 row(s) checked (25 missing)"
    assert lines[1] == f"  {path}:1: completion: missing"
    assert lines[20] == f"  {path}:20: completion: missing"
    assert lines[21:] == ["  ... and 5 more not shown"]


def test_load_empty_file_raises(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="file has no rows"):
        load_conversations(write_lines(tmp_path, ""))


# --- split_train_eval and dataset_sha256 -----------------------------------------------------


def test_split_is_deterministic_and_a_partition() -> None:
    items = list(range(50))
    train, eval_ = split_train_eval(items, 0.1, seed=3)
    assert (train, eval_) == split_train_eval(items, 0.1, seed=3)
    assert len(eval_) == 5 and sorted(train + eval_) == items
    assert split_train_eval(items, 0.1, seed=4) != (train, eval_)
    assert items == list(range(50))  # the input is not shuffled in place


def test_split_sizes_at_the_edges() -> None:
    assert [len(p) for p in split_train_eval([1, 2], 0.01, seed=0)] == [1, 1]
    assert [len(p) for p in split_train_eval([1, 2, 3], 0.9, seed=0)] == [1, 2]
    assert split_train_eval([1], 0.5, seed=0) == ([1], [])
    assert split_train_eval([3, 1, 2], 0.0, seed=0)[1] == []
    with pytest.raises(ConfigError):
        split_train_eval([1, 2], 1.0, seed=0)


def test_dataset_sha256(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    assert dataset_sha256(path) == hashlib.sha256(b'{"a": 1}\n').hexdigest()


# --- the shipped example files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "sizes"),
    [
        ("arithmetic", "chat", (100, 100)),
        ("reversal", "prompt_completion", (400, 50)),
        ("code_review", "chat", (32, 8)),
    ],
)
def test_examples_validate_clean(name: str, kind: str, sizes: tuple[int, int]) -> None:
    for split, size in zip(("train", "test"), sizes, strict=True):
        result = validate_jsonl(EXAMPLES / name / f"{split}.jsonl", kind=kind)
        assert result.ok, result.summary()
        assert result.rows_checked == size


def test_reversal_splits_are_disjoint() -> None:
    train, test = (
        load_conversations(EXAMPLES / "reversal" / f"{s}.jsonl") for s in ("train", "test")
    )
    prompts = [c[0]["content"] for c in train], [c[0]["content"] for c in test]
    assert not set(prompts[0]) & set(prompts[1])
    assert all(c[1]["content"] == c[0]["content"][::-1] for c in train + test)


def test_broken_examples_fail_where_the_readme_says() -> None:
    broken = EXAMPLES / "broken"
    assert found(broken / "bad_json.jsonl", kind="chat") == [(2, None)]
    assert found(broken / "missing_field.jsonl", kind="prompt_completion") == [(3, "completion")]
    assert found(broken / "empty_content.jsonl", kind="chat") == [(2, "messages[1].content")]


def test_generator_reproduces_the_shipped_files(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_examples", EXAMPLES / "make_examples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_examples(tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl"))
    # other sets (preferences, rl, ...) have generators of their own, tested beside them
    own_sets = {p.parts[0] for p in written}
    shipped = [p.relative_to(EXAMPLES) for p in EXAMPLES.rglob("*.jsonl")]
    assert written == sorted(p for p in shipped if p.parts[0] in own_sets)
    assert own_sets == {"arithmetic", "reversal", "code_review", "broken"}
    assert all((tmp_path / p).read_bytes() == (EXAMPLES / p).read_bytes() for p in written)


# --- whole-file validation of an upload (thinker.services.dataset_files.scan) -------------------


def scan_file(
    path: Path, kind: str | None, max_line_bytes: int = 1_000_000, fmt: str = "jsonl"
) -> ErrorSummary:
    """Every problem the server's upload validation finds in `path`."""
    settings = Settings(data_dir=path.parent / "server", max_line_bytes=max_line_bytes)
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    plan = Plan(fmt, kind, {})  # type: ignore[arg-type]
    return scan(path, plan, settings.datasets_dir / "rows.jsonl", settings).errors


def chat(question: str, answer: str, role: str = "assistant") -> dict[str, object]:
    return {"messages": [{"role": "user", "content": question}, {"role": role, "content": answer}]}


def test_scan_finds_each_kind_of_error_on_its_line_with_totals_by_kind(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        chat("1+1", "2"),  # 1
        b'{"messages": "caf\xe9"}',  # 2: invalid UTF-8
        '{"messages": [',  # 3: malformed JSON
        "[1, 2]",  # 4: not an object
        "",  # 5: blank, skipped
        {"msgs": []},  # 6: missing
        {"messages": "hello"},  # 7: wrong type
        chat("2+2", " "),  # 8: empty
        chat("3+3", "6", role="robot"),  # 9: unknown role, and so no assistant message
        chat("4+4", "8" * 400),  # 10: over-long line
        chat("1+1", "2"),  # 11: duplicate of line 1
        '{"messages": NaN}',  # 12: malformed JSON (NaN)
        chat("5+5", "10"),  # 13
        chat("1+1", "2"),  # 14: duplicate of line 1 again
    )
    errors = scan_file(path, "chat", max_line_bytes=300)
    assert [(e.line, e.kind) for e in errors.first] == [
        (2, "invalid_utf8"),
        (3, "malformed_json"),
        (4, "not_object"),
        (6, "missing"),
        (7, "wrong_type"),
        (8, "empty"),
        (9, "invalid_value"),
        (9, "invalid_value"),
        (10, "too_long"),
        (11, "duplicate"),
        (12, "malformed_json"),
        (14, "duplicate"),
    ]
    assert errors.count == 12
    assert errors.counts == {
        "invalid_utf8": 1,
        "malformed_json": 2,
        "not_object": 1,
        "missing": 1,
        "wrong_type": 1,
        "empty": 1,
        "invalid_value": 2,
        "too_long": 1,
        "duplicate": 2,
    }
    duplicate = next(e for e in errors.first if e.line == 11)
    assert duplicate.message.startswith("duplicate of line 1 ")


def test_scan_keeps_the_first_errors_by_line_and_counts_them_all(tmp_path: Path) -> None:
    rows = [chat(f"{i}+0", "" if i % 2 else f"{i}") for i in range(200)]  # 100 empty
    path = write_lines(tmp_path, *rows, *rows[:60:2])  # 30 duplicates at the end
    errors = scan_file(path, "chat")
    assert (errors.count, errors.counts) == (130, {"empty": 100, "duplicate": 30})
    assert [e.line for e in errors.first] == list(range(2, 101, 2))  # 50 kept, by line


def test_scan_finds_duplicates_in_csv_by_line(tmp_path: Path) -> None:
    path = tmp_path / "pc.csv"
    path.write_text("prompt,completion\nabc,cba\nxyz,zyx\n\nabc,cba\n")
    errors = scan_file(path, "prompt_completion", fmt="csv")
    assert [(e.line, e.kind, e.message[:20]) for e in errors.first] == [
        (5, "duplicate", "duplicate of line 2 ")
    ]


def naive_duplicates(rows: list[bytes]) -> list[tuple[int, int]]:
    first: dict[bytes, int] = {}
    found = []
    for line, row in enumerate(rows, start=1):
        if row in first:
            found.append((line, first[row]))
        else:
            first[row] = line
    return found


@pytest.mark.parametrize(
    ("filter_bits", "max_candidates", "row_hash"),
    [
        (1 << 27, 1 << 18, hash),  # as the server runs it
        (64, 3, hash),  # a saturated filter and candidates verified in many rounds
        (1 << 20, 5, len),  # a hash with collisions everywhere: only bytes decide
    ],
)
def test_duplicate_finder_matches_an_exact_count(
    tmp_path: Path, filter_bits: int, max_candidates: int, row_hash: Callable[[bytes], int]
) -> None:
    rng = random.Random(7)
    rows = [f'{{"n":{rng.randrange(400)}}}\n'.encode() for _ in range(3000)]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"".join(rows))
    with DuplicateFinder(path, filter_bits, max_candidates, row_hash) as finder:
        finder.BLOCK_ROWS = 256  # many blocks, so that duplicates cross them
        for start in range(0, len(rows), 100):
            chunk = rows[start : start + 100]
            finder.add_rows(chunk, list(range(start + 1, start + 1 + len(chunk))))
        found = list(finder.duplicates())
    expected = naive_duplicates(rows)
    assert found == expected and len(expected) > 2000


def test_scan_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """Peak traced memory of validating 20k and 200k rows: within 4 MiB of each other (a set
    of row hashes alone would add ~10 MiB; the rows themselves are ~20 MiB)."""
    peaks = []
    for n in (20_000, 200_000):
        path = tmp_path / f"{n}.jsonl"
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps(chat(f"What is {i} + {i}?", f"{2 * i}")) + "\n")
        tracemalloc.start()
        try:
            errors = scan_file(path, "chat")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert errors.count == 0
    assert peaks[1] - peaks[0] < 4 * 1024 * 1024, peaks


def test_scan_refuses_an_integer_past_64_bits_with_its_line_and_field(tmp_path: Path) -> None:
    """orjson would read it as a float and store another number; a float of the same size
    written as a float (1e+20, 1.5e300) and a 64-bit integer are kept as they are."""
    rows = [
        {"prompt": "a", "completion": "b", "meta": {"id": 123456789012345678901234}},
        {"prompt": "c", "completion": "d", "x": 1e20, "y": 1.5e300, "z": 2**64 - 1},
        {"prompt": "e", "completion": "f", "n": [-(2**63) - 1]},
    ]
    path = write_lines(tmp_path, *rows)
    errors = scan_file(path, "prompt_completion")
    assert [(e.line, e.field, e.kind) for e in errors.first] == [
        (1, "meta.id", "out_of_range"),
        (3, "n[0]", "out_of_range"),
    ]
    assert "123456789012345678901234" in errors.first[0].message
    csv_path = tmp_path / "big.csv"  # a JSON cell is read exactly, then refused on writing
    csv_path.write_text('prompt,completion,messages\na,b,"[1, 99999999999999999999999]"\n')
    errors = scan_file(csv_path, None, fmt="csv")
    assert (2, "messages[1]", "out_of_range") in [(e.line, e.field, e.kind) for e in errors.first]


def test_encode_row_writes_the_compact_canonical_form() -> None:
    assert encode_row(1, {"b": "é", "a": [1, 2.5]}, 100) == (
        b'{"b":"\xc3\xa9","a":[1,2.5]}\n',
        None,
    )
    data, error = encode_row(2, {"n": [0, 2**70]}, 100)  # stored, it would not read back
    assert data == b"" and error is not None
    assert (error.line, error.field, error.kind) == (2, "n[1]", "out_of_range")
    deep: object = 1
    for _ in range(MAX_ROW_DEPTH):
        deep = [deep]
    data, error = encode_row(5, {"d": deep}, 10_000)
    assert data == b"" and error is not None and (error.line, error.kind) == (5, "too_deep")
    data, error = encode_row(3, {"s": "\ud800"}, 100)
    assert data == b"" and error is not None and "surrogate" in error.message
    data, error = encode_row(4, {"s": "x" * 20}, 10)
    assert error is not None and (error.line, error.kind) == (4, "too_long")
