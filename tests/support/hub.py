"""Datasets saved in the hub's on-disk layouts, for the import tests: `save_to_disk`
directories, and repository-like directories of Parquet and JSONL shards with a README.md card
whose YAML `configs:` name the data files per split."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset, DatasetDict

Row = dict[str, object]
QA: list[Row] = [{"question": f"{i}+{i}", "answer": str(2 * i)} for i in range(12)]
TRAIN, TEST = QA[:9], QA[9:]


def saved_dataset(root: Path) -> Path:
    Dataset.from_list(QA).save_to_disk(str(root / "saved-one"))
    return root / "saved-one"


def saved_dict(root: Path) -> Path:
    splits = {"train": Dataset.from_list(TRAIN), "test": Dataset.from_list(TEST)}
    DatasetDict(splits).save_to_disk(str(root / "saved-dict"))
    return root / "saved-dict"


def card(configs: dict[str, dict[str, str]]) -> str:
    """A dataset card whose YAML header names each config's data files per split."""
    lines = ["---", "configs:"]
    for name, files in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        for split, pattern in files.items():
            lines += [f"  - split: {split}", f"    path: {pattern}"]
    return "\n".join([*lines, "---", "# A dataset", ""])


def parquet_repo(root: Path, configs: tuple[str, ...] = ("default",)) -> Path:
    """Each config: train in two shards (5 + 4 rows), test in one (3 rows)."""
    repo = root / "parquet-repo"
    for config in configs:
        data = repo / config
        data.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(TRAIN[:5]), data / "train-00000-of-00002.parquet")
        pq.write_table(pa.Table.from_pylist(TRAIN[5:]), data / "train-00001-of-00002.parquet")
        pq.write_table(pa.Table.from_pylist(TEST), data / "test-00000-of-00001.parquet")
    files = {c: {"train": f"{c}/train-*.parquet", "test": f"{c}/test-*.parquet"} for c in configs}
    (repo / "README.md").write_text(card(files))
    return repo


def jsonl_repo(root: Path) -> Path:
    """Config `default` (train, validation) and config `instruct` (train, other columns)."""
    repo = root / "jsonl-repo"
    (repo / "data").mkdir(parents=True)
    write_jsonl(repo / "data" / "train-00000.jsonl", TRAIN[:6])
    write_jsonl(repo / "data" / "train-00001.jsonl", TRAIN[6:])
    write_jsonl(repo / "data" / "validation-00000.jsonl", TEST)
    (repo / "instruct").mkdir()
    write_jsonl(repo / "instruct" / "train.jsonl", [{"instruction": "hi", "output": "hello"}])
    configs = {
        "default": {"train": "data/train-*.jsonl", "validation": "data/validation-*.jsonl"},
        "instruct": {"train": "instruct/train.jsonl"},
    }
    (repo / "README.md").write_text(card(configs))
    return repo


def write_jsonl(path: Path, rows: list[Row]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
