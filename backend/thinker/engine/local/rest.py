"""The local engine's `RestClient`: the tinker SDK's REST operations on runs and checkpoints,
answered from the checkpoint storage directory (`<storage_dir>/<run>/<kind>/<name>/`).

A run here is a training client's run id; its checkpoints are what `save_state` and
`save_weights_for_sampler` wrote. The operations on runs and checkpoints that have a local
meaning are here (listing, reading, deleting, TTLs, publishing); the account-level ones
(billing, audit log, sessions, projects) belong to a hosted service and are not offered.

Publishing records the checkpoint's `public` flag, which listings show. Every token of a
Thinker server may read every checkpoint on it, so the flag grants no access here: it says
which checkpoints their owner means to share, and it is kept when one is exported.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tinker import types

from thinker.engine.futures import EngineFuture
from thinker.engine.local import checkpoints
from thinker.engine.local.hub import capabilities
from thinker.errors import CheckpointError, ConfigError

_TYPES: dict[str, types.CheckpointType] = {
    "weights": "training",
    "sampler_weights": "sampler",
    "external_weights": "external",
}
OWNER = "local"  # the `model_owner` of every local run


class LocalRestClient:
    def __init__(self, storage_dir: Path) -> None:
        self._storage_dir = storage_dir

    # ---- runs -----------------------------------------------------------------------------
    def list_training_runs(
        self,
        limit: int = 20,
        offset: int = 0,
        access_scope: str = "owned",
        project_id: str | None = None,
    ) -> EngineFuture[types.TrainingRunsResponse]:
        """The runs that saved a checkpoint here, the most recently active first."""
        runs = sorted(
            (r for r in (self._run(d.name) for d in self._run_dirs()) if r is not None),
            key=lambda r: r.last_request_time,
            reverse=True,
        )
        cursor = types.Cursor(offset=offset, limit=limit, total_count=len(runs))
        page = runs[offset : offset + limit]
        return EngineFuture.completed(types.TrainingRunsResponse(training_runs=page, cursor=cursor))

    def get_training_run(
        self, training_run_id: str, access_scope: str = "owned"
    ) -> EngineFuture[types.TrainingRun]:
        run = self._run(training_run_id)
        if run is None:
            raise CheckpointError(f"no training run {training_run_id!r} in {self._storage_dir}")
        return EngineFuture.completed(run)

    def get_training_run_by_tinker_path(
        self, tinker_path: str, access_scope: str = "owned"
    ) -> EngineFuture[types.TrainingRun]:
        return self.get_training_run(checkpoints.parse(tinker_path).run_id)

    def get_weights_info_by_tinker_path(
        self, tinker_path: str
    ) -> EngineFuture[types.WeightsInfoResponse]:
        meta = checkpoints.read_meta(checkpoints.resolve(tinker_path, self._storage_dir))
        return EngineFuture.completed(
            types.WeightsInfoResponse(
                base_model=meta["base_model"],
                is_lora=True,
                lora_rank=meta["rank"],
                train_unembed=meta["train_unembed"],
                train_mlp=meta["train_mlp"],
                train_attn=meta["train_attn"],
            )
        )

    # ---- checkpoints ---------------------------------------------------------------------
    def list_checkpoints(self, training_run_id: str) -> EngineFuture[types.CheckpointsListResponse]:
        found = self._checkpoints(training_run_id)
        return EngineFuture.completed(types.CheckpointsListResponse(checkpoints=found))

    def list_user_checkpoints(
        self, limit: int = 100, offset: int = 0
    ) -> EngineFuture[types.CheckpointsListResponse]:
        """Every checkpoint of every run, the newest first."""
        found = [c for d in self._run_dirs() for c in self._checkpoints(d.name)]
        found.sort(key=lambda c: c.time, reverse=True)
        cursor = types.Cursor(offset=offset, limit=limit, total_count=len(found))
        page = found[offset : offset + limit]
        return EngineFuture.completed(
            types.CheckpointsListResponse(checkpoints=page, cursor=cursor)
        )

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> EngineFuture[None]:
        """`checkpoint_id` as the SDK gives it: `weights/<name>` or `sampler_weights/<name>`."""
        return self.delete_checkpoint_from_tinker_path(
            f"{checkpoints.SCHEME}{training_run_id}/{checkpoint_id}"
        )

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> EngineFuture[None]:
        directory = checkpoints.resolve(tinker_path, self._storage_dir)
        shutil.rmtree(directory)
        return EngineFuture.completed(None)

    def set_checkpoint_ttl_from_tinker_path(
        self, tinker_path: str, ttl_seconds: int | None
    ) -> EngineFuture[None]:
        """Expire the checkpoint `ttl_seconds` from now (None: never), as on Tinker."""
        checkpoints.set_ttl(checkpoints.resolve(tinker_path, self._storage_dir), ttl_seconds)
        return EngineFuture.completed(None)

    def publish_checkpoint_from_tinker_path(self, tinker_path: str) -> EngineFuture[None]:
        checkpoints.set_public(checkpoints.resolve(tinker_path, self._storage_dir), True)
        return EngineFuture.completed(None)

    def unpublish_checkpoint_from_tinker_path(self, tinker_path: str) -> EngineFuture[None]:
        checkpoints.set_public(checkpoints.resolve(tinker_path, self._storage_dir), False)
        return EngineFuture.completed(None)

    def get_external_weights_urls(
        self, tinker_path: str
    ) -> EngineFuture[types.ExternalWeightsUrlsResponse]:
        """A `file://` URL per file of a `save_weights_external` checkpoint: in process the
        files are on this machine (a server gives signed HTTP links instead)."""
        parsed = checkpoints.parse(tinker_path)
        if parsed.kind != "external_weights":
            raise ConfigError(
                f"{tinker_path!r}: URLs are given for external weights checkpoints "
                "(tinker://<run>/external_weights/<name>)"
            )
        directory = checkpoints.resolve(tinker_path, self._storage_dir)
        checkpoints.verify(directory)
        urls = {
            p.relative_to(directory).as_posix(): p.resolve().as_uri()
            for p in sorted(directory.rglob("*"))
            if p.is_file() and not p.name.startswith(".")
        }
        expires = datetime.now(UTC) + timedelta(hours=1)  # as a server's links; files stay
        return EngineFuture.completed(types.ExternalWeightsUrlsResponse(urls=urls, expires=expires))

    def get_server_capabilities(self) -> EngineFuture[types.GetServerCapabilitiesResponse]:
        return EngineFuture.completed(capabilities())

    def get_telemetry(self) -> None:
        return None

    # ---- reading the storage ---------------------------------------------------------------
    def _run_dirs(self) -> list[Path]:
        if not self._storage_dir.is_dir():
            return []
        return [d for d in self._storage_dir.iterdir() if d.is_dir() and _is_name(d.name)]

    def _checkpoints(self, run_id: str) -> list[types.Checkpoint]:
        found = []
        for kind, checkpoint_type in _TYPES.items():
            folder = self._storage_dir / run_id / kind
            if not folder.is_dir():
                continue
            for directory in sorted(folder.iterdir()):
                meta = _meta(directory)
                if meta is None or checkpoints.expire_if_due(directory):
                    continue
                found.append(
                    types.Checkpoint(
                        checkpoint_id=f"{kind}/{directory.name}",
                        checkpoint_type=checkpoint_type,
                        time=datetime.fromtimestamp(meta["created"], UTC),
                        tinker_path=str(checkpoints.CheckpointPath(run_id, kind, directory.name)),  # type: ignore[arg-type]
                        size_bytes=sum(
                            f.stat().st_size for f in directory.rglob("*") if f.is_file()
                        ),
                        user_metadata=meta.get("user_metadata"),
                        expires_at=checkpoints.expires_at(directory),
                        public=checkpoints.is_public(directory),
                    )
                )
        return sorted(found, key=lambda c: c.time)

    def _run(self, run_id: str) -> types.TrainingRun | None:
        if not _is_name(run_id):
            return None
        found = self._checkpoints(run_id)
        if not found:
            return None
        last = found[-1]
        meta = _meta(self._storage_dir / run_id / last.checkpoint_id)
        assert meta is not None
        training = [c for c in found if c.checkpoint_type == "training"]
        sampler = [c for c in found if c.checkpoint_type == "sampler"]
        return types.TrainingRun(
            training_run_id=run_id,
            base_model=meta["base_model"],
            model_owner=OWNER,
            is_lora=True,
            lora_rank=meta["rank"],
            last_request_time=last.time,
            last_checkpoint=training[-1] if training else None,
            last_sampler_checkpoint=sampler[-1] if sampler else None,
        )


def _meta(directory: Path) -> dict[str, Any] | None:
    """A checkpoint's metadata; None for anything else in the folder (a temporary directory
    of a save in progress, a damaged checkpoint)."""
    if directory.name.startswith(".") or not directory.is_dir():
        return None
    try:
        return checkpoints.read_meta(directory)
    except Exception:  # noqa: BLE001 - not a readable checkpoint: not listed
        return None


def _is_name(name: str) -> bool:
    try:
        checkpoints.check_name(name)
    except CheckpointError:
        return False
    return True
