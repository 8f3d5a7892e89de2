"""Tinker checkpoint archives in and out of the model library.

An archive is what Tinker's checkpoint download gives for a LoRA checkpoint (the tar that
`tinker_cookbook.weights.download` extracts, the files `tinker checkpoint download` writes):
a PEFT adapter, `adapter_config.json` (`r`, `lora_alpha`, `base_model_name_or_path`,
`target_modules`) and `adapter_model.safetensors` (`base_model.model.<module>.lora_A.weight`
of shape (r, in) and `.lora_B.weight` of shape (out, r); Tinker calls the output embedding
`model.unembed_tokens`), at the archive's root. Other files (Tinker's `checkpoint_complete`
marker, a README) are ignored. Imports read a tar (any compression), a zip or a directory.

An import checks the adapter against its base model on the CPU, then writes it as a local
sampler checkpoint and a training state (fresh optimizer) under a run directory of its own,
with a job row (`algorithm` "import", succeeded) that the library model belongs to: the
playground samples it, and a job continues it as `base_model: mdl_...`. An export writes the
same layout back, so the two round-trip bit for bit.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from sqlalchemy.ext.asyncio import AsyncSession
from torch import Tensor

from thinker.engine.local import checkpoints
from thinker.engine.local.models import ATTN_MODULES, LORA_ALPHA, MLP_MODULES
from thinker.engine.local.service import LocalServiceClient
from thinker.engine.local.training import ADAPTER_FILE
from thinker.errors import ConfigError
from thinker.files import storage_guard
from thinker.services.models import ADAPTER_CONFIG, adapter_files, export_dir
from thinker.settings import Settings
from thinker.store import Job, Model, new_id

PREFIX = "base_model.model."
TINKER_UNEMBED = "model.unembed_tokens"  # Tinker's name for the output embedding's adapter
LOCAL_UNEMBED = "lm_head"
IMPORT_NAME = "imported"  # the checkpoints' name in the import's run


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter as an archive holds it, its keys in PEFT's (local) names."""

    config: dict[str, object]
    tensors: dict[str, Tensor]

    @property
    def rank(self) -> int:
        rank = self.config["r"]
        assert isinstance(rank, int)  # read_archive checked it
        return rank

    def modules(self) -> set[str]:
        """The adapted layers' last names (q_proj, lm_head, ...)."""
        return {k.split(".lora_")[0].rsplit(".", 1)[-1] for k in self.tensors}


# ---- reading and checking ----------------------------------------------------------------
def read_archive(source: Path) -> Adapter:
    """The adapter in a Tinker archive (tar, zip or directory), checked field by field.

    Raises:
        ConfigError: The archive or one of its files is malformed (the file and field named).
    """
    files = _archive_files(source, (ADAPTER_CONFIG, ADAPTER_FILE))
    config = _read_config(files[ADAPTER_CONFIG])
    tensors = _read_tensors(files[ADAPTER_FILE], int(config["r"]))  # type: ignore[call-overload]
    scale = float(config["lora_alpha"]) / LORA_ALPHA  # type: ignore[arg-type]
    if scale != 1.0:  # the local engine's alpha is fixed: fold the difference into B
        tensors = {k: (v * scale).to(v.dtype) if ".lora_B." in k else v for k, v in tensors.items()}
    return Adapter({**config, "lora_alpha": LORA_ALPHA}, tensors)


def _archive_files(source: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    if source.is_dir():
        members = {p.relative_to(source).as_posix(): p for p in source.rglob("*") if p.is_file()}
        return _pick(source, {k: v.read_bytes for k, v in members.items()}, names)
    if not source.is_file():
        raise ConfigError(f"archive {source}: no such file or directory")
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            infos = {i.filename: i for i in archive.infolist() if not i.is_dir()}
            return _pick(source, {k: _reader(archive.read, v) for k, v in infos.items()}, names)
    try:
        with tarfile.open(source) as tar:
            readers = {}
            for member in tar.getmembers():
                if member.issym() or member.islnk():
                    raise ConfigError(f"archive {source}: {member.name} is a link; refused")
                if member.isfile():
                    readers[member.name] = _reader(_tar_read(tar), member)
            return _pick(source, readers, names)
    except tarfile.TarError as e:
        raise ConfigError(
            f"archive {source}: not a tar or zip archive, nor a directory ({e})"
        ) from None


def _tar_read(tar: tarfile.TarFile):  # type: ignore[no-untyped-def]
    def read(member: tarfile.TarInfo) -> bytes:
        handle = tar.extractfile(member)
        assert handle is not None  # a regular file
        return handle.read()

    return read


def _reader(read, item):  # type: ignore[no-untyped-def]
    return lambda: read(item)


def _pick(source: Path, readers: dict[str, object], names: tuple[str, ...]) -> dict[str, bytes]:
    """The files `names` at the archive's root, or in its one top-level folder."""
    for name in readers:
        parts = Path(name).parts
        if name.startswith("/") or ".." in parts:
            raise ConfigError(f"archive {source}: unsafe path {name!r} (outside the archive)")
    found: dict[str, bytes] = {}
    for wanted in names:
        hits = [n for n in readers if n.removeprefix("./").split("/")[-1] == wanted]
        hits = [n for n in hits if len(Path(n.removeprefix("./")).parts) <= 2]
        if not hits:
            have = sorted(readers)[:8] or "nothing"
            raise ConfigError(
                f"archive {source}: no {wanted} (a Tinker LoRA archive holds {ADAPTER_CONFIG} "
                f"and {ADAPTER_FILE}); it has {have}"
            )
        if len(hits) > 1:
            raise ConfigError(f"archive {source}: {wanted} appears {len(hits)} times: {hits}")
        found[wanted] = readers[hits[0]]()  # type: ignore[operator]
    return found


def _read_config(raw: bytes) -> dict[str, object]:
    try:
        config = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{ADAPTER_CONFIG}: not JSON ({e})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{ADAPTER_CONFIG}: expected a JSON object, got {type(config).__name__}")
    rank = config.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ConfigError(
            f"{ADAPTER_CONFIG}: field 'r' (the LoRA rank) must be an integer >= 1, got {rank!r}"
        )
    alpha = config.get("lora_alpha", rank)  # PEFT's default alpha is the rank's scale 1
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or alpha <= 0:
        raise ConfigError(
            f"{ADAPTER_CONFIG}: field 'lora_alpha' must be a number > 0, got {alpha!r}"
        )
    base = config.get("base_model_name_or_path")
    if base is not None and not isinstance(base, str):
        raise ConfigError(
            f"{ADAPTER_CONFIG}: field 'base_model_name_or_path' must be a string, got {base!r}"
        )
    return {**config, "lora_alpha": alpha}


def _read_tensors(raw: bytes, rank: int) -> dict[str, Tensor]:
    try:
        tensors = load_safetensors(raw)
    except Exception as e:  # safetensors raises its own SafetensorError, and others
        raise ConfigError(f"{ADAPTER_FILE}: not a safetensors file ({e})") from None
    if not tensors:
        raise ConfigError(f"{ADAPTER_FILE}: holds no tensors")
    local: dict[str, Tensor] = {}
    for key, tensor in tensors.items():
        if not key.startswith(PREFIX) or not key.endswith((".lora_A.weight", ".lora_B.weight")):
            raise ConfigError(
                f"{ADAPTER_FILE}: tensor {key!r} is not a LoRA weight (expected "
                f"{PREFIX}<module>.lora_A.weight or .lora_B.weight)"
            )
        if tensor.dim() != 2:
            raise ConfigError(
                f"{ADAPTER_FILE}: tensor {key!r} has shape {list(tensor.shape)}; only 2-D LoRA "
                "weights import (mixture-of-experts adapters with 3-D expert weights do not)"
            )
        local[key.replace(f"{PREFIX}{TINKER_UNEMBED}.", f"{PREFIX}{LOCAL_UNEMBED}.")] = tensor
    for key, tensor in local.items():
        twin = (
            key.replace(".lora_A.", ".lora_B.")
            if ".lora_A." in key
            else key.replace(".lora_B.", ".lora_A.")
        )
        if twin not in local:
            raise ConfigError(f"{ADAPTER_FILE}: {key!r} has no matching {twin.rsplit('.', 2)[-2]}")
        side = tensor.shape[0] if ".lora_A." in key else tensor.shape[1]
        if side != rank:
            raise ConfigError(
                f"{ADAPTER_FILE}: tensor {key!r} has shape {list(tensor.shape)}, which does not "
                f"fit rank r={rank} of {ADAPTER_CONFIG}"
            )
    return local


# ---- import ------------------------------------------------------------------------------
async def import_archive(
    session: AsyncSession,
    settings: Settings,
    source: Path,
    base_model: str | None = None,
    name: str | None = None,
) -> Model:
    """A library model made from the Tinker archive at `source`, on `base_model` (default: the
    archive's `base_model_name_or_path`).

    Raises:
        ConfigError: The archive is malformed, or does not fit the base model (named).
    """
    adapter = await asyncio.to_thread(read_archive, source)
    base = base_model or adapter.config.get("base_model_name_or_path")
    if not isinstance(base, str) or not base:
        raise ConfigError(
            f"{ADAPTER_CONFIG}: no 'base_model_name_or_path'; name the base model the adapter "
            "was trained on (base_model)"
        )
    job_id = new_id("job")
    storage = settings.runs_dir / job_id
    try:
        sampler_path, state_path = await asyncio.to_thread(
            _write_checkpoints, adapter, base, storage
        )
    except BaseException:
        shutil.rmtree(storage, ignore_errors=True)
        raise
    label = name or f"{source.name} on {base}"
    job = Job(
        id=job_id,
        name=label[:200],
        algorithm="import",
        backend="local",
        base_model=base,
        config={"archive": source.name, "format": "tinker"},
        state="succeeded",
        resource="cpu",
        finished_at=time.time(),
    )
    model = Model(
        id=new_id("mdl"),
        name=label[:300],
        job_id=job_id,
        base_model=base,
        backend="local",
        step=0,
        sampler_path=sampler_path,
        state_path=state_path,
        metrics={},
    )
    session.add_all([job, model])
    await session.commit()
    return model


async def import_upload(
    session: AsyncSession,
    settings: Settings,
    stream: BinaryIO,
    filename: str | None,
    base_model: str | None = None,
    name: str | None = None,
) -> Model:
    """`import_archive` of an uploaded archive, copied to a temporary file under the data
    directory first (tar and zip readers need a file)."""
    upload_dir = settings.data_dir / "uploads"
    upload_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=upload_dir) as tmp:
        source = Path(tmp) / Path(filename or "archive.tar").name
        with storage_guard("the uploaded archive"), source.open("wb") as out:
            await asyncio.to_thread(shutil.copyfileobj, stream, out)
        try:
            return await import_archive(session, settings, source, base_model, name)
        except ConfigError as e:  # name the upload, not the server's temporary copy of it
            uploaded = f"the uploaded {source.name}"
            named = ConfigError(str(e).replace(str(source), uploaded))
            named.problems = [p.replace(str(source), uploaded) for p in e.problems]
            raise named from None


def _write_checkpoints(adapter: Adapter, base_model: str, storage: Path) -> tuple[str, str]:
    """Load the adapter into a fresh local LoRA client of the same shape on the CPU, and save
    it as a sampler checkpoint and a training state; their tinker:// paths."""
    modules = adapter.modules()
    flags = {
        "train_attn": bool(modules & ATTN_MODULES),
        "train_mlp": bool(modules & MLP_MODULES),
        "train_unembed": LOCAL_UNEMBED in modules,
    }
    engine = LocalServiceClient(storage_dir=storage, device="cpu")
    try:
        client = engine.create_lora_training_client(base_model, adapter.rank, **flags).result()
    except (OSError, ValueError) as e:
        raise ConfigError(f"base_model {base_model!r}: cannot be loaded ({e})") from None
    shape = client.save_weights_for_sampler("shape").result().path
    shape_dir = checkpoints.resolve(shape, storage)
    expected = load_safetensors((shape_dir / ADAPTER_FILE).read_bytes())
    _check_fit(adapter, expected, base_model)
    path = checkpoints.CheckpointPath(client.run_id, "sampler_weights", IMPORT_NAME)
    meta = {**checkpoints.read_meta(shape_dir), "created": time.time(), "imported": True}
    config_bytes = (shape_dir / ADAPTER_CONFIG).read_bytes()

    def write(tmp: Path) -> None:
        (tmp / ADAPTER_CONFIG).write_bytes(config_bytes)
        (tmp / ADAPTER_FILE).write_bytes(save_safetensors(adapter.tensors))

    meta.pop("checksums", None)
    checkpoints.write_atomically(path.directory(storage), write, meta)
    shutil.rmtree(shape_dir)
    client.load_state(str(path)).result()
    state = client.save_state(IMPORT_NAME).result().path
    return str(path), state


def _check_fit(adapter: Adapter, expected: dict[str, Tensor], base_model: str) -> None:
    missing = sorted(set(expected) - set(adapter.tensors))
    unexpected = sorted(set(adapter.tensors) - set(expected))
    if missing or unexpected:
        raise ConfigError(
            f"{ADAPTER_FILE} does not fit {base_model!r} at rank {adapter.rank}: "
            f"missing {missing[:3]}, unexpected {unexpected[:3]} "
            f"({len(missing)} and {len(unexpected)} in all)"
        )
    for key, want in expected.items():
        if adapter.tensors[key].shape != want.shape:
            raise ConfigError(
                f"{ADAPTER_FILE}: tensor {key!r} has shape {list(adapter.tensors[key].shape)}; "
                f"{base_model!r} needs {list(want.shape)}"
            )


# ---- export ------------------------------------------------------------------------------
def archive_path(settings: Settings, model_id: str) -> Path:
    return export_dir(settings, model_id).with_name(f"{model_id}.tinker.tar")


def export_archive(settings: Settings, model: Model) -> Path:
    """The model's adapter as a Tinker archive (a tar in Tinker's layout), written once.

    Raises:
        ConflictError: A Tinker model (its weights are on Tinker's servers).
        DamagedError: The adapter fails its checksums.
    """
    target = archive_path(settings, model.id)
    if target.is_file():
        return target
    files = dict((name, path) for path, name in adapter_files(settings, model))
    config = json.loads(files[ADAPTER_CONFIG].read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = model.base_model
    tensors = load_safetensors(files[ADAPTER_FILE].read_bytes())
    tinker_names = {
        k.replace(f"{PREFIX}{LOCAL_UNEMBED}.", f"{PREFIX}{TINKER_UNEMBED}."): v
        for k, v in tensors.items()
    }
    members = {
        ADAPTER_CONFIG: json.dumps(config, indent=2, sort_keys=True).encode("utf-8"),
        ADAPTER_FILE: save_safetensors(tinker_names),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with tarfile.open(tmp, "w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), int(time.time())
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
