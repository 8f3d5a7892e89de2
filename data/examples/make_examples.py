"""Write the example datasets under data/examples/ (deterministic: same bytes every run).

Usage: python data/examples/make_examples.py [OUT_DIR]   (default: this script's folder)

Standard library only, so it runs without the package installed.
"""

from __future__ import annotations

import itertools
import json
import random
import string
import sys
from pathlib import Path

SEED = 0
REVERSAL_TRAIN, REVERSAL_TEST = 400, 50
CODE_REVIEW_TEST = 8
CODE_REVIEW_SYSTEM = "You review Python code."

# (snippet, one-line review); about half are buggy.
CODE_REVIEWS: list[tuple[str, str]] = [
    ("for i in range(len(xs) + 1):\n    print(xs[i])", "Bug: off-by-one; use range(len(xs))."),
    ("for x in xs:\n    print(x)", "Looks good."),
    ("def add(a, b):\n    return a - b", "Bug: subtracts instead of adding; return a + b."),
    ("def add(a, b):\n    return a + b", "Looks good."),
    ("if x = 3:\n    print(x)", "Bug: assignment in condition; use x == 3."),
    ("if x == 3:\n    print(x)", "Looks good."),
    ("def f(items=[]):\n    items.append(1)", "Bug: mutable default argument; use items=None."),
    ("def f(items=None):\n    items = items or []", "Looks good."),
    ("total = sum(xs) / len(xs)", "Bug: divides by zero when xs is empty."),
    ("avg = sum(xs) / len(xs) if xs else 0.0", "Looks good."),
    ("name = input()\nprint('Hi ' + name)", "Looks good."),
    ("n = input()\nprint(n + 1)", "Bug: input() returns a str; use int(input())."),
    ("if x is 5:\n    pass", "Bug: 'is' compares identity; use x == 5."),
    ("if x is None:\n    pass", "Looks good."),
    ("f = open(p)\ndata = f.read()", "Bug: file never closed; use a with block."),
    ("with open(p) as f:\n    data = f.read()", "Looks good."),
    (
        "try:\n    run()\nexcept:\n    pass",
        "Bug: bare except hides every error; catch a specific one.",
    ),
    ("try:\n    run()\nexcept ValueError:\n    log()", "Looks good."),
    ("for k in d:\n    del d[k]", "Bug: dict changes size during iteration; use d.clear()."),
    ("for k, v in d.items():\n    print(k, v)", "Looks good."),
    ("return xs.sort()", "Bug: sort() returns None; use sorted(xs)."),
    ("return sorted(xs)", "Looks good."),
    ("s = ''\nfor w in words:\n    s += w", "Style: use ''.join(words)."),
    ("s = ''.join(words)", "Looks good."),
    ("if len(xs) == 0:\n    return", "Style: use 'if not xs:'."),
    ("if not xs:\n    return", "Looks good."),
    ("x = [[0] * 3] * 3", "Bug: the three rows are one list; use [[0] * 3 for _ in range(3)]."),
    ("x = [[0] * 3 for _ in range(3)]", "Looks good."),
    ("while i < 10:\n    print(i)", "Bug: infinite loop; i is never incremented."),
    ("for i in range(10):\n    print(i)", "Looks good."),
    ("last = xs[len(xs)]", "Bug: index out of range; use xs[-1]."),
    ("last = xs[-1]", "Looks good."),
    ("def area(r):\n    return 3.14 * r * 2", "Bug: should be r ** 2; use math.pi * r ** 2."),
    ("def area(r):\n    return math.pi * r ** 2", "Looks good."),
    ("if a > b:\n    m = a\nelse:\n    m = a", "Bug: both branches pick a; else should be m = b."),
    ("m = max(a, b)", "Looks good."),
    ("half = len(xs) / 2\nfirst = xs[:half]", "Bug: / gives a float; use len(xs) // 2."),
    ("half = len(xs) // 2\nfirst = xs[:half]", "Looks good."),
    ("import os\nos.system('rm ' + path)", "Bug: shell injection; use os.remove(path)."),
    ("import os\nos.remove(path)", "Looks good."),
]


def arithmetic() -> list[dict[str, object]]:
    """All 100 single-digit sums a+b as chat rows."""
    return [
        _chat([("user", f"{a}+{b}"), ("assistant", str(a + b))])
        for a, b in itertools.product(range(10), repeat=2)
    ]


def reversal(rng: random.Random) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Distinct random 3-letter strings and their reversals; train and test share none."""
    words = ["".join(t) for t in itertools.product(string.ascii_lowercase, repeat=3)]
    picked = rng.sample(words, REVERSAL_TRAIN + REVERSAL_TEST)
    rows = [{"prompt": w, "completion": w[::-1]} for w in picked]
    return rows[:REVERSAL_TRAIN], rows[REVERSAL_TRAIN:]


def code_review(rng: random.Random) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Snippet -> one-line review chat rows, shuffled, the last few held out."""
    rows = [
        _chat([("system", CODE_REVIEW_SYSTEM), ("user", code), ("assistant", review)])
        for code, review in CODE_REVIEWS
    ]
    rng.shuffle(rows)
    return rows[:-CODE_REVIEW_TEST], rows[-CODE_REVIEW_TEST:]


def broken() -> dict[str, str]:
    """Small bad files for tests; each has exactly one bad line (named in the README)."""
    good = json.dumps(_chat([("user", "1+1"), ("assistant", "2")]))
    return {
        # line 2 is malformed (missing closing brace)
        "bad_json.jsonl": f'{good}\n{{"messages": [{{"role": "user", "content": "2+2"}}]\n{good}\n',
        # line 3 has no "completion"
        "missing_field.jsonl": '{"prompt": "abc", "completion": "cba"}\n'
        '{"prompt": "xyz", "completion": "zyx"}\n'
        '{"prompt": "dog"}\n',
        # line 2: messages[1].content is ""
        "empty_content.jsonl": f'{good}\n{{"messages": [{{"role": "user", "content": "3+3"}}, '
        f'{{"role": "assistant", "content": ""}}]}}\n',
    }


def write_examples(out: Path) -> None:
    """Write every example file under `out`."""
    rng = random.Random(SEED)
    reversal_train, reversal_test = reversal(rng)
    review_train, review_test = code_review(rng)
    sets = {
        "arithmetic": (arithmetic(), arithmetic()),
        "reversal": (reversal_train, reversal_test),
        "code_review": (review_train, review_test),
    }
    for name, (train, test) in sets.items():
        _write_jsonl(out / name / "train.jsonl", train)
        _write_jsonl(out / name / "test.jsonl", test)
    (out / "broken").mkdir(parents=True, exist_ok=True)
    for filename, text in broken().items():
        (out / "broken" / filename).write_text(text, encoding="utf-8", newline="\n")


def _chat(turns: list[tuple[str, str]]) -> dict[str, object]:
    return {"messages": [{"role": role, "content": content} for role, content in turns]}


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8", newline="\n")


if __name__ == "__main__":
    write_examples(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
