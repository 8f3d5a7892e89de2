"""Write data/examples/rlhf/{demos,prompts,prompts_test}.jsonl from ../preferences/ (deterministic).

Usage: python data/examples/rlhf/make_rlhf.py [OUT_DIR]   (default: this folder; run
make_preferences.py first if you edit it)

The three RLHF stages read three files, all built from the preference pairs next door:

- demos.jsonl (stage 1, SL): one demonstration per training prompt, in chat form. They are of
  mixed quality on purpose, as human demonstrations are: one in every HEDGED_EVERY is the
  pair's hedged wrong answer, the rest its direct correct one. SL imitates both styles; the
  reward model (stage 2, trained on preferences/train.jsonl) learns that hedging is worse;
  RL against it (stage 3) is what removes the hedging.
- prompts.jsonl, prompts_test.jsonl (stage 3, RL): the training and held-out prompts, each
  with `answer`, the pair's chosen answer. A lone completion (the held-out evaluation
  scores one greedy answer per prompt) is scored by the judge against this reference.

Standard library only, so it runs without the package installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFERENCES = HERE.parent / "preferences"
HEDGED_EVERY = 2  # one demonstration in HEDGED_EVERY hedges


def write_rlhf(out_dir: Path) -> None:
    """Write demos.jsonl, prompts.jsonl and prompts_test.jsonl into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = _read(PREFERENCES / "train.jsonl"), _read(PREFERENCES / "test.jsonl")
    demos = [
        {"messages": [_user(row), _assistant(row, hedged=i % HEDGED_EVERY == HEDGED_EVERY - 1)]}
        for i, row in enumerate(train)
    ]
    _write(out_dir / "demos.jsonl", demos)
    _write(out_dir / "prompts.jsonl", [_prompt(row) for row in train])
    _write(out_dir / "prompts_test.jsonl", [_prompt(row) for row in test])


def _read(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _text(value: object) -> str:
    """A preference field in either form (string, or a list of messages) as plain text."""
    if isinstance(value, str):
        return value
    assert isinstance(value, list)
    return "\n\n".join(str(m["content"]) for m in value)


def _user(row: dict[str, object]) -> dict[str, str]:
    return {"role": "user", "content": _text(row.get("prompt", row.get("messages")))}


def _assistant(row: dict[str, object], hedged: bool) -> dict[str, str]:
    return {"role": "assistant", "content": _text(row["rejected" if hedged else "chosen"])}


def _prompt(row: dict[str, object]) -> dict[str, str]:
    return {"prompt": _user(row)["content"], "answer": _text(row["chosen"])}


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


if __name__ == "__main__":
    write_rlhf(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
