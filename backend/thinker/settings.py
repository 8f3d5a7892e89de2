"""Thinker's settings, read once from the environment (`THINKER_*`) or given by a test: the
data directory and the limits every part reads (server, job manager, services, CLI)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of `thinker serve`; each field is also the env var `THINKER_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="THINKER_", extra="ignore")

    data_dir: Path = Path.home() / ".thinker"  # database, datasets/, runs/, secrets/
    database_url: SecretStr | None = None  # None = SQLite in data_dir; may hold a password
    host: str = "127.0.0.1"  # beyond loopback, every call needs a token
    port: int = 8000
    require_auth: bool = False  # tokens even on loopback
    # Browser origins allowed to call the API (the Vite dev server by default); never "*".
    cors_origins: list[str] = ["http://127.0.0.1:5173", "http://localhost:5173"]
    max_upload_mb: int = Field(200, gt=0)  # per uploaded file
    max_line_bytes: int = Field(1_000_000, gt=0)  # per JSONL line / CSV row
    max_rows: int = Field(1_000_000, gt=0)  # per dataset
    max_cpu_jobs: int = Field(1, ge=0)  # local jobs at once without a GPU; 0 = hold them queued
    max_remote_jobs: int = Field(4, ge=0)  # Tinker jobs at once; 0 = hold them queued
    gpus: int | None = Field(None, ge=0)  # None = count the CUDA devices
    model_pool_size: int = Field(2, ge=1)  # loaded models kept for sampling (LRU)
    # Sampling: sequences decoded together per loaded model (1 = one request at a time), and
    # requests waiting per model beyond which a request gets 429.
    sample_batch_rows: int = Field(32, ge=1)
    sample_queue_size: int = Field(64, ge=1)
    # A worker touches its heartbeat every 2 s. One silent for heartbeat_timeout_s is reported
    # stale; for heartbeat_kill_s (e.g. stopped with SIGSTOP, or hung), it is killed and its
    # job interrupted (resumable), freeing its slot.
    heartbeat_timeout_s: float = Field(30.0, gt=0)
    heartbeat_kill_s: float = Field(300.0, gt=0)
    poll_interval_s: float = Field(0.2, gt=0)  # how often run directories are tailed
    # How often the deployments' production loop looks at schedules and running cycles
    deployment_poll_s: float = Field(5.0, gt=0)
    # Training workers run this much nicer than the server, so that the API and live events
    # stay responsive when training and other work share the CPU (0: the same priority).
    worker_nice: int = Field(10, ge=0, le=19)
    # CPU and Tinker jobs' workers are forked from a process that has imported torch,
    # transformers and the engine once (jobs/forkserver.py): about 7 s of CPU less per job.
    # false: every worker is a fresh interpreter, as GPU jobs' always are.
    warm_workers: bool = True
    # Where job workers run: subprocesses of the server ("local"), or Ray actors on a cluster
    # ("ray", at ray_address: "auto", "ray://host:port" or a local address), each asking Ray
    # for its GPU or CPU plus ray_resources (e.g. {"big_disk": 1}); jobs/ray_executor.py.
    executor: Literal["local", "ray"] = "local"
    ray_address: str = "auto"
    ray_resources: dict[str, float] = Field(default_factory=dict)
    register_examples: bool = True  # register the shipped example datasets at start-up
    static_dir: Path | None = None  # the built dashboard (frontend/dist) served at /

    @model_validator(mode="after")
    def _kill_after_stale(self) -> Settings:
        if self.heartbeat_kill_s <= self.heartbeat_timeout_s:
            raise ValueError(
                f"heartbeat_kill_s ({self.heartbeat_kill_s:g}) must be longer than "
                f"heartbeat_timeout_s ({self.heartbeat_timeout_s:g}): a worker is reported "
                "stale before it is killed"
            )
        return self

    @property
    def auth_required(self) -> bool:
        return self.require_auth or not _is_loopback(self.host)

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def datasets_dir(self) -> Path:
        return self.data_dir / "datasets"

    @property
    def imports_dir(self) -> Path:
        """The only directory the API imports local datasets from."""
        return self.data_dir / "imports"

    @property
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    @property
    def compile_cache_dir(self) -> Path:
        """Where job workers keep torch.compile's caches (Inductor's compiled graphs and
        Triton's kernels), so a job on a shape compiled before starts in seconds, also after
        a restart."""
        return self.data_dir / "cache" / "compile"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost, or 0.0.0.0-like: assume exposed
