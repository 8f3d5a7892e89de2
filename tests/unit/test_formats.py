"""thinker.data.formats: every format read as numbered rows, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from thinker.data.formats import (
    MAX_COLUMNS,
    Format,
    detect_format,
    exact_jsonl_rows,
    out_of_range,
    read_rows,
)
from thinker.data.validation import MAX_ROW_DEPTH, RowError, not_text_problem
from thinker.errors import NotTextError

CHAT = [{"role": "user", "content": "3+4"}, {"role": "assistant", "content": "7"}]


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def rows(path: Path, fmt: Format, max_line_bytes: int = 1000) -> list[tuple[int, object]]:
    return list(read_rows(path, fmt, max_line_bytes))


def errors(items: list[tuple[int, object]]) -> list[RowError]:
    return [row for _, row in items if isinstance(row, RowError)]


# ---- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "content", "expected"),
    [
        ("a.jsonl", '{"a": 1}\n', "jsonl"),
        ("a.NDJSON", '{"a": 1}\n', "jsonl"),
        ("a.csv", "a,b\n1,2\n", "csv"),
        ("a.parquet", "whatever", "parquet"),
        ("a.json", '[{"a": 1}]', "json"),
        ("a.json", '{"a": [1, 2]}', "json"),  # one line, one object: columns
        ("a.json", '{\n  "a": [1, 2]\n}\n', "json"),
        ("a.json", '{"a": 1}\n{"a": 2}\n', "jsonl"),  # JSONL that was named .json
        (None, '{"a": 1}\n', "jsonl"),
        (None, '\n\n{"a": 1}\n{"a": 2}\n', "jsonl"),
        (None, ' [{"a": 1}]', "json"),
        (None, '{\n  "a": [1]\n}', "json"),
        (None, "prompt,completion\nabc,cba\n", "csv"),
        ("data.txt", "\ufeff{}\n", "jsonl"),
    ],
)
def test_detect_format(tmp_path: Path, filename: str | None, content: str, expected: str) -> None:
    assert detect_format(write(tmp_path, "upload", content), filename) == expected


def test_detect_parquet_from_magic_bytes(tmp_path: Path) -> None:
    path = tmp_path / "upload"
    pq.write_table(pa.table({"a": [1]}), path)
    assert detect_format(path, "no_extension") == "parquet"
    assert detect_format(path, None) == "parquet"


@pytest.mark.parametrize("filename", [None, "file.bin", "file.jsonl", "file.csv", "file.json"])
def test_detect_format_refuses_a_binary_file_whatever_its_name(
    tmp_path: Path, filename: str | None
) -> None:
    path = write(tmp_path, "upload", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(NotTextError) as caught:
        detect_format(path, filename)
    assert str(caught.value) == (
        f"{filename or 'upload'} is not a text file (it looks binary: NUL byte at byte 8); "
        "upload JSONL, JSON, CSV or Parquet"
    )


@pytest.mark.parametrize(
    ("head", "sign"),
    [
        (b'{"a": 1}\n\x00', "NUL byte at byte 9"),
        # 1..255 once: 25 controls (32 less NUL, \b\t\n\v\f\r, ESC; plus DEL) and 128 bytes
        # that are not UTF-8 (no byte from 0x80 up starts a valid sequence with its successor)
        (bytes(range(1, 256)), "60% of its first 255 bytes are not text"),
        ("café crème, naïve\n".encode("latin-1") * 50, None),  # 3 of 19 bytes not UTF-8
        ("Καλημέρα κόσμε\n".encode("iso-8859-7") * 50, None),  # mostly not UTF-8, no controls
        ("日本語のテキスト\t\x1b[1m".encode() * 50, None),
        ("é".encode() * 4096 + b"\xc3", None),  # a character cut off at the end: not counted
        (b"", None),
    ],
)
def test_not_text_problem(head: bytes, sign: str | None) -> None:
    problem = not_text_problem(head)
    if sign is None:
        assert problem is None
    else:
        assert problem == (
            f"not a text file (it looks binary: {sign}); upload JSONL, JSON, CSV or Parquet"
        )


# ---- JSONL -------------------------------------------------------------------------------


def test_jsonl_numbers_are_physical_lines_and_bad_lines_do_not_stop_reading(
    tmp_path: Path,
) -> None:
    text = '{"a": 1}\n\n{"a": \n[1]\n{"a": 5}\n'
    items = rows(write(tmp_path, "x.jsonl", text), "jsonl")
    assert [n for n, _ in items] == [1, 3, 4, 5]
    assert items[0] == (1, {"a": 1}) and items[3] == (5, {"a": 5})
    bad = errors(items)
    assert [(e.line, e.kind) for e in bad] == [(3, "malformed_json"), (4, "not_object")]
    assert "column" in bad[0].message


def test_jsonl_line_over_the_limit_is_an_error_and_the_next_line_is_read(tmp_path: Path) -> None:
    long_line = json.dumps({"a": "x" * 100_000})
    text = f'{{"a": 1}}\n{long_line}\n{{"a": 3}}\n'
    items = rows(write(tmp_path, "x.jsonl", text), "jsonl", max_line_bytes=50)
    assert items[0] == (1, {"a": 1}) and items[2] == (3, {"a": 3})
    assert items[1][0] == 2 and "longer than 50 bytes" in str(items[1][1])


def test_jsonl_line_of_exactly_the_limit_passes(tmp_path: Path) -> None:
    line = '{"a": "' + "x" * 12 + '"}'  # 21 bytes
    items = rows(write(tmp_path, "x.jsonl", line + "\n" + line), "jsonl", max_line_bytes=21)
    assert items == [(1, {"a": "x" * 12}), (2, {"a": "x" * 12})]


# ---- CSV ---------------------------------------------------------------------------------


def test_csv_rows_are_numbered_by_line_with_json_cells_parsed(tmp_path: Path) -> None:
    messages = json.dumps(CHAT).replace('"', '""')
    text = (
        f'\ufeffmessages,note,answer\n"{messages}",hello,\n\n"[not json",x,7\n"[1, 2]","[1, 2]",\n'
    )
    items = rows(write(tmp_path, "x.csv", text), "csv")
    assert items == [
        (2, {"messages": CHAT, "note": "hello"}),  # the empty cell is an absent field
        (4, {"messages": "[not json", "note": "x", "answer": "7"}),  # kept: the kind reports it
        (5, {"messages": [1, 2], "note": "[1, 2]"}),  # only the JSON columns are parsed
    ]


def test_csv_multiline_cell_numbers_the_record_by_its_first_line(tmp_path: Path) -> None:
    text = 'prompt,completion\n"line one\nline two",done\nabc,cba\n'
    items = rows(write(tmp_path, "x.csv", text), "csv")
    assert items == [
        (2, {"prompt": "line one\nline two", "completion": "done"}),
        (4, {"prompt": "abc", "completion": "cba"}),
    ]


def test_csv_cell_count_mismatch_is_a_row_error(tmp_path: Path) -> None:
    items = rows(write(tmp_path, "x.csv", "a,b\n1,2,3\n4,5\n"), "csv")
    assert [(e.line, e.message) for e in errors(items)] == [
        (2, "has 3 cells, but the header has 2 columns")
    ]
    assert items[1] == (3, {"a": "4", "b": "5"})


def test_csv_header_at_the_column_limit_is_checked_whole(tmp_path: Path) -> None:
    """Repeats are found by counting once (a 20k-column header took seconds, counted per
    column); the result is what is asserted, not the time."""
    columns = [f"c{i}" for i in range(MAX_COLUMNS)]
    line = ",".join(columns) + "\n"
    items = rows(write(tmp_path, "x.csv", line + line), "csv", max_line_bytes=1 << 20)
    assert items == [(2, {c: c for c in columns})]
    repeated = ",".join([*columns[:-3], "c7", "c3", "c7"]) + "\n"
    items = rows(write(tmp_path, "y.csv", repeated), "csv", max_line_bytes=1 << 20)
    assert items == [(1, RowError(1, None, "CSV header repeats column(s) c3, c7"))]


def test_100k_columns_are_refused_by_the_header_alone(tmp_path: Path) -> None:
    """100,000 columns took over 600 s when the header check was quadratic; now the header's
    width is refused before any row is read, naming the limit."""
    line = ",".join(f"c{i}" for i in range(100_000)) + "\n"
    items = rows(write(tmp_path, "x.csv", line + line * 3), "csv", max_line_bytes=1 << 21)
    message = f"CSV header has 100000 columns, over the limit of {MAX_COLUMNS}"
    assert items == [(1, RowError(1, None, message, "too_many_columns"))]


def test_rows_with_more_fields_than_the_limit_are_row_errors(tmp_path: Path) -> None:
    wide = {f"f{i}": i for i in range(MAX_COLUMNS + 1)}
    message = f"row has {MAX_COLUMNS + 1} fields, over the limit of {MAX_COLUMNS}"
    jsonl = json.dumps(wide) + "\n" + json.dumps({"a": 1}) + "\n"
    items = rows(write(tmp_path, "x.jsonl", jsonl), "jsonl", max_line_bytes=1 << 20)
    assert items == [(1, RowError(1, None, message, "too_many_columns")), (2, {"a": 1})]
    items = rows(write(tmp_path, "x.json", json.dumps([wide, {"a": 1}])), "json")
    assert items == [(1, RowError(1, None, message, "too_many_columns")), (2, {"a": 1})]
    columns = {f"f{i}": [i] for i in range(MAX_COLUMNS + 1)}
    items = rows(write(tmp_path, "c.json", json.dumps(columns)), "json")
    assert [(line, e.kind) for line, e in items] == [(0, "too_many_columns")]  # type: ignore[union-attr]
    table = pa.table({f"f{i}": [i] for i in range(MAX_COLUMNS + 1)})
    pq.write_table(table, tmp_path / "x.parquet")
    items = rows(tmp_path / "x.parquet", "parquet")
    assert [(line, e.kind) for line, e in items] == [(0, "too_many_columns")]  # type: ignore[union-attr]


def test_nesting_past_the_parsers_is_a_row_error_not_a_crash(tmp_path: Path) -> None:
    """100,000 nested arrays: orjson stops at 1,024 levels, Python's parser at its stack; the
    row is an error naming the limit, and the rows around it still read."""
    deep = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    text = '{"a": 1}\n' + deep + '\n{"b": 2}\n'
    items = rows(write(tmp_path, "x.jsonl", text), "jsonl", max_line_bytes=1 << 20)
    message = f"arrays and objects nested deeper than {MAX_ROW_DEPTH} levels (the limit)"
    assert items == [(1, {"a": 1}), (2, RowError(2, None, message, "too_deep")), (3, {"b": 2})]
    items = rows(write(tmp_path, "x.json", "[" + deep + "]"), "json")
    assert items == [(0, RowError(0, None, message, "too_deep"))]
    cell = '"' + "[" * 100_000 + "]" * 100_000 + '"'
    items = rows(write(tmp_path, "x.csv", f"messages\n{cell}\n"), "csv", max_line_bytes=1 << 20)
    assert items == [(2, {"messages": "[" * 100_000 + "]" * 100_000})]  # text: the kind says


def test_big_integers_are_read_exactly_again_and_found(tmp_path: Path) -> None:
    """orjson reads an integer past 64 bits as a float; `exact_jsonl_rows` reads the lines
    again with the standard library, and `out_of_range` names the field."""
    text = '{"a": 1}\n{"n": {"m": [1, 123456789012345678901234]}}\n{"k": -9223372036854775809}\n'
    path = write(tmp_path, "x.jsonl", text)
    assert rows(path, "jsonl")[1] == (2, {"n": {"m": [1, 1.2345678901234568e23]}})
    exact = dict(exact_jsonl_rows(path, {2, 3}, 1000))
    assert exact == {2: {"n": {"m": [1, 123456789012345678901234]}}, 3: {"k": -(2**63) - 1}}
    found = [out_of_range(line, row) for line, row in exact.items()]  # type: ignore[arg-type]
    assert [(e.line, e.field, e.kind) for e in found if e] == [
        (2, "n.m[1]", "out_of_range"),
        (3, "k", "out_of_range"),
    ]
    assert out_of_range(1, {"a": 2**64 - 1, "b": -(2**63), "c": [1.5e300]}) is None


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a,a\n1,2\n", 1, "CSV header repeats column(s) a"),
        ("a,\n1,2\n", 1, "CSV header has an empty column name (column 2)"),
        ("", 0, "CSV file has no header line"),
        (b"a\nok\n\xff\xfe\n", 3, "invalid UTF-8: byte 0xff at byte offset 0"),
        ("a\nok\n" + "x" * 60 + "\n", 3, "line is longer than 50 bytes (the server's limit)"),
    ],
)
def test_csv_problems_that_stop_the_reading(
    tmp_path: Path, text: str | bytes, line: int, message: str
) -> None:
    items = rows(write(tmp_path, "x.csv", text), "csv", max_line_bytes=50)
    last = items[-1][1]
    assert isinstance(last, RowError) and (last.line, last.message) == (line, message)
    assert len(errors(items)) == 1


# ---- JSON --------------------------------------------------------------------------------


def test_json_array_rows_are_numbered_by_position(tmp_path: Path) -> None:
    items = rows(write(tmp_path, "x.json", '[{"a": 1}, 2, {"a": null}]'), "json")
    assert items[0] == (1, {"a": 1}) and items[2] == (3, {"a": None})  # null kept: written
    assert [(e.line, e.kind) for e in errors(items)] == [(2, "not_object")]


def test_json_object_of_columns_becomes_rows_without_nulls(tmp_path: Path) -> None:
    document = {"prompt": ["a", "b"], "answer": ["1", None], "tests": [None, ["assert 1"]]}
    items = rows(write(tmp_path, "x.json", json.dumps(document)), "json")
    assert items == [
        (1, {"prompt": "a", "answer": "1"}),
        (2, {"prompt": "b", "tests": ["assert 1"]}),
    ]


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ('{"a": [1, 2], "b": [1]}', 0, "arrays of equal length (a: 2 values, b: 1 values)"),
        ('{"a": [1], "b": "x"}', 0, "b: not an array"),
        ('"text"', 0, "holds string 'text'; expected an array of objects"),
        ('[\n{"a": 1},\n{"a" 2}\n]', 3, "malformed JSON: Expecting ':' delimiter (line 3"),
        ('{"a": 1}\n{"a": 2}\n', 2, "Extra data (line 2, column 1); one object a line is JSONL"),
        ('[{"a": NaN}]', 0, "NaN is not valid JSON"),
    ],
)
def test_json_document_problems(tmp_path: Path, text: str, line: int, needle: str) -> None:
    items = rows(write(tmp_path, "x.json", text), "json")
    assert len(items) == 1
    error = items[0][1]
    assert isinstance(error, RowError) and error.line == line and needle in error.message


# ---- Parquet -----------------------------------------------------------------------------


def test_parquet_rows_across_row_groups_with_structs_and_nulls(tmp_path: Path) -> None:
    n = 2500  # more than one batch and several row groups
    table = pa.table(
        {
            "messages": [CHAT] * n,
            "system": [None if i % 2 else "be brief" for i in range(n)],
            "blob": [b"caf\xc3\xa9"] * n,
        }
    )
    path = tmp_path / "x.parquet"
    pq.write_table(table, path, row_group_size=700)
    items = rows(path, "parquet")
    assert [n for n, _ in items] == list(range(1, 2501))
    assert items[0][1] == {"messages": CHAT, "system": "be brief", "blob": "café"}
    assert items[1][1] == {"messages": CHAT, "blob": "café"}  # the null is left out


def test_parquet_null_struct_fields_are_absent_fields(tmp_path: Path) -> None:
    trainable = [{"role": "user", "content": "hi"}, {**CHAT[1], "trainable": False}]
    path = tmp_path / "x.parquet"
    pq.write_table(pa.Table.from_pylist([{"messages": trainable}]), path)
    assert rows(path, "parquet") == [(1, {"messages": trainable})]


def test_parquet_value_that_is_not_text_is_a_row_error(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b"], "blob": [b"ok", b"\xff"]}), path)
    items = rows(path, "parquet")
    assert items[0] == (1, {"prompt": "a", "blob": "ok"})
    error = items[1][1]
    assert isinstance(error, RowError) and (error.line, error.field) == (2, "blob")


def test_unreadable_parquet_is_one_file_error(tmp_path: Path) -> None:
    items = rows(write(tmp_path, "x.parquet", b"PAR1 but not really"), "parquet")
    assert len(items) == 1
    error = items[0][1]
    assert isinstance(error, RowError) and error.line == 0 and "Parquet" in error.message


# ---- numbers JSON cannot hold, and the fast parser's fallbacks ---------------------------


def test_no_reader_yields_nan_or_infinity(tmp_path: Path) -> None:
    jsonl = rows(write(tmp_path, "x.jsonl", '{"a": 1e400}\n{"a": NaN}\n{"a": 1.5}\n'), "jsonl")
    assert [(n, getattr(r, "kind", r)) for n, r in jsonl] == [
        (1, "malformed_json"),
        (2, "malformed_json"),
        (3, {"a": 1.5}),
    ]
    assert "number 1e400 is out of range" in str(jsonl[0][1])
    document = rows(write(tmp_path, "x.json", '[{"a": -1e999}]'), "json")
    assert len(document) == 1 and "out of range" in str(document[0][1])
    csv_cells = rows(write(tmp_path, "x.csv", 'tests,answer\n"[NaN]",1e400\n'), "csv")
    assert csv_cells == [(2, {"tests": "[NaN]", "answer": "1e400"})]  # left as text
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"score": [1.0, float("nan")]}), path)
    items = rows(path, "parquet")
    assert items[0] == (1, {"score": 1.0})
    error = items[1][1]
    assert isinstance(error, RowError) and (error.line, error.field) == (2, "score")


def test_lines_orjson_refuses_are_read_as_the_standard_library_reads_them(tmp_path: Path) -> None:
    text = b'\xef\xbb\xbf{"a": 1}\n{"s": "\\ud800"}\n\xef\xbb\xbf{"a": 2}\n{"a": [1,}\n'
    items = rows(write(tmp_path, "x.jsonl", text), "jsonl")
    assert items[0] == (1, {"a": 1})  # a byte-order mark opens the file
    assert items[1] == (2, {"s": "\ud800"})  # JSON spells it; storing it is refused later
    bom, bad = items[2][1], items[3][1]
    assert isinstance(bom, RowError) and bom.kind == "malformed_json"  # nowhere else
    assert isinstance(bad, RowError) and "column 10" in bad.message


def test_over_long_lines_are_their_own_kind_of_error(tmp_path: Path) -> None:
    items = rows(write(tmp_path, "x.jsonl", '{"a": "' + "x" * 80 + '"}\n{"a": 1}\n'), "jsonl", 50)
    error = items[0][1]
    assert isinstance(error, RowError) and error.kind == "too_long"
    assert items[1] == (2, {"a": 1})
