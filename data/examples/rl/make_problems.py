"""Write data/examples/rl/{warmup,train,test}.jsonl (deterministic: same bytes every run).

Usage: python data/examples/rl/make_problems.py [OUT_DIR]   (default: this folder)

The 100 one-digit sums "a+b" (a, b in 0..9), shuffled with a fixed seed: 20 held out as
`test.jsonl`, 80 as `train.jsonl`, both RL problems `{"prompt": "3+4", "answer": "7"}` that
the exact_match reward scores. `warmup.jsonl` is the 80 training sums as chat examples for
the short SL warm start before RL; no file holds a test sum, so the held-out reward measures
what the policy carries to sums it has never been shown. `warmup_hedged.jsonl` holds each
training sum twice, once answered and once hedged with a wrong guess ("Not sure. Perhaps
8."): a policy warm-started on it hedges about half the time, and RL with the exact_match
reward has a habit to remove that carries over to the held-out sums. Standard library only.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 0
TEST = 20  # of the 100 sums


def write_problems(out_dir: Path) -> None:
    """Write warmup.jsonl, train.jsonl and test.jsonl into `out_dir` (created if missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sums = [(a, b) for a in range(10) for b in range(10)]
    random.Random(SEED).shuffle(sums)
    test, train = sums[:TEST], sums[TEST:]
    _write(out_dir / "train.jsonl", [_problem(a, b) for a, b in train])
    _write(out_dir / "test.jsonl", [_problem(a, b) for a, b in test])
    _write(out_dir / "warmup.jsonl", [_chat(a, b) for a, b in train])
    hedged = [row for a, b in train for row in (_chat(a, b), _chat(a, b, hedge=True))]
    _write(out_dir / "warmup_hedged.jsonl", hedged)


def _problem(a: int, b: int) -> dict[str, str]:
    return {"prompt": f"{a}+{b}", "answer": str(a + b)}


def _chat(a: int, b: int, hedge: bool = False) -> dict[str, object]:
    answer = f"Not sure. Perhaps {a + b + 1 + (a * b) % 3}." if hedge else str(a + b)
    return {
        "messages": [
            {"role": "user", "content": f"{a}+{b}"},
            {"role": "assistant", "content": answer},
        ]
    }


def _write(path: Path, rows: list[dict[str, str]] | list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    write_problems(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
