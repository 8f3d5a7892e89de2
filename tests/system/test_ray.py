"""Jobs on a real Ray cluster (THINKER_EXECUTOR=ray): a head node and a second node on this
machine, started by `ray start` and stopped after. The second node has a custom resource,
`node_b`, which the server asks for (THINKER_RAY_RESOURCES), so that every worker must run
there; the test reads where it ran from the cluster itself.

Ray is the optional extra `.[ray]`, which scripts/install.sh installs for the tests. Without
it these tests are skipped, unless CI=true, where a skip would hide them: then they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.net import free_port
from tests.system.server import ARITHMETIC, ServerProcess, upload, wait_for

from thinker.runs import RunDir, read_metrics

if os.environ.get("CI") != "true":
    pytest.importorskip("ray", reason="the Ray tests need the extra: pip install -e '.[ray]'")
import ray  # noqa: E402 - after the skip

pytestmark = pytest.mark.slow
SHORT = {"max_steps": 12, "batch_size": 4, "save_every": 6, "eval_every": 0}
LONG = {"max_steps": 20000, "batch_size": 4, "save_every": 10, "eval_every": 0}  # cancelled early


def _ray(*args: str, env: dict[str, str]) -> None:
    command = [str(Path(sys.executable).parent / "ray"), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    output = done.stdout[-2000:] + done.stderr[-2000:]
    assert done.returncode == 0, f"ray {' '.join(args[:2])}: {output}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node (1 CPU) and a node with the `node_b` resource (1 CPU); the address."""
    port = free_port()
    temp = Path(f"/tmp/thinker-ray-{port}")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--disable-usage-stats", "--num-gpus=0"]
    address = f"127.0.0.1:{port}"
    try:
        _ray("start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
             f"--temp-dir={temp}", '--resources={"head": 1}', *common, env=env)  # fmt: skip
        _ray("start", f"--address={address}", "--num-cpus=1", '--resources={"node_b": 1}',
             *common, env=env)  # fmt: skip
        yield address
    finally:
        subprocess.run(
            [str(Path(sys.executable).parent / "ray"), "stop", "--force"],
            env=env,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(temp, ignore_errors=True)


def _node_with(address: str, resource: str) -> str:
    """The id of the live node that has `resource`."""
    ray.init(address=address, namespace="thinker-test", logging_level="WARNING")
    try:
        (node,) = [n for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
        return str(node["NodeID"])
    finally:
        ray.shutdown()


def _server(tmp_path: Path, database_url: str | None, address: str) -> ServerProcess:
    return ServerProcess(
        tmp_path / "data",
        database_url,
        THINKER_EXECUTOR="ray",
        THINKER_RAY_ADDRESS=address,
        THINKER_RAY_RESOURCES=json.dumps({"node_b": 0.5}),
    ).start()


def test_a_job_runs_on_the_node_its_resources_pick(
    tmp_path: Path, database_url: str | None, cluster: str
) -> None:
    """A short SL job runs to the end on the second node, its metrics and checkpoints in its
    run directory as under the local executor; the job's log says where it ran."""
    server = _server(tmp_path, database_url, cluster)
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            created = client.post(
                "/api/jobs", json={"algorithm": "sl", "dataset_id": dataset_id, "config": SHORT}
            )
            assert created.status_code == 201, created.text
            job_id = created.json()["id"]
            done = wait_for(client, job_id, ("succeeded", "failed"), timeout=240)
            assert done["state"] == "succeeded", done["log_tail"]
            run = tmp_path / "data" / "runs" / job_id
            placement = json.loads((run / "placement.json").read_text())
            assert placement["node_id"] == _node_with(cluster, "node_b")
            assert "[ray] worker on node" in RunDir(run).log.read_text()
            rows = read_metrics(RunDir(run).metrics)
            steps = [row["step"] for row in rows if "train_mean_nll" in row]
            assert steps == list(range(1, SHORT["max_steps"] + 1))  # each step once
            models = client.get(f"/api/models?job_id={job_id}").json()["data"]
            assert models  # its checkpoints entered the library
    finally:
        server.stop()


def test_pause_resume_and_cancel_on_ray(
    tmp_path: Path, database_url: str | None, cluster: str
) -> None:
    """Pause stops the worker between steps, resume starts another actor from the last
    checkpoint, cancel ends it: as under the local executor."""
    server = _server(tmp_path, database_url, cluster)
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            created = client.post(
                "/api/jobs", json={"algorithm": "sl", "dataset_id": dataset_id, "config": LONG}
            )
            job_id = created.json()["id"]
            wait_for(client, job_id, ("running",), min_step=12, timeout=240)
            assert client.post(f"/api/jobs/{job_id}/pause").status_code == 200
            paused = wait_for(client, job_id, ("paused",), timeout=120)
            assert paused["reason"] == "stopped by request"
            assert client.post(f"/api/jobs/{job_id}/resume").status_code == 200
            wait_for(client, job_id, ("running",), min_step=paused["step"] + 3, timeout=240)
            starts = [
                e["data"]["start_step"]
                for e in client.get(f"/api/jobs/{job_id}/events").json()["data"]
                if e["type"] == "plan"
            ]
            assert starts[0] == 0 and starts[-1] >= 10  # the second actor began at a checkpoint
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            cancelled = wait_for(client, job_id, ("cancelled",), timeout=120)
            assert cancelled["step"] < LONG["max_steps"]
    finally:
        server.stop()
