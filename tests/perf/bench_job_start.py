"""Benchmark: how long a small CPU job takes through the REST API, its worker forked by the
warm starter (jobs/forkserver.py, the default) against a fresh `python -m thinker.jobs.worker`
per job (THINKER_WARM_WORKERS=false), in the same run.

    PYTHONPATH=backend:. python tests/perf/bench_job_start.py [--jobs 5] [--steps 2]

Each setting gets a server of its own (the real app behind a test client, SQLite) and runs
`--jobs` SL jobs of `--steps` steps on the shipped arithmetic set, one after the other. The
first job of the warm setting also waits for the starter's imports, as the first job of a
server does; it is reported apart. Prints each job's seconds from the request to its end
state, and the median of the later jobs in each setting with their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, make_settings, wait_state

from thinker.server.app import create_app


def run(warm: bool, jobs: int, steps: int) -> list[float]:
    """Seconds from each job's request to its end state."""
    data = Path(tempfile.mkdtemp(prefix="bench-job-start-")) / "data"
    settings = make_settings(data, None, warm_workers=warm)
    config = {"max_steps": steps, "eval_every": 0, "save_every": 0}
    seconds = []
    with TestClient(create_app(settings)) as client:
        sums = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
        for _ in range(jobs):
            started = time.perf_counter()
            body = {"algorithm": "sl", "dataset_id": sums, "config": config}
            job = client.post("/api/jobs", json=body).json()
            done = wait_state(client, job["id"], ("succeeded", "failed"))
            assert done["state"] == "succeeded", done["log_tail"]
            seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    results = {}
    for name, warm in (("fresh", False), ("warm", True)):
        results[name] = run(warm, args.jobs, args.steps)
        print(f"{name}: " + ", ".join(f"{s:.1f}" for s in results[name]) + " s", flush=True)
    later = {name: statistics.median(s[1:]) for name, s in results.items()}
    print(
        json.dumps(
            {
                "cores": os.cpu_count(),
                "jobs": args.jobs,
                "steps": args.steps,
                "first_job_s": {k: round(v[0], 2) for k, v in results.items()},
                "median_later_job_s": {k: round(v, 2) for k, v in later.items()},
                "fresh_over_warm": round(later["fresh"] / later["warm"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
