"""Jobs on a real Ray cluster (THINKER_EXECUTOR=ray): a head node and a second node on this
machine, started by `ray start` and stopped after. The second node has a custom resource,
`node_b`, which the server asks for (THINKER_RAY_RESOURCES), so that every worker must run
there; the test reads where it ran from the cluster itself.

Ray is the optional extra `.[ray]`, which scripts/install.sh installs for the tests. Without
it these tests are skipped, unless CI=true, where a skip would hide them: then they fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.support.api import EXAMPLES
from tests.support.batch import run_killing_an_actor
from tests.support.net import free_port
from tests.system.server import ARITHMETIC, ServerProcess, upload, wait_for

from thinker.algorithms import batch
from thinker.algorithms.batch_config import BatchConfig
from thinker.files import read_jsonl
from thinker.runs import RunDir, read_metrics

if os.environ.get("CI") != "true":
    pytest.importorskip("ray", reason="the Ray tests need the extra: pip install -e '.[ray]'")
import ray  # noqa: E402 - after the skip
from ray.util.placement_group import placement_group, remove_placement_group  # noqa: E402

pytestmark = pytest.mark.slow


SHORT = {"max_steps": 12, "batch_size": 4, "save_every": 6, "eval_every": 0}
LONG = {"max_steps": 20000, "batch_size": 4, "save_every": 10, "eval_every": 0}  # cancelled early
REVIEWS = EXAMPLES / "code_review"
FAULT = {"max_steps": 200, "batch_size": 4, "save_every": 10, "eval_every": 0}


# A lost node is declared dead after 3 missed health checks a second apart (not 5 x 3 s).
ENV = {
    **os.environ,
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
COMMON = ["--disable-usage-stats", "--num-gpus=0"]


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
    address = f"127.0.0.1:{port}"
    try:
        _ray("start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
             f"--temp-dir={temp}", '--resources={"head": 1}', *COMMON, env=ENV)  # fmt: skip
        _start_node(address, "node_b")
        yield address
    finally:
        subprocess.run(
            [str(Path(sys.executable).parent / "ray"), "stop", "--force"],
            env=ENV,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(temp, ignore_errors=True)


def _ray_processes() -> set[int]:
    """This machine's Ray processes (the raylet and Ray's Python agents)."""
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        if any("/ray/" in part for part in command[:2]):
            found.add(process.pid)
    return found


def _start_node(address: str, resource: str) -> list[int]:
    """Join a node with 1 CPU and the custom `resource`; the pids of the processes it
    started (to lose it later)."""
    before = _ray_processes()
    _ray("start", f"--address={address}", "--num-cpus=1", f'--resources={{"{resource}": 1}}',
         *COMMON, env=ENV)  # fmt: skip
    return sorted(_ray_processes() - before)


def _node_with(address: str, resource: str) -> str:
    """The id of the live node that has `resource`."""
    ray.init(address=address, namespace="thinker-test", logging_level="WARNING")
    try:
        (node,) = [n for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
        return str(node["NodeID"])
    finally:
        ray.shutdown()


def _server(
    tmp_path: Path,
    database_url: str | None,
    address: str,
    resources: dict[str, float] | None = {"node_b": 0.5},  # noqa: B006 - read only
) -> ServerProcess:
    pin = {"THINKER_RAY_RESOURCES": json.dumps(resources)} if resources else {}
    return ServerProcess(
        tmp_path / "data", database_url, THINKER_EXECUTOR="ray", THINKER_RAY_ADDRESS=address, **pin
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
            done = wait_for(client, job_id, ("succeeded", "failed"))
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
            wait_for(client, job_id, ("running",), min_step=12)
            assert client.post(f"/api/jobs/{job_id}/pause").status_code == 200
            paused = wait_for(client, job_id, ("paused",))
            assert paused["reason"] == "stopped by request"
            assert client.post(f"/api/jobs/{job_id}/resume").status_code == 200
            wait_for(client, job_id, ("running",), min_step=paused["step"] + 3)
            starts = [
                e["data"]["start_step"]
                for e in client.get(f"/api/jobs/{job_id}/events").json()["data"]
                if e["type"] == "plan"
            ]
            assert starts[0] == 0 and starts[-1] >= 10  # the second actor began at a checkpoint
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            cancelled = wait_for(client, job_id, ("cancelled",))
            assert cancelled["step"] < LONG["max_steps"]
    finally:
        server.stop()


def test_a_lost_node_resumes_its_job_on_another_from_its_checkpoint(
    tmp_path: Path, database_url: str | None, cluster: str
) -> None:
    """A node joins, the job's first actor lands on it (the other nodes' CPUs are held), and
    the node loses its Ray processes mid-job: the job is interrupted with the reason and
    resumed by itself (auto_resume, default 2) on the head node from its last checkpoint,
    each metric step once; the orphaned worker ends itself. The job asks for host memory
    (`memory_gb`), which its actor reserves from Ray."""
    node_c = _start_node(cluster, "node_c")
    ray.init(address=cluster, namespace="thinker-test", logging_level="WARNING")
    # Every CPU but node_c's held by a placement group (resources only, no process).
    holds = {r: placement_group([{"CPU": 1, r: 0.5}]) for r in ("head", "node_b")}
    try:
        ray.get([hold.ready() for hold in holds.values()], timeout=120)
        nodes = {r: n["NodeID"] for n in ray.nodes() if n["Alive"] for r in n["Resources"]}
        server = _server(tmp_path, database_url, cluster, resources=None)
        try:
            with server.client() as client:
                dataset_id = upload(client, ARITHMETIC, "chat")
                body = {"algorithm": "sl", "dataset_id": dataset_id, "config": FAULT}
                body["memory_gb"] = 0.25
                job_id = client.post("/api/jobs", json=body).json()["id"]
                first = wait_for(client, job_id, ("running",), min_step=22)
                assert first["placement"]["node_id"] == nodes["node_c"], first["placement"]
                assert _reserved_memory() == pytest.approx(0.25 * 2**30, rel=1e-3)
                run = RunDir(tmp_path / "data" / "runs" / job_id)
                worker = _worker_pid(run)
                _lose(node_c, spare=worker)
                remove_placement_group(holds.pop("head"))  # room on the head for the next attempt
                again = _wait(
                    client, job_id, lambda j: j["attempts"] == 2 and j["state"] == "running"
                )
                assert again["placement"]["node_id"] == nodes["head"], again["placement"]
                assert again["auto_resumes"] == 1
                with contextlib.suppress(psutil.NoSuchProcess):  # it ended itself
                    psutil.Process(worker).wait(timeout=15)
                done = wait_for(client, job_id, ("succeeded",))
                assert done["attempts"] == 2 and done["auto_resumes"] == 1
                events = client.get(f"/api/jobs/{job_id}/events", params={"limit": 10000})
        finally:
            server.stop()
    finally:
        for hold in holds.values():
            remove_placement_group(hold)
        ray.shutdown()
    data = events.json()["data"]
    lost = [e["data"] for e in data if e["data"].get("state") == "interrupted"]
    assert len(lost) == 1 and "is no longer running" in lost[0]["reason"], lost
    auto = [e["data"]["auto"] for e in data if e["data"].get("auto")]
    assert auto == [{"retry": 1, "of": 2, "after": lost[0]["reason"]}]
    where = [(e["data"]["attempt"], e["data"]["node_id"]) for e in data if e["type"] == "placement"]
    assert where == [(1, nodes["node_c"]), (2, nodes["head"])]
    plans = [e["data"]["start_step"] for e in data if e["type"] == "plan"]
    assert plans[0] == 0 and plans[1] >= 20 and plans[1] % 10 == 0  # from a checkpoint
    steps = [row["step"] for row in read_metrics(run.metrics) if "train_mean_nll" in row]
    assert steps == list(range(1, FAULT["max_steps"] + 1))  # none lost, none twice
    assert "[thinker] the Ray actor that started this worker is gone" in run.log.read_text()


def _lose(pids: list[int], spare: int) -> None:
    """SIGKILL a node's Ray processes and the workers they started (its actors), as when the
    node goes; `spare` (the job's worker, in a session of its own) is left to notice."""
    doomed = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            doomed += [process, *process.children(recursive=True)]
    for process in doomed:
        if process.pid != spare:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def _worker_pid(run: RunDir) -> int:
    """The pid the job's last `running` event gave (the current attempt's worker)."""
    events = [json.loads(line) for line in run.events.read_text().splitlines() if line]
    running = [e for e in events if e["data"].get("state") == "running"]
    return int(running[-1]["data"]["pid"])


def _wait(client: Any, job_id: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.time() + 240
    while time.time() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if ok(job):
            return dict(job)
        time.sleep(0.1)
    raise TimeoutError(f"{job_id}: {job}")


def _reserved_memory() -> float:
    """Bytes of Ray's `memory` resource reserved now (Ray's view settles within a second)."""
    deadline = time.time() + 10
    while True:
        reserved = ray.cluster_resources()["memory"] - ray.available_resources().get("memory", 0)
        if reserved > 0 or time.time() > deadline:
            return float(reserved)
        time.sleep(0.2)


def test_batch_work_on_ray_actors_retries_a_killed_actors_shard(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch pool as Ray actors (pool: ray, as under the Ray executor): every input once;
    an actor whose process is killed while it holds a shard is replaced and the shard retried."""
    monkeypatch.setenv("THINKER_RAY_ADDRESS", cluster)
    config = BatchConfig(
        dataset=REVIEWS / "test.jsonl",
        samples=4,
        max_tokens=48,
        shard_size=2,
        workers=2,
        pool="ray",
        log_path=tmp_path / "run",
    )
    try:
        result, killed = run_killing_an_actor(config)
    finally:
        ray.shutdown()
    rows = read_jsonl(config.log_path / batch.RESULTS)
    assert sorted(r["index"] for r in rows) == list(range(8))
    assert all("error" not in r and 0 < r["confidence"] <= 1 for r in rows)
    assert result.final_metrics["shard_retries"] >= 1
    actors = json.loads((config.log_path / batch.POOL_RECORD).read_text())["actors"]
    lost = [a for a in actors if a["pid"] in killed]
    assert lost and all("the Ray actor died" in a["lost_reason"] for a in lost)


def test_a_job_no_node_can_place_is_cancelled_and_its_actor_removed(
    tmp_path: Path, cluster: str
) -> None:
    """A worker that asks for a resource no node has waits unplaced; cancel ends the job at
    once and takes its pending actor off the cluster (SQLite only: the server's side is the
    other tests')."""
    server = _server(tmp_path, None, cluster, resources={"nowhere": 1})
    try:
        with server.client() as client:
            dataset_id = upload(client, ARITHMETIC, "chat")
            body = {"algorithm": "sl", "dataset_id": dataset_id, "config": SHORT}
            job_id = client.post("/api/jobs", json=body).json()["id"]
            waiting = wait_for(client, job_id, ("starting",))
            time.sleep(3)  # still unplaced: nothing ran
            assert client.get(f"/api/jobs/{job_id}").json()["state"] == "starting"
            assert waiting["step"] == 0
            assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
            cancelled = wait_for(client, job_id, ("cancelled",))
            assert cancelled["step"] == 0
    finally:
        server.stop()
    ray.init(address=cluster, namespace="thinker-test", logging_level="WARNING")
    try:  # the actor's name: thinker-<the job id's hex>-<attempt>
        deadline = time.time() + 60
        while True:
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
            alive = [n for n in names if job_id.removeprefix("job_") in n]
            if not alive or time.time() > deadline:
                break
            time.sleep(1)
        assert alive == []
    finally:
        ray.shutdown()
