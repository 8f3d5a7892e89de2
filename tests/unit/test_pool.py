"""The actor pool (algorithms/pool.py) with real spawned processes: every shard done once in
any order, a shard whose actor died retried on a replacement, a shard whose work raises
retried and then given up with its reasons, and actors that cannot start stop the pool with
the reason instead of being replaced forever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support import pool_work

from thinker.algorithms.pool import LocalPool, PoolError, Shard


def _run(pool: LocalPool, shards: list[Shard]) -> tuple[dict[int, list[Any]], dict[int, str]]:
    done: dict[int, list[Any]] = {}
    failed: dict[int, str] = {}

    def on_done(shard: Shard, results: list[Any]) -> None:
        assert shard.number not in done, "a shard finished twice"
        done[shard.number] = results

    pool.run(shards, on_done, lambda shard, why: failed.__setitem__(shard.number, why))
    return done, failed


def test_a_dead_actor_is_replaced_and_its_shard_retried(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("THINKER_TEST_DIE_ONCE", str(tmp_path / "died"))
    record = tmp_path / "pool.json"
    pool = LocalPool(2, pool_work.doubling, (), record=record, max_retries=1)
    shards = [Shard(0, [1, 2]), Shard(1, [3, "die"]), Shard(2, [5]), Shard(3, [6, 7])]
    done, failed = _run(pool, shards)
    assert failed == {}
    assert done == {0: [2, 4], 1: [6, "survived"], 2: [10], 3: [12, 14]}
    assert pool.stats.retries == 1 and pool.stats.actors_lost == 1
    actors = json.loads(record.read_text())["actors"]
    lost = [a for a in actors if a["state"] == "lost"]
    assert len(lost) == 1 and "exited (code 3)" in lost[0]["lost_reason"]
    assert len(actors) == 3  # two, and the one that replaced the dead one
    assert all(a["state"] in ("lost", "stopped") for a in actors)  # none left running


def test_a_shard_that_keeps_failing_is_given_up_with_its_reasons(tmp_path: Path) -> None:
    pool = LocalPool(1, pool_work.doubling, (), max_retries=2)
    done, failed = _run(pool, [Shard(0, [1]), Shard(1, ["bad"]), Shard(2, [4])])
    assert done == {0: [2], 2: [8]}
    assert list(failed) == [1]
    assert failed[1].count("ValueError: cannot double 'bad'") == 3  # the try and 2 retries
    assert pool.stats.shards_failed == 1 and pool.stats.actors_lost == 0


def test_actors_that_cannot_start_stop_the_pool_with_the_reason() -> None:
    pool = LocalPool(1, pool_work.failing, (), max_retries=1)
    with pytest.raises(PoolError, match="setup failed: RuntimeError: no model here"):
        _run(pool, [Shard(0, [1])])
