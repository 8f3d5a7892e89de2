"""`runs/<run>/metadata.json`: what a reviewer needs to reproduce a pipeline run.

It records the run name, config path and fingerprint (SHA-256 of the canonical JSON of the
resolved config), git commit, dataset SHA-256s, package versions, backend, the status,
timestamps and metrics of each stage (validate, train, eval), and the exit code. A config
with `stages:` or `algorithm: rlhf` (and a job's run of rlhf, whose worker writes this file
with the job's own fields) also gets `training_stages`, one record per training stage in order: its
name, algorithm, status (pending, running, passed, failed, interrupted), run directory,
the checkpoint it started from, its final checkpoint and final metrics, and the fingerprint
of its settings; a later command on the same run reads it to skip the finished stages.

It is rewritten atomically (a temporary file then `os.replace`) after every stage, so a
reader never sees half a file and a crash leaves the last complete state behind. Nothing in
it comes from the environment, and every string is scrubbed of the values of secret-looking
environment variables before it is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import subprocess
import time
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from thinker.data import dataset_sha256
from thinker.files import write_json_atomically
from thinker.runs import RunDir

if TYPE_CHECKING:  # kept out of the import so that `scrub` costs nothing to import
    from collections.abc import Sequence

    from pydantic import BaseModel

    from thinker.pipeline.config import PipelineConfig, TrainingSection

PACKAGES = ("thinker", "torch", "transformers", "peft", "tinker")
StageName = Literal["validate", "train", "eval"]
StageStatus = Literal["running", "passed", "failed", "skipped", "interrupted"]
TRAINING_STAGES = "training_stages"

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would scrub ordinary text


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with second precision, e.g. 2025-11-10T18:05:42Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_fingerprint(config: PipelineConfig) -> str:
    """SHA-256 of the resolved config as canonical JSON (sorted keys, no whitespace)."""
    return _sha256_json(config.fingerprint_json())


def section_fingerprint(section: BaseModel) -> str:
    """SHA-256 of one training section's settings, as canonical JSON.

    `micro_batch_size` came later and changes no result (only how a step is split into
    passes): left automatic it is not counted, so earlier runs keep their fingerprint."""
    settings = section.model_dump(mode="json")
    if settings.get("micro_batch_size", 0) is None:
        del settings["micro_batch_size"]
    return _sha256_json(settings)


def _sha256_json(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def git_commit(directory: Path) -> str | None:
    """The HEAD commit of the repository holding `directory`; None outside git or on failure."""
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that decide a run's numbers (None: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = platform.python_version()
    return versions


def dataset_hashes(config: PipelineConfig) -> dict[str, dict[str, str]]:
    """`{"training.dataset": {"path": ..., "sha256": ...}, ...}` for every dataset file named
    (`stages[0].dataset`, ... in the stages form)."""
    named: dict[str, Path | None] = dict(config.datasets())
    named["evaluation.dataset"] = config.evaluation.dataset
    named["data_validation.path"] = config.data_validation.path if config.data_validation else None
    return {
        role: {"path": str(path), "sha256": dataset_sha256(path)}
        for role, path in named.items()
        if path is not None and Path(path).is_file()
    }


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names look like credentials."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)  # longest first: no partial leftovers


def scrub(value: Any, secrets: list[str] | None = None) -> Any:
    """`value` with every secret environment value replaced by `***`, recursively."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, secrets) for v in value]
    return value


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinities as None: metadata.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


class RunMetadata:
    """The metadata of one run directory; every change is written to disk at once.

    A second command on the same run (`thinker eval --run-name X` after `thinker train`)
    loads the file and updates it: its stages are kept, the new ones added or replaced.
    """

    def __init__(self, run_dir: Path, data: dict[str, Any]) -> None:
        self.run_dir = Path(run_dir)
        self.path = RunDir(self.run_dir).metadata
        self.data = data
        self._started: dict[str, float] = {}
        self._open_training_stage: tuple[str, float] | None = None  # (name, monotonic start)

    @classmethod
    def open(
        cls, run_dir: Path, run_name: str, config: PipelineConfig, command: str
    ) -> RunMetadata:
        """Load the run's metadata (or start it) and record this command's config and context."""
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = RunDir(run_dir).metadata
        data: dict[str, Any] = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                data = {}
        hashes = dataset_hashes(config)
        first_dataset = next(iter(config.datasets()), "")  # the first stage's training set
        data.update(
            {
                "run_name": run_name,
                "run_dir": str(run_dir),
                "command": command,
                "status": "running",
                "exit_code": None,
                "created_at": data.get("created_at", utc_now()),
                "updated_at": utc_now(),
                "config_path": str(config.source) if config.source else None,
                "config_name": config.name,
                "config_fingerprint": config_fingerprint(config),
                "config": config.fingerprint_json(),
                "git_commit": git_commit(config.source.parent if config.source else Path.cwd()),
                "backend": config.backend,
                "base_model": config.base_model,
                "dataset_sha256": hashes.get(first_dataset, {}).get("sha256"),
                "datasets": hashes,
                "versions": package_versions(),
            }
        )
        data.setdefault("stages", {})
        meta = cls(run_dir, data)
        meta.plan_training_stages(config.stage_sections() or [])
        return meta

    @classmethod
    def load(cls, run_dir: Path) -> RunMetadata:
        """The run's metadata as it is on disk (empty when there is none): a job's worker
        records its training stages in the metadata.json it wrote."""
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        path = RunDir(run_dir).metadata
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        except (OSError, json.JSONDecodeError):
            data = {}
        return cls(run_dir, data if isinstance(data, dict) else {})

    def plan_training_stages(self, stages: Sequence[TrainingSection]) -> None:
        """List the training stages that will run (none: one algorithm in the run directory);
        the records of stages listed before are kept, so that finished ones are skipped."""
        if stages:
            kept = {r.get("name"): r for r in self.data.get(TRAINING_STAGES, [])}
            self.data[TRAINING_STAGES] = [
                kept.get(s.name) or {"name": s.name, "algorithm": s.algorithm, "status": "pending"}
                for s in stages
            ]
        else:
            self.data.pop(TRAINING_STAGES, None)
        self.write()

    def start_stage(self, stage: StageName) -> None:
        self._started[stage] = time.monotonic()
        self.data["stages"][stage] = {"status": "running", "started_at": utc_now()}
        self.write()

    def skip_stage(self, stage: StageName, reason: str) -> None:
        self.data["stages"][stage] = {"status": "skipped", "reason": reason, "at": utc_now()}
        self.write()

    def finish_stage(
        self,
        stage: StageName,
        status: StageStatus,
        metrics: dict[str, Any] | None = None,
        error: str | None = None,
        **details: Any,
    ) -> None:
        """Close a stage with its status, metrics and anything else worth keeping."""
        record = self.data["stages"].setdefault(stage, {"started_at": utc_now()})
        record.update(status=status, finished_at=utc_now(), metrics=metrics or {}, **details)
        if stage in self._started:
            record["duration_s"] = round(time.monotonic() - self._started.pop(stage), 3)
        if error is not None:
            record["error"] = error
        self.write()

    def training_stage(self, name: str) -> dict[str, Any]:
        """The record of training stage `name` (stages form): status, checkpoints, metrics."""
        return next(r for r in self.data[TRAINING_STAGES] if r["name"] == name)

    def start_training_stage(self, name: str, **details: Any) -> None:
        """Mark training stage `name` running, with where it writes and starts from."""
        record = self.training_stage(name)
        kept = {k: record[k] for k in ("name", "algorithm")}
        record.clear()
        record.update(kept, status="running", started_at=utc_now(), **details)
        self._open_training_stage = (name, time.monotonic())
        self.write()

    def finish_training_stage(
        self, status: StageStatus, error: str | None = None, **details: Any
    ) -> None:
        """Close the running training stage with its status and final checkpoint and metrics."""
        if self._open_training_stage is None:
            return
        name, started = self._open_training_stage
        record = self.training_stage(name)
        record.update(status=status, finished_at=utc_now(), **details)
        record["duration_s"] = round(time.monotonic() - started, 3)
        if error is not None:
            record["error"] = error
        self._open_training_stage = None
        self.write()

    def finish(self, exit_code: int, status: str | None = None) -> None:
        """Close the run; a stage still open (an interrupt mid-stage) is closed with `status`."""
        status = status or ("succeeded" if exit_code == 0 else "failed")
        closing: StageStatus = "interrupted" if status == "interrupted" else "failed"
        self.finish_training_stage(closing)
        for stage in list(self._started):
            self.finish_stage(stage, closing)  # type: ignore[arg-type]
        self.data.update(
            status=status,
            exit_code=exit_code,
            finished_at=utc_now(),
        )
        self.write()

    def write(self) -> None:
        self.data["updated_at"] = utc_now()
        write_json_atomically(self.path, json_safe(scrub(self.data)))
