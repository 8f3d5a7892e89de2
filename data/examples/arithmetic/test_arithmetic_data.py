"""The arithmetic example's own checks: what `configs/arithmetic.yaml` validates before it
trains (the project's suite is not the example's gate). Standard library only."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
ALL_SUMS = {f"{a}+{b}": str(a + b) for a in range(10) for b in range(10)}


def _pairs(name: str) -> list[tuple[str, str]]:
    pairs = []
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        user, assistant = json.loads(line)["messages"]
        assert (user["role"], assistant["role"]) == ("user", "assistant"), line
        pairs.append((user["content"], assistant["content"]))
    return pairs


def test_every_answer_is_the_sum() -> None:
    for name in ("train.jsonl", "test.jsonl"):
        wrong = [(q, a) for q, a in _pairs(name) if ALL_SUMS.get(q) != a]
        assert wrong == [], f"{name}: wrong or malformed rows {wrong[:5]}"


def test_each_set_is_the_whole_table_once() -> None:
    for name in ("train.jsonl", "test.jsonl"):
        questions = [q for q, _ in _pairs(name)]
        assert sorted(questions) == sorted(ALL_SUMS), f"{name}: not each sum exactly once"
