"""Benchmark: validating a large chat JSONL upload, rows per second and peak memory.

Runs the server's whole-file validation (`thinker.services.dataset_files.scan`: parse, check every
row as chat, write the canonical JSONL, find exact duplicates) on generated files of two
sizes, each in a fresh subprocess so that its peak memory is its own:

    PYTHONPATH=backend python tests/perf/bench_validate.py [--sizes 100000 1000000]

Prints, per size: rows/s by the wall clock and by CPU time (the two differ when other work
shares the cores), the peak RSS of the process, and what validation added to it (peak RSS
minus RSS before the scan); then the ratios between the largest and the smallest size.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROW_TEMPLATE = "You are a careful calculator."


def write_chat_file(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` distinct chat rows (system, user, assistant), about 200 bytes each."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(rows):
            a, b = rng.randrange(10**6), rng.randrange(10**6)
            messages = [
                {"role": "system", "content": ROW_TEMPLATE},
                {"role": "user", "content": f"What is {a} + {b}? (question {i})"},
                {"role": "assistant", "content": f"{a} + {b} = {a + b}."},
            ]
            f.write(json.dumps({"messages": messages}) + "\n")


def rss_kib() -> int:
    """The current resident set size, from /proc (ru_maxrss is the peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def measure(path: Path) -> dict[str, float]:
    """Validate `path` in this process; the figures as a dict."""
    from thinker.services.dataset_files import Plan, scan
    from thinker.settings import Settings

    settings = Settings(data_dir=path.parent / "server", max_rows=10**9)
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    before = rss_kib()
    wall, cpu = time.perf_counter(), time.process_time()
    found = scan(path, Plan("jsonl", "chat", {}), settings.datasets_dir / "rows.jsonl", settings)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert found.errors.count == 0, found.errors.first[:3]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "rows": found.rows,
        "seconds": wall,
        "rows_per_s": found.rows / wall,
        "rows_per_cpu_s": found.rows / cpu,
        "peak_rss_mib": peak / 1024,
        "added_mib": (peak - before) / 1024,
    }


def run_child(path: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(path)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"chat-{size}.jsonl"
            write_chat_file(path, size)
            result = run_child(path)
            results.append(result)
            mib = path.stat().st_size / 2**20
            print(
                f"{size:>9,} rows ({mib:,.0f} MiB): {result['rows_per_s']:>9,.0f} rows/s wall, "
                f"{result['rows_per_cpu_s']:>9,.0f} rows/s CPU, {result['seconds']:.2f} s; "
                f"peak RSS {result['peak_rss_mib']:.0f} MiB, added by validation "
                f"{result['added_mib']:.0f} MiB"
            )
            path.unlink()
    small, large = results[0], results[-1]
    print(
        f"ratio {large['rows'] / small['rows']:.0f}x rows: peak RSS "
        f"{large['peak_rss_mib'] / small['peak_rss_mib']:.2f}x, added "
        f"{large['added_mib'] / max(small['added_mib'], 1):.2f}x, rows/s "
        f"{large['rows_per_s'] / small['rows_per_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
