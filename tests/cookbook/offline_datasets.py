"""The datasets cache the cookbook recipes read offline (run in the cookbook's environment;
the argument is `HF_HOME`): `HuggingFaceH4/no_robots` (chats, for recipes/sl_loop.py) and
`openai/gsm8k` `main` (questions and `#### answer`s, for recipes/rl_loop.py), small
arithmetic stand-ins of the same columns, written by `datasets`' own Parquet builder and laid
out as `load_dataset` finds a dataset it cached before (`<namespace>___<name>/<config>/...`).
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datasets.packaged_modules.parquet.parquet import Parquet


def write(cache: Path, repo: str, config: str, splits: dict[str, list[dict]]) -> None:
    namespace, name = repo.split("/")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for split, rows in splits.items():
            path = Path(tmp) / f"{split}.parquet"
            pq.write_table(pa.Table.from_pylist(rows), path)
            files[split] = [str(path)]
        builder = Parquet(cache_dir=str(Path(tmp) / "cache"), dataset_name=name, data_files=files)
        builder.download_and_prepare()
        built = Path(builder.cache_dir)  # <name>/<config id>/<version>
        target = cache / f"{namespace}___{name}" / config / built.parent.name / built.name
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), str(target))
        info = json.loads((target / "dataset_info.json").read_text())
        info["config_name"], info["dataset_name"] = config, name
        (target / "dataset_info.json").write_text(json.dumps(info))


def main(home: Path) -> None:
    rng = random.Random(0)

    def chat() -> dict:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        messages = [
            {"role": "user", "content": f"{a}+{b}"},
            {"role": "assistant", "content": str(a + b)},
        ]
        return {
            "prompt": f"{a}+{b}",
            "prompt_id": f"{a}-{b}",
            "category": "Math",
            "messages": messages,
        }

    def problem() -> dict:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return {"question": f"What is {a}+{b}?", "answer": f"{a}+{b}={a + b}\n#### {a + b}"}

    cache = home / "datasets"
    chats = {"train": [chat() for _ in range(64)], "test": [chat() for _ in range(8)]}
    write(cache, "HuggingFaceH4/no_robots", "default", chats)
    problems = {"train": [problem() for _ in range(64)], "test": [problem() for _ in range(8)]}
    write(cache, "openai/gsm8k", "main", problems)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
