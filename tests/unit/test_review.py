"""The review's arithmetic (algorithms/review.py) and the dataset edit its answers make
(services/reviews.py), against values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinker.algorithms.review import binary_entropy, certainty, pair_rows, rank, row_lines
from thinker.data.preferences import PreferencePair
from thinker.errors import ConflictError
from thinker.services.reviews import edit


def test_binary_entropy_by_hand() -> None:
    assert binary_entropy(0.5) == 1.0
    assert binary_entropy(0.0) == binary_entropy(1.0) == 0.0
    # H(0.9) = -(0.9 log2 0.9 + 0.1 log2 0.1) = 0.4690
    assert binary_entropy(0.9) == pytest.approx(0.4690, abs=1e-4)
    assert binary_entropy(0.1) == pytest.approx(binary_entropy(0.9))


def test_a_split_committee_is_as_unsure_as_one_that_cannot_tell() -> None:
    split, undecided, sure = certainty([0.9, 0.1]), certainty([0.5, 0.5]), certainty([0.9, 0.9])
    assert split["uncertainty"] == undecided["uncertainty"] == 1.0
    assert split["disagreement"] == pytest.approx(0.4)  # pstdev of 0.9 and 0.1
    assert undecided["disagreement"] == 0.0
    assert sure["p_mean"] == pytest.approx(0.9)
    assert sure["uncertainty"] == pytest.approx(0.4690, abs=1e-4)
    assert certainty([0.7])["disagreement"] == 0.0  # a committee of one


def test_rank_puts_the_least_certain_first_then_the_most_split() -> None:
    rows = [
        {"index": 0, "uncertainty": 0.2, "disagreement": 0.0},
        {"index": 1, "uncertainty": 1.0, "disagreement": 0.0},
        {"index": 2, "uncertainty": 1.0, "disagreement": 0.4},
        {"index": 3, "uncertainty": 0.2, "disagreement": 0.0},
    ]
    assert [r["index"] for r in rank(rows)] == [2, 1, 0, 3]


def _pair(prompt: str, chosen: str, rejected: str) -> PreferencePair:
    return PreferencePair(
        [{"role": "user", "content": prompt}],
        [{"role": "assistant", "content": chosen}],
        [{"role": "assistant", "content": rejected}],
    )


def test_pairs_are_shown_in_a_seeded_order_with_probabilities_of_what_is_shown_first() -> None:
    pairs = [_pair(f"q{i}", f"good{i}", f"bad{i}") for i in range(40)]
    scores = [[0.8] * 40, [0.6] * 40]  # P(chosen beats rejected) by two checkpoints
    rows = pair_rows(pairs, scores, seed=3, lines=list(range(1, 41)))
    assert rows == pair_rows(pairs, scores, seed=3, lines=list(range(1, 41)))  # seeded
    firsts = {r["label"] for r in rows}
    assert firsts == {"a", "b"}  # both orders occur
    for i, row in enumerate(rows):
        chosen_first = row["label"] == "a"
        assert (row["a"], row["b"]) == (
            (f"good{i}", f"bad{i}") if chosen_first else (f"bad{i}", f"good{i}")
        )
        assert row["p_a"] == ([0.8, 0.6] if chosen_first else pytest.approx([0.2, 0.4]))
        assert row["p_mean"] == pytest.approx(0.7 if chosen_first else 0.3)
        assert row["uncertainty"] == pytest.approx(binary_entropy(0.7))
        assert row["disagreement"] == pytest.approx(0.1)
        assert row["current_agrees"] is True and row["line"] == i + 1


def test_row_lines_skip_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n   \n{"a": 3}\n')
    assert row_lines(path) == [1, 3, 5]


def test_answers_swap_what_the_person_judged_the_other_way_and_drop_ties(tmp_path: Path) -> None:
    stored = [{"prompt": f"q{i}", "chosen": f"good{i}", "rejected": f"bad{i}"} for i in range(4)]
    path = tmp_path / "ds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in stored))
    queued = [
        {"index": 0, "line": 1, "label": "a"},
        {"index": 1, "line": 2, "label": "b"},
        {"index": 2, "line": 3, "label": "a"},
        {"index": 3, "line": 4, "label": "b"},
    ]
    # pair 0: the person agrees (a); 1: disagrees (a, the dataset chose b); 2: a tie;
    # 3: not answered
    change = edit(path, queued, {0: "a", 1: "a", 2: "tie"})
    assert change.delete == {3}
    assert change.replace == {2: {"prompt": "q1", "chosen": "bad1", "rejected": "good1"}}
    with pytest.raises(ConflictError, match="agree with the dataset"):
        edit(path, queued, {0: "a", 1: "b"})
    with pytest.raises(ConflictError, match="no pair of the queue is answered"):
        edit(path, queued, {})
