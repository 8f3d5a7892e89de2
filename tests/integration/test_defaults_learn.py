"""Jobs created through the REST API with an empty config learn: the proposal alone (no
hyperparameter given) trains the tiny model to answer held-out questions, on tasks made here
that the proposal was never tuned on, and on the shipped examples; DPO and RL continue from an
SL model of the library, as a newcomer following TRAINING_GUIDE would.

What is asserted is the job's own report (held-out exact match, preference accuracy, mean
reward against the starting model's), so the test also checks that "done" tells the truth.
Thresholds were set from observed runs with margin (recorded next to each); each job's
figures are printed for the log.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state

from thinker.server.app import create_app

pytestmark = pytest.mark.slow
JOB_TIMEOUT_S = 1800  # a bound on a hung worker only: the assertions are about learning


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    """The real app on SQLite (learning does not depend on the database)."""
    with TestClient(create_app(make_settings(tmp_path / "data", None))) as test_client:
        yield test_client


def _words(rng: random.Random, n: int, lo: int, hi: int) -> list[str]:
    found: set[str] = set()
    while len(found) < n:
        found.add("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi))))
    return sorted(found)


TASKS: dict[str, tuple[tuple[int, int], Callable[[str], str]]] = {
    "repeat the word twice": ((2, 4), lambda w: w + w),
    "drop the first letter": ((3, 6), lambda w: w[1:]),
}


def _task_file(tmp_path: Path, name: str, rows: int, seed: int) -> Path:
    """`rows` prompt/completion rows of a task; the job holds out 10% of them itself."""
    (lo, hi), answer = TASKS[name]
    words = _words(random.Random(seed), rows, lo, hi)
    random.Random(seed + 1).shuffle(words)
    path = tmp_path / f"{name.replace(' ', '_')}.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": w, "completion": answer(w)}) + "\n" for w in words)
    )
    return path


def _run(client: TestClient, request: dict[str, object]) -> dict[str, object]:
    created = client.post("/api/jobs", json=request)
    assert created.status_code == 201, created.text
    done = wait_state(client, created.json()["id"], ("succeeded", "failed"), JOB_TIMEOUT_S)
    assert done["state"] == "succeeded", done["log_tail"]
    report = done["report"]
    print(request["algorithm"], json.dumps(done["config"]), json.dumps(report["metric"]))
    return done


def _model_of(client: TestClient, job: dict[str, object]) -> str:
    models = client.get(f"/api/models?job_id={job['id']}").json()["data"]
    return str(max(models, key=lambda m: m["step"])["id"])


# (task, rows, held-out exact match at least): observed 0.55 (40 held-out words). "Drop the
# first letter" ran here too (observed 0.225, threshold 0.1): 80 s of CI's 25 minutes for a
# second task whose threshold was 4 words of 40; it is still in TASKS, for a run by hand.
@pytest.mark.parametrize(("task", "rows", "at_least"), [("repeat the word twice", 400, 0.35)])
def test_sl_with_an_empty_config_learns_a_new_task(
    client: TestClient, tmp_path: Path, task: str, rows: int, at_least: float
) -> None:
    data = add_dataset(client, _task_file(tmp_path, task, rows, seed=7), "prompt_completion")
    done = _run(client, {"algorithm": "sl", "dataset_id": data})
    report = done["report"]
    assert report["verdict"] == "learned", report
    assert report["metric"]["base"] == 0.0
    assert report["metric"]["value"] >= at_least


def test_sl_then_dpo_then_rl_with_empty_configs(client: TestClient) -> None:
    """The shipped sums (SL), the shipped preference pairs (DPO from the SL model), and RL on
    the shipped problems from an SL model of the shipped warm-up set."""
    sums = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    sl = _run(client, {"algorithm": "sl", "dataset_id": sums})
    assert sl["report"]["verdict"] == "learned"
    assert sl["report"]["metric"]["value"] >= 0.8  # observed 1.0 (10 held-out sums)

    pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
    dpo = _run(
        client, {"algorithm": "dpo", "dataset_id": pairs, "base_model": _model_of(client, sl)}
    )
    assert dpo["parent_model_id"] == _model_of(client, sl)
    assert dpo["report"]["verdict"] == "learned"
    assert dpo["report"]["metric"]["value"] >= 0.8  # observed 1.0 (base 0.5)

    warmup = add_dataset(client, EXAMPLES / "rl" / "warmup_hedged.jsonl", "chat")
    problems = add_dataset(client, EXAMPLES / "rl" / "train.jsonl", "problems")
    proposal = client.post(
        "/api/jobs/proposal", json={"algorithm": "rl", "dataset_id": problems}
    ).json()
    assert any("cannot answer yet" in w for w in proposal["warnings"])
    start = _model_of(client, _run(client, {"algorithm": "sl", "dataset_id": warmup}))
    rl = _run(client, {"algorithm": "rl", "dataset_id": problems, "base_model": start})
    metric = rl["report"]["metric"]
    assert metric["name"] == "reward"
    assert metric["value"] >= metric["base"] + 0.15  # observed 0.49 -> 0.84
