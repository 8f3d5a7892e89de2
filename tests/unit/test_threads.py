"""The engine's CPU thread policy and the memory the batch planner reads on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinker.engine.local.memory import available_ram
from thinker.engine.local.threads import SMALL_MODEL_PARAMS, choose_threads, usable_cores


def test_small_models_get_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THINKER_THREADS", raising=False)
    choice = choose_threads(180_224)
    assert choice.threads == 1
    assert "0.2M parameters" in choice.why


def test_larger_models_share_the_usable_cores_between_cpu_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("THINKER_THREADS", raising=False)
    monkeypatch.setenv("THINKER_CPU_JOBS", "1")
    assert choose_threads(SMALL_MODEL_PARAMS).threads == usable_cores()
    monkeypatch.setenv("THINKER_CPU_JOBS", str(usable_cores() * 4))
    assert choose_threads(SMALL_MODEL_PARAMS).threads == 1  # never fewer than one


def test_thinker_threads_overrides_and_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINKER_THREADS", "3")
    assert choose_threads(10).threads == 3
    monkeypatch.setenv("THINKER_THREADS", "zero")
    with pytest.raises(ValueError, match="THINKER_THREADS must be a whole number >= 1"):
        choose_threads(10)


MEMINFO = """MemTotal:       24000000 kB
MemFree:          100000 kB
MemAvailable:   20000000 kB
Cached:         19000000 kB
"""


def test_available_ram_counts_reclaimable_cache_not_only_free_pages(tmp_path: Path) -> None:
    """MemFree is 0.1 GB here while 20 GB can be had: the planner must read the 20."""
    assert available_ram(MEMINFO, cgroup_dir=str(tmp_path)) == 20_000_000 * 1024


def test_available_ram_is_capped_by_the_cgroup_limit(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text(f"{8 * 2**30}\n")
    (tmp_path / "memory.current").write_text(f"{3 * 2**30}\n")
    assert available_ram(MEMINFO, cgroup_dir=str(tmp_path)) == 5 * 2**30
    (tmp_path / "memory.max").write_text("max\n")
    assert available_ram(MEMINFO, cgroup_dir=str(tmp_path)) == 20_000_000 * 1024
