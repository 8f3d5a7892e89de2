"""Hugging Face import (`thinker.data.hf_import`) on datasets saved in the hub's on-disk
layouts (built by tests/support/hub.py): `save_to_disk` directories, and repository-like
directories of Parquet and JSONL shards with a README.md card whose YAML `configs:` name the
data files per split. The hub itself is out of reach; with HF_HUB_OFFLINE=1 a hub id must
fail at once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest
from datasets import Dataset, Features, Value
from datasets.exceptions import DatasetNotFoundError
from tests.support.hub import (
    QA,
    TEST,
    TRAIN,
    Row,
    jsonl_repo,
    parquet_repo,
    saved_dataset,
    saved_dict,
)

from thinker.cli.datasets import UsageError, parse_mapping
from thinker.dataprep import hf_import
from thinker.dataprep.hf_import import (
    HubAuthRequired,
    HubDatasetNotFound,
    HubRequest,
    HubSourceError,
    HubUnreachable,
    TooManyRows,
    UnknownConfig,
    UnknownSplit,
    fetch_rows,
    is_hub_id,
    resolve_server_source,
    translate_error,
)


def read_jsonl(path: Path) -> list[Row]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Recorder:
    """Collects the progress calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None]] = []

    def __call__(self, done: int, total: int | None) -> None:
        self.calls.append((done, total))


# ---- reading each layout -----------------------------------------------------------------


def test_save_to_disk_dataset_is_one_train_split(tmp_path: Path) -> None:
    out, progress = tmp_path / "out.jsonl", Recorder()
    fetched = fetch_rows(HubRequest(saved_dataset(tmp_path)), out, progress=progress)
    assert read_jsonl(out) == QA
    assert fetched.splits == {"train": 12} and fetched.config is None
    assert progress.calls[-1] == (12, 12)  # an Arrow dataset knows its size


def test_save_to_disk_dict_all_splits_in_order(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fetched = fetch_rows(HubRequest(saved_dict(tmp_path)), out)
    assert read_jsonl(out) == TRAIN + TEST
    assert fetched.splits == {"train": 9, "test": 3} and fetched.rows == 12


def test_parquet_shards_with_card_one_split(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fetched = fetch_rows(HubRequest(parquet_repo(tmp_path), split="train"), out)
    assert read_jsonl(out) == TRAIN  # both shards, in order
    assert fetched.splits == {"train": 9} and fetched.config == "default"


def test_jsonl_shards_with_card_named_config(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    fetched = fetch_rows(HubRequest(jsonl_repo(tmp_path), config="instruct"), out)
    assert read_jsonl(out) == [{"instruction": "hi", "output": "hello"}]
    assert fetched.config == "instruct"
    origin = fetched.origin(HubRequest(Path("/x/jsonl-repo"), config="instruct"))
    assert origin["hf"]["path"] == "/x/jsonl-repo"  # type: ignore[index]
    assert origin["hf"]["splits"] == {"train": 1}  # type: ignore[index]


def test_limit_spans_splits_and_reports_progress_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_import, "CHUNK_ROWS", 4)
    out, progress = tmp_path / "out.jsonl", Recorder()
    fetched = fetch_rows(HubRequest(jsonl_repo(tmp_path), limit=10), out, progress=progress)
    assert read_jsonl(out) == QA[:10]
    assert fetched.splits == {"train": 9, "validation": 1}
    # Streamed JSON does not know its size; the limit is the best total there is.
    assert progress.calls == [(4, 10), (8, 10), (9, 10), (10, 10)]


def test_total_unknown_while_streaming_is_known_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_import, "CHUNK_ROWS", 5)
    out, progress = tmp_path / "out.jsonl", Recorder()
    fetch_rows(HubRequest(parquet_repo(tmp_path), split="train"), out, progress=progress)
    assert progress.calls == [(5, None), (9, None), (9, 9)]


def test_more_rows_than_the_platform_holds_is_refused_without_a_limit(tmp_path: Path) -> None:
    with pytest.raises(TooManyRows, match="more than 10 rows"):
        fetch_rows(HubRequest(saved_dataset(tmp_path)), tmp_path / "o.jsonl", max_rows=10)
    fetched = fetch_rows(HubRequest(saved_dataset(tmp_path), limit=10), tmp_path / "o.jsonl")
    assert fetched.rows == 10


def test_binary_columns_are_left_out(tmp_path: Path) -> None:
    features = Features({"text": Value("string"), "blob": Value("binary")})
    rows = {"text": ["a", "b"], "blob": [b"\x00", b"\x01"]}
    Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "bin"))
    out = tmp_path / "out.jsonl"
    fetched = fetch_rows(HubRequest(tmp_path / "bin"), out)
    assert read_jsonl(out) == [{"text": "a"}, {"text": "b"}]
    assert fetched.dropped_columns == ["blob"]


# ---- errors ------------------------------------------------------------------------------


def test_unknown_split_lists_the_splits(tmp_path: Path) -> None:
    for source, available in (
        (parquet_repo(tmp_path), ["train", "test"]),
        (saved_dict(tmp_path), ["train", "test"]),
    ):
        with pytest.raises(UnknownSplit, match="no split 'dev'; available: train, test") as e:
            fetch_rows(HubRequest(source, split="dev"), tmp_path / "o.jsonl")
        assert e.value.available == available


def test_unknown_config_lists_the_configs(tmp_path: Path) -> None:
    with pytest.raises(UnknownConfig, match="no config 'chat'; available: default, instruct"):
        fetch_rows(HubRequest(jsonl_repo(tmp_path), config="chat"), tmp_path / "o.jsonl")


def test_several_configs_without_a_default_must_be_picked(tmp_path: Path) -> None:
    repo = parquet_repo(tmp_path, configs=("main", "socratic"))
    with pytest.raises(UnknownConfig, match="several configs: pick one of main, socratic"):
        fetch_rows(HubRequest(repo), tmp_path / "o.jsonl")
    assert fetch_rows(HubRequest(repo, config="socratic"), tmp_path / "o.jsonl").rows == 12


def test_a_revision_is_for_hub_ids_only(tmp_path: Path) -> None:
    for source in (parquet_repo(tmp_path), saved_dict(tmp_path)):
        with pytest.raises(HubSourceError, match="hub ids only"):
            fetch_rows(HubRequest(source, revision="main"), tmp_path / "o.jsonl")


def test_offline_hub_id_fails_at_once(tmp_path: Path) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # tests/conftest.py sets it
    start = time.monotonic()
    with pytest.raises(HubUnreachable, match="offline mode is on"):
        fetch_rows(HubRequest("openai/gsm8k", config="main"), tmp_path / "o.jsonl")
    assert time.monotonic() - start < 2


def test_library_errors_become_ours_without_the_token() -> None:
    token = "hf_SECRETsecretSECRET"
    gated = DatasetNotFoundError(
        "Dataset 'org/x' is a gated dataset on the Hub. You must be authenticated to access it."
    )
    assert isinstance(translate_error(gated, "org/x", token), HubAuthRequired)
    missing = DatasetNotFoundError(
        "Dataset 'org/x' doesn't exist on the Hub or cannot be accessed."
    )
    assert isinstance(translate_error(missing, "org/x", token), HubDatasetNotFound)
    down = httpx.ConnectError("[Errno 101] Network is unreachable")
    assert "check the network" in str(translate_error(down, "org/x", token))
    leaky = OSError(f"request with Authorization: Bearer {token} failed")
    message = str(translate_error(leaky, "org/x", token))
    assert token not in message and "***" in message


# ---- sources -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        ("openai/gsm8k", True),
        ("gsm8k", True),
        ("HuggingFaceH4/ultrafeedback_binarized", True),
        ("a/b/c", False),
        ("../etc", False),
        ("org/../x", False),
        ("org--x/y", False),
        ("/abs/path", False),
        ("org/näme", False),
        ("-org/x", False),
    ],
)
def test_hub_id_pattern(source: str, ok: bool) -> None:
    assert is_hub_id(source) is ok


def test_server_sources_stay_inside_the_imports_dir(tmp_path: Path) -> None:
    root = tmp_path / "imports"
    (root / "mine").mkdir(parents=True)
    (root / "org" / "local").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (root / "escape").symlink_to(tmp_path / "secret")
    assert resolve_server_source("openai/gsm8k", root) == "openai/gsm8k"
    assert resolve_server_source("mine", root) == (root / "mine").resolve()
    assert resolve_server_source("org/local", root) == (root / "org/local").resolve()
    assert resolve_server_source(str(root / "mine"), root) == (root / "mine").resolve()
    assert resolve_server_source("./mine", root) == (root / "mine").resolve()
    for bad in (
        "../secret",
        "mine/../../secret",
        str(tmp_path / "secret"),
        "/etc",
        "escape",
        "./nothing",
        ".",
        str(root),
    ):
        with pytest.raises(HubSourceError):
            resolve_server_source(bad, root)


def test_map_flags_parse() -> None:
    assert parse_mapping(["prompt=question", "completion = answer"]) == {
        "prompt": "question",
        "completion": "answer",
    }
    assert parse_mapping([]) is None
    with pytest.raises(UsageError, match="CANONICAL=SOURCE"):
        parse_mapping(["prompt"])
