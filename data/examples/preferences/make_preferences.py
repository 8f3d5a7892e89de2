"""Write data/examples/preferences/{train,test}.jsonl (deterministic: same bytes every run).

Usage: python data/examples/preferences/make_preferences.py [OUT_DIR]   (default: this folder)

Each pair asks a short question (a one-digit sum "3+4", or "reverse: abc") and prefers the
direct correct answer ("7", "cba") to a hedged wrong one ("I am not sure, maybe 8."). The
preference is visible in the first byte of the answer, so a tiny byte-level model learns it
in seconds and carries it to prompts it has never seen: train and test share no prompt.
`train.jsonl` uses the string form; `test.jsonl` the message form, so both forms are read.
Standard library only, so it runs without the package installed.
"""

from __future__ import annotations

import json
import random
import string
import sys
from pathlib import Path

SEED = 0
SUMS_TEST = 25  # of the 100 sums a+b with a, b in 0..9
WORDS_TRAIN, WORDS_TEST = 225, 75  # distinct 3-letter lowercase strings
HEDGES = (
    "I am not sure, maybe {}.",
    "Hmm, it could be {}, I think.",
    "Maybe {}? I cannot say.",
    "Not sure. Perhaps {}.",
)


def write_preferences(out_dir: Path) -> None:
    """Write train.jsonl and test.jsonl into `out_dir` (created if missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    sums = [f"{a}+{b}" for a in range(10) for b in range(10)]
    rng.shuffle(sums)
    words = _distinct_words(rng, WORDS_TRAIN + WORDS_TEST)
    train = [_sum_pair(rng, p) for p in sums[SUMS_TEST:]]
    train += [_reverse_pair(rng, w) for w in words[:WORDS_TRAIN]]
    test = [_sum_pair(rng, p) for p in sums[:SUMS_TEST]]
    test += [_reverse_pair(rng, w) for w in words[WORDS_TRAIN:]]
    rng.shuffle(train)
    rng.shuffle(test)
    _write(out_dir / "train.jsonl", train)
    _write(out_dir / "test.jsonl", [_as_messages(row) for row in test])


def _distinct_words(rng: random.Random, n: int) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(3))
        if word not in seen and len(set(word)) == 3:  # 3 distinct letters: a wrong answer exists
            seen.add(word)
            words.append(word)
    return words


def _sum_pair(rng: random.Random, prompt: str) -> dict[str, str]:
    a, b = (int(x) for x in prompt.split("+"))
    wrong = a + b + rng.choice([d for d in (-2, -1, 1, 2) if a + b + d >= 0])
    return _pair(rng, prompt, str(a + b), str(wrong))


def _reverse_pair(rng: random.Random, word: str) -> dict[str, str]:
    right = word[::-1]
    wrong = rng.choice([w for w in (word, word[1:] + word[0], word[2] + word[:2]) if w != right])
    return _pair(rng, f"reverse: {word}", right, wrong)


def _pair(rng: random.Random, prompt: str, right: str, wrong: str) -> dict[str, str]:
    return {"prompt": prompt, "chosen": right, "rejected": rng.choice(HEDGES).format(wrong)}


def _as_messages(row: dict[str, str]) -> dict[str, object]:
    return {
        "messages": [{"role": "user", "content": row["prompt"]}],
        "chosen": [{"role": "assistant", "content": row["chosen"]}],
        "rejected": [{"role": "assistant", "content": row["rejected"]}],
    }


def _write(path: Path, rows: list[dict[str, object]] | list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    write_preferences(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
