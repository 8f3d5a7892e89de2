"""Jobs that must fail clearly rather than run wrong, on SQLite and PostgreSQL, with real
workers on the tiny model: config numbers out of bounds (refused before anything is queued),
a run whose loss or weights become NaN (failed, with the step and the likely cause), a worker
stopped with SIGSTOP (stale, then killed and interrupted, its slot freed), a job the manager
cannot follow (failed, the others go on), a worker's environment (no database URL, no
secrets), a full disk (507, nothing half-written) and a dataset whose file is gone."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.disk import tmpfs
from tests.support.api import (
    EXAMPLES,
    add_dataset,
    job_pid,
    job_rows,
    make_settings,
    platform_of,
    wait_state,
)

from thinker.engine.local.checkpoints import MANIFEST_FILE, STATE_FILE, verify
from thinker.jobs.events import append_event
from thinker.jobs.forkserver import WarmStarter
from thinker.server.app import create_app

ARITHMETIC = EXAMPLES / "arithmetic" / "train.jsonl"
QUICK = {"batch_size": 4, "eval_every": 0, "save_every": 0}
LONG = {**QUICK, "max_steps": 1_000_000}  # runs until stopped


def _post_raw(client: TestClient, url: str, body: str) -> Any:
    """A JSON body as written (JSON numbers such as Infinity, NaN and 1e400 included)."""
    return client.post(url, content=body, headers={"Content-Type": "application/json"})


def _job_body(dataset_id: str, config: str) -> str:
    return f'{{"algorithm": "sl", "dataset_id": "{dataset_id}", "config": {config}}}'


# Values JSON cannot carry to the config (not finite, beyond 64 bits) are refused by the
# request check (server/limits.py, `body.config...`) before the config's own bounds see them;
# a YAML config gets the config's bounds (tests/unit/test_pipeline_config.py).
NOT_FINITE = r"body\.config\.learning_rate: (inf|nan) is not a finite number"
BEYOND_64_BITS = r"body\.config\.{}: .* is outside the signed 64-bit range"


@pytest.mark.postgresql
@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ('{"learning_rate": Infinity}', NOT_FINITE),
        ('{"learning_rate": NaN}', NOT_FINITE),
        (
            '{"learning_rate": 1e308}',
            "config.learning_rate: Input should be less than or equal to 1",
        ),
        (
            '{"learning_rate": true}',
            "config.learning_rate: Input should be a number, not true or false",
        ),
        (f'{{"seed": {2**70}}}', BEYOND_64_BITS.format("seed")),
        (f'{{"seed": {2**63 - 1}}}', None),  # the largest seed there is: accepted
        ('{"seed": -1}', "config.seed: Input should be greater than or equal to 0"),
        (
            '{"lora_rank": 1000000000}',
            "config.lora_rank: Input should be less than or equal to 1024",
        ),
        ('{"max_steps": true}', "config.max_steps: Input should be an integer, not true or false"),
        (
            '{"grad_clip_norm": -1}',
            "config.grad_clip_norm: Input should be greater than or equal to 0",
        ),
        (
            '{"max_steps": 10000001}',
            "config.max_steps: Input should be less than or equal to 10000000",
        ),
        (f'{{"max_steps": {10**30}}}', BEYOND_64_BITS.format("max_steps")),
        ('{"max_steps": 1e30}', "config.max_steps: Input should be a valid integer"),
        ('{"beta2": 1}', "config.beta2: Input should be less than 1"),
    ],
)
def test_config_numbers_must_be_finite_typed_and_in_range(
    held: TestClient, config: str, problem: str | None
) -> None:
    chat = add_dataset(held, ARITHMETIC, "chat")
    for url in ("/api/jobs", "/api/jobs/proposal"):
        response = _post_raw(held, url, _job_body(chat, config))
        if problem is None:
            assert response.status_code in (200, 201), response.text
            continue
        assert response.status_code == 422, response.text
        problems = response.json()["problems"]
        assert any(re.match(problem, p) for p in problems), (url, problems)
    if problem is not None:
        assert job_rows(held) == [] and list(platform_of(held).settings.runs_dir.iterdir()) == []


@pytest.mark.postgresql
def test_settings_must_fit_the_model_and_the_step_limit(held: TestClient, tmp_path: Path) -> None:
    chat = add_dataset(held, ARITHMETIC, "chat")
    wide = held.post(
        "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": {"lora_rank": 128}}
    )
    assert wide.status_code == 422
    assert wide.json()["problems"] == [
        "config.lora_rank: 128 is larger than the hidden size of thinker/tiny (64); use at most 64"
    ]
    # 1,200 rows, 1,080 to train on: 10,000 epochs of batches of 1 are 10.8 million steps.
    big = tmp_path / "big.jsonl"
    row = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
    big.write_text("\n".join(json.dumps(row) for _ in range(1200)) + "\n")
    many = add_dataset(held, big, "chat")
    config = {"num_epochs": 10_000, "batch_size": 1}
    steps = held.post("/api/jobs", json={"algorithm": "sl", "dataset_id": many, "config": config})
    assert steps.status_code == 422
    assert steps.json()["problems"] == [
        "config.num_epochs: 10,800,000 steps in all, more than the 10,000,000 a job may take; "
        "lower num_epochs or set max_steps"
    ]
    priority = held.post(
        "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "priority": True}
    )
    assert priority.status_code == 422 and "priority" in priority.json()["detail"]
    assert job_rows(held) == []


@pytest.mark.postgresql
def test_the_config_schema_holds_the_bounds(held: TestClient) -> None:
    schemas = held.get("/api/jobs/config-schema").json()
    for algorithm in ("sl", "dpo", "rl", "rm"):
        fields = schemas[algorithm]["properties"]
        assert fields["learning_rate"]["exclusiveMinimum"] == 0
        assert fields["learning_rate"]["maximum"] == 1
        assert fields["seed"] == {**fields["seed"], "minimum": 0, "maximum": 2**63 - 1}
        assert fields["lora_rank"]["maximum"] == 1024
        assert fields["grad_clip_norm"]["minimum"] == 0
    steps = schemas["sl"]["properties"]["max_steps"]["anyOf"][0]
    assert steps == {"type": "integer", "exclusiveMinimum": 0, "maximum": 10_000_000}


@pytest.mark.postgresql
def test_a_dataset_whose_file_is_gone_is_refused_at_creation(held: TestClient) -> None:
    chat = add_dataset(held, ARITHMETIC, "chat")
    path = platform_of(held).datasets.path(chat)
    path.unlink()
    for url in ("/api/jobs", "/api/jobs/proposal"):
        response = held.post(url, json={"algorithm": "sl", "dataset_id": chat})
        assert response.status_code == 503, response.text
        detail = response.json()["detail"]
        assert f"dataset {chat}: its file {path} is missing on disk" in detail
    assert job_rows(held) == []


def test_a_run_whose_weights_become_nan_fails_with_the_step_and_the_cause(
    client: TestClient,
) -> None:
    """Adam without its second moment (beta2 0, a vanishing eps) at learning rate 1 and no
    clipping: one step sends weights to infinity within a few steps on the tiny model."""
    chat = add_dataset(client, ARITHMETIC, "chat")
    config = {
        **QUICK,
        "max_steps": 50,
        "learning_rate": 1.0,
        "lr_schedule": "constant",
        "grad_clip_norm": 0,
        "beta2": 0,
        "eps": 1e-30,
    }
    job = client.post("/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": config})
    assert job.status_code == 201, job.text
    done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "failed", done
    assert done["step"] < 50 and done["retryable"] is False
    reason = done["reason"]
    assert " became NaN at step " in reason or " became infinite at step " in reason, reason
    assert "the learning rate 1 is likely too high for this model; lower it" in reason
    assert "turn gradient clipping on (grad_clip_norm 1.0; 0 is off)" in reason
    assert "Adam's beta2 0 and eps 1e-30" in reason


DIVERGING = {
    "learning_rate": 1.0,
    "lr_schedule": "constant",
    "grad_clip_norm": 0,
    "beta2": 0,
    "eps": 1e-30,
    "eval_every": 0,
    "save_every": 0,
    "max_steps": 30,
}


def _diverging_job(client: TestClient, algorithm: str) -> dict[str, Any]:
    """A DPO, RL or RLHF job whose DPO, RL or reward-model steps diverge as above."""
    if algorithm == "dpo":
        pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
        return {"dataset_id": pairs, "config": {**DIVERGING, "batch_size": 4}}
    if algorithm == "rl":  # a reward some completions get, and a KL penalty: the policy moves
        prompts = add_dataset(client, EXAMPLES / "rl" / "train.jsonl", "problems")
        rl = {"group_size": 8, "groups_per_batch": 4, "max_tokens": 8, "eval_fraction": 0.0}
        reward = {"type": "regex", "pattern": "[0-9]"}
        extra = {"reward": reward, "drop_constant_groups": False, "kl_coef": 1.0}
        return {"dataset_id": prompts, "config": {**DIVERGING, **rl, **extra}}
    demos = add_dataset(client, EXAMPLES / "rlhf" / "demos.jsonl", "chat")
    pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
    prompts = add_dataset(client, EXAMPLES / "rlhf" / "prompts.jsonl", "problems")
    config = {
        "sl": {**QUICK, "max_steps": 1},
        "rm": {**DIVERGING, "dataset_id": pairs, "batch_size": 4},
        "rl": {"dataset_id": prompts, "max_steps": 1, "group_size": 2, "groups_per_batch": 1},
    }
    return {"dataset_id": demos, "config": config}


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Iterator[TestClient]:
    """A server on SQLite only: for checks the database takes no part in (the SL test above
    takes the same path to the job's row on both databases)."""
    with TestClient(create_app(make_settings(tmp_path / "data", None))) as client:
        yield client


@pytest.mark.parametrize(
    ("algorithm", "loss"), [("dpo", "dpo_loss"), ("rl", "loss"), ("rlhf", "rm_train_nll")]
)
def test_dpo_rl_and_reward_model_runs_that_diverge_fail_too(
    sqlite_client: TestClient, algorithm: str, loss: str
) -> None:
    client = sqlite_client
    body = {"algorithm": algorithm, **_diverging_job(client, algorithm)}
    job = client.post("/api/jobs", json=body)
    assert job.status_code == 201, job.text
    done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "failed" and done["retryable"] is False, done
    reason = done["reason"]
    diverged = (
        rf"^the (loss \({loss}\)|gradient norm \(grad_norm\)|adapter's weights \(param_norm\))"
    )
    assert re.match(diverged + r" became (NaN|infinite) at step \d+: ", reason), reason
    assert "Adam's beta2 0 and eps 1e-30 let one step grow without bound" in reason


def test_a_job_the_manager_cannot_follow_fails_and_the_others_go_on(
    tmp_path: Path, database_url: str | None
) -> None:
    """A worker's event the database cannot hold (an integer beyond 64 bits) used to fail
    every tick of the manager, for every job."""
    settings = make_settings(tmp_path / "data", database_url, max_cpu_jobs=1)
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        body = {"algorithm": "sl", "dataset_id": chat}
        bad = client.post("/api/jobs", json={**body, "config": LONG}).json()["id"]
        good = client.post("/api/jobs", json={**body, "config": {**QUICK, "max_steps": 3}})
        wait_state(client, bad, ("running",))
        append_event(settings.runs_dir / bad, "plan", {"total_steps": 10**30, "start_step": 0})
        failed = wait_state(client, bad, ("failed",))
        assert failed["reason"].startswith("the server could not follow this job: ")
        assert failed["retryable"] is False
        # its worker is stopped, the slot it held goes to the next job, which runs to the end
        assert wait_state(client, good.json()["id"], ("succeeded",))["step"] == 3
        assert client.get(f"/api/jobs/{bad}").json()["state"] == "failed"


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "forked"])
def test_a_worker_runs_nicer_with_no_secrets_and_a_compile_cache_in_the_data_dir(
    tmp_path: Path, database_url: str | None, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """A fresh worker's environment is what /proc shows. A forked one (the warm starter's,
    jobs/forkserver.py) shows the starter's there, which must hold no secret either; its own
    is the one the executor sends the starter, seen on its way."""
    monkeypatch.setenv("THINKER_DATABASE_URL", "postgresql://thinker:hunter2-db@db:5432/thinker")
    monkeypatch.setenv("PGPASSWORD", "hunter2-pg")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2-aws")
    monkeypatch.setenv("TINKER_API_KEY", "tml-hunter2-tinker")
    monkeypatch.setenv("CACHE_URL", "redis://:hunter2-redis@cache:6379/0")
    monkeypatch.setenv("HF_TOKEN", "hf_needed_for_gated_models")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    sent: list[dict[str, str]] = []
    spawn = WarmStarter.spawn

    def seen(starter: WarmStarter, run_dir: str, log: str, env: dict[str, str]) -> int:
        sent.append(dict(env))
        return spawn(starter, run_dir, log, env)

    monkeypatch.setattr(WarmStarter, "spawn", seen)
    settings = make_settings(
        tmp_path / "data", database_url, max_cpu_jobs=1, warm_workers=warm, worker_nice=10
    )
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        job = client.post("/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": LONG})
        job_id = job.json()["id"]
        try:
            wait_state(client, job_id, ("running",))
            pid = job_pid(client, job_id)
            shown = _environ(pid)
            priority = os.getpriority(os.PRIO_PROCESS, pid)
            group = Path(f"/proc/{pid}/autogroup")  # the kernel's per-session scheduling group
            group_nice = group.read_text().split()[-1] if group.exists() else None
        finally:  # a failure above must not leave a long job training beside the next tests
            client.post(f"/api/jobs/{job_id}/cancel")
            wait_state(client, job_id, ("cancelled", "failed", "succeeded"))
    assert len(sent) == (1 if warm else 0)
    environ = sent[0] if warm else shown
    for env in (shown, environ):
        assert not [v for v in env.values() if "hunter2" in v], sorted(env)
        assert "THINKER_DATABASE_URL" not in env and "TINKER_API_KEY" not in env
    assert environ["HF_TOKEN"] == "hf_needed_for_gated_models"  # the engine may need it
    assert environ["TOKENIZERS_PARALLELISM"] == "false"  # a TOKEN in a name is no credential
    assert environ["PATH"] == os.environ["PATH"] and environ["CUDA_VISIBLE_DEVICES"] == ""
    # torch.compile's caches live in the data directory, so they survive restarts
    assert environ["TORCHINDUCTOR_CACHE_DIR"] == str(settings.compile_cache_dir)
    assert settings.compile_cache_dir.is_relative_to(tmp_path / "data")
    assert priority == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)  # THINKER_WORKER_NICE
    assert group_nice in (None, "10")  # its own session's group is nicer too, where there is one


def test_a_stopped_worker_is_reported_stale_then_killed_and_its_slot_freed(
    tmp_path: Path, database_url: str | None
) -> None:
    """SIGSTOP: the worker neither beats nor exits, and it ignores SIGTERM while stopped."""
    settings = make_settings(
        tmp_path / "data",
        database_url,
        max_cpu_jobs=1,
        # A niced worker on a loaded 2-core machine went 15 s without a beat while it started
        # (CI, a burner beside it) and was killed before the test could stop it.
        heartbeat_timeout_s=8,
        heartbeat_kill_s=40,
    )
    with TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        body = {"algorithm": "sl", "dataset_id": chat}
        # auto_resume 0: it stays interrupted (resuming by itself: test_auto_resume.py)
        long = {**body, "config": LONG, "auto_resume": 0}
        stopped = client.post("/api/jobs", json=long).json()["id"]
        waiting = client.post("/api/jobs", json={**body, "config": {**QUICK, "max_steps": 2}})
        # Running, not only beating: a worker beats while it starts too, and one stopped
        # then stays "starting" (a loaded machine let the test stop it there).
        deadline = time.time() + 120
        job = client.get(f"/api/jobs/{stopped}").json()
        while job["heartbeat_at"] is None or job["state"] != "running":
            assert time.time() < deadline, f"not running with a heartbeat: {job['state']}"
            time.sleep(0.2)
            job = client.get(f"/api/jobs/{stopped}").json()
        pid = job_pid(client, stopped)
        os.kill(pid, signal.SIGSTOP)
        try:
            seen = client.get(f"/api/jobs/{stopped}").json()
            deadline = time.time() + 120
            while not seen["stale"]:
                assert seen["state"] == "running", seen
                assert time.time() < deadline, "never reported stale"
                time.sleep(0.2)
                seen = client.get(f"/api/jobs/{stopped}").json()
            assert seen["heartbeat_age_s"] >= 8
            ended = wait_state(client, stopped, ("interrupted",))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert ended["reason"].startswith(f"the worker (pid {pid}) sent no heartbeat for ")
        assert (
            "(heartbeat_kill_s is 40 s): it was stopped or hung, and was killed" in ended["reason"]
        )
        assert ended["retryable"] is True and ended["stale"] is False
        assert not Path(f"/proc/{pid}").exists()  # killed and reaped
        events = client.get(f"/api/jobs/{stopped}/events").json()["data"]
        beats = [e["data"] for e in events if e["type"] == "heartbeat"]
        assert beats[-1]["stale"] is True and beats[-1]["silent_s"] >= 8
        # its slot went to the job that waited for it
        assert wait_state(client, waiting.json()["id"], ("succeeded",))["step"] == 2


def test_a_worker_holding_its_event_log_never_stalls_the_server(held: TestClient) -> None:
    """A worker stopped (SIGSTOP) or hung in the middle of writing an event holds the lock
    on its events.jsonl until it dies. The server appends its own events without waiting on
    that lock: it goes on answering, and its event goes in, in order, once the lock is free.
    (It used to wait in its event loop: a worker stopped mid-write froze the whole server.)"""
    chat = add_dataset(held, ARITHMETIC, "chat")
    job_id = held.post("/api/jobs", json={"algorithm": "sl", "dataset_id": chat}).json()["id"]
    log = platform_of(held).settings.runs_dir / job_id / "events.jsonl"
    with open(log, "a+b") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)  # as the stopped worker's write does
        cancelled = held.post(f"/api/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        assert held.get("/api/health").status_code == 200
        time.sleep(0.5)  # the manager ticks every 0.05 s here: its event waits
        assert [json.loads(line)["seq"] for line in log.read_text().splitlines()] == [1]
    deadline = time.time() + 60
    while len(events := held.get(f"/api/jobs/{job_id}/events").json()["data"]) < 2:
        assert time.time() < deadline, events
        time.sleep(0.05)
    assert [e["seq"] for e in events] == [1, 2]
    assert events[1]["data"] == {"state": "cancelled", "reason": "cancel requested"}


@contextlib.contextmanager
def full(directory: Path) -> Iterator[None]:
    """Fill `directory`'s file system to the last byte; free it afterwards."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    try:
        yield
    finally:
        filler.unlink()


@pytest.mark.postgresql
def test_a_job_created_on_a_full_disk_is_507_and_leaves_nothing(
    tmp_path: Path, database_url: str | None
) -> None:
    with tmpfs(tmp_path / "data", "8m") as data_dir:
        settings = make_settings(data_dir, database_url, max_cpu_jobs=0)
        with TestClient(create_app(settings)) as client:
            chat = add_dataset(client, ARITHMETIC, "chat")
            body = {"algorithm": "sl", "dataset_id": chat}
            with full(data_dir):
                response = client.post("/api/jobs", json=body)
                assert response.status_code == 507, response.text
                detail = response.json()["detail"]
                assert detail.startswith(
                    "no space left on device while creating the job's run directory"
                )
                assert list(settings.runs_dir.iterdir()) == [] and job_rows(client) == []
            created = client.post("/api/jobs", json=body)
            assert created.status_code == 201, created.text
            job_file = settings.runs_dir / created.json()["id"] / "job.json"
            assert json.loads(job_file.read_text())["job_id"] == created.json()["id"]


def test_a_disk_that_fills_while_training_names_the_checkpoint_and_the_free_space(
    tmp_path: Path, database_url: str | None
) -> None:
    """The run directories fit the job's logs but not its first checkpoint (adapter and
    Adam's moments, about 2 MiB): torch used to say `unexpected pos 721856 vs 721744`."""
    settings = make_settings(tmp_path / "data", database_url, max_cpu_jobs=1)
    with tmpfs(settings.runs_dir, "1m"), TestClient(create_app(settings)) as client:
        chat = add_dataset(client, ARITHMETIC, "chat")
        config = {**QUICK, "max_steps": 3, "save_every": 1}
        job = client.post(
            "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": config}
        )
        done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
        assert done["state"] == "failed", done
        reason = done["reason"]
        assert reason.startswith("no space left on device while saving the checkpoint at step 1 (")
        assert (
            f"free on {settings.runs_dir / done['id']}" in reason and "unexpected pos" not in reason
        )
        assert done["retryable"] is True  # free some space, then resume
        # Nothing half-written is kept: no temporary directory, and a checkpoint that is there
        # (the sampler weights may have fitted before the state did) is whole.
        run = settings.runs_dir / done["id"]
        assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
        for meta in run.rglob(STATE_FILE):  # every checkpoint directory holds one
            assert (meta.parent / MANIFEST_FILE).is_file()
            verify(meta.parent)  # raises DamagedError on a missing or changed file


def test_model_rename_and_export_on_a_full_disk_are_never_a_500(
    tmp_path: Path, database_url: str | None
) -> None:
    with tmpfs(tmp_path / "data", "24m") as data_dir:
        settings = make_settings(data_dir, database_url, max_cpu_jobs=1)
        with TestClient(create_app(settings)) as client:
            chat = add_dataset(client, ARITHMETIC, "chat")
            config = {**QUICK, "max_steps": 1, "lora_rank": 4}
            job = client.post(
                "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": config}
            )
            wait_state(client, job.json()["id"], ("succeeded",))
            (model,) = client.get("/api/models", params={"job_id": job.json()["id"]}).json()["data"]
            with full(data_dir):
                renamed = client.patch(f"/api/models/{model['id']}", json={"name": "kept"})
                # PostgreSQL keeps its data elsewhere; SQLite may still have room in its WAL
                assert renamed.status_code in (200, 507), renamed.text
                if renamed.status_code == 507:
                    assert renamed.json()["detail"].startswith("no space left on device")
                exported = client.post(f"/api/models/{model['id']}/export")
                assert exported.status_code == 507, exported.text
                assert exported.json()["detail"].startswith(
                    f"no space left on device while exporting model {model['id']} ("
                )
                assert list((data_dir / "exports").iterdir()) == []  # no temporary directory
            assert client.post(f"/api/models/{model['id']}/export").status_code == 200
