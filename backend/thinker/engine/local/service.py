"""The local backend's ServiceClient: builds training and sampling clients in this process."""

from __future__ import annotations

import os
import re
import shutil
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from peft import PeftModel, set_peft_model_state_dict
from safetensors.torch import load_file
from tinker import types
from torch import Tensor
from transformers import PreTrainedModel

from thinker.engine import protocols
from thinker.engine.futures import EngineFuture, FairExecutor, Lane
from thinker.engine.local import checkpoints, data_parallel, sharding
from thinker.engine.local.hub import capabilities
from thinker.engine.local.models import (
    Placement,
    Quantization,
    add_lora,
    attach_lora,
    load_base_model,
    load_tokenizer,
    lora_target_modules,
    on_thread_start,
)
from thinker.engine.local.rest import LocalRestClient
from thinker.engine.local.sampling import LocalSamplingClient, SharedWeights
from thinker.engine.local.threads import apply_threads
from thinker.engine.local.training import (
    ADAPTER_FILE,
    LocalTrainingClient,
    LoraSpec,
    adapter_parameters,
)
from thinker.errors import BackendError, ConfigError


def default_storage_dir() -> Path:
    env = os.environ.get("THINKER_STORAGE_DIR")
    return Path(env) if env else Path.home() / ".thinker" / "storage"


class LocalServiceClient:
    def __init__(
        self,
        storage_dir: str | Path | None = None,
        device: str | None = None,
        quantization: Quantization = None,
        share_samplers: bool = True,
    ) -> None:
        """`share_samplers=False`: a sampler of a saved adapter gets a base model of its own
        with the adapter merged in (as the playground's batching scheduler needs) instead of
        an adapter slot on the base this service shares between its clients."""
        self.storage_dir = Path(storage_dir) if storage_dir else default_storage_dir()
        self.placement = Placement.choose(device, quantization)
        self._share_samplers = share_samplers
        # The newest live training client per base model: samplers of that base model (or of
        # an adapter that fits it) reuse its weights instead of loading a second copy.
        self._hosts: weakref.WeakValueDictionary[str, LocalTrainingClient] = (
            weakref.WeakValueDictionary()
        )
        # The loaded base model per base model name that training clients share, each with
        # its own adapter; it goes once no client holds it.
        self._bases: weakref.WeakValueDictionary[str, SharedBase] = weakref.WeakValueDictionary()

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> EngineFuture[LocalTrainingClient]:
        if rank < 1:
            raise ConfigError(f"LoRA rank must be at least 1, got {rank}")
        spec = LoraSpec(base_model, rank, seed, train_mlp, train_attn, train_unembed)
        return EngineFuture.completed(self._training_client(spec))

    def create_training_client_from_state(self, path: str) -> EngineFuture[LocalTrainingClient]:
        return EngineFuture.completed(self._from_state(path, with_optimizer=False))

    def create_training_client_from_state_with_optimizer(
        self, path: str
    ) -> EngineFuture[LocalTrainingClient]:
        return EngineFuture.completed(self._from_state(path, with_optimizer=True))

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> EngineFuture[LocalSamplingClient]:
        return EngineFuture.completed(self._sampling_client(model_path, base_model))

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        """The base models this engine can load without the network (hub.py)."""
        return capabilities()

    def copy_weights(
        self, path: str, *, ttl_seconds: int | None = None, weights_access_token: str | None = None
    ) -> EngineFuture[str]:
        """A copy of the checkpoint at `path` under a new run (`copy-<hex>`), the same kind and
        name; its files are hard links to the source's where the file system allows, so no
        bytes are duplicated (as on Tinker). The copy's run is not trained on; `ttl_seconds`
        is the copy's TTL (the source's does not carry over)."""
        checkpoints.check_ttl(ttl_seconds)
        source = checkpoints.resolve(path, self.storage_dir)
        checkpoints.verify(source)
        meta = checkpoints.read_meta(source)
        if not checkpoints.is_path(path):
            raise ConfigError(f"copy_weights takes a tinker:// path, got {path!r}")
        original = checkpoints.parse(path)
        copy = checkpoints.CheckpointPath(
            f"copy-{uuid.uuid4().hex[:8]}", original.kind, original.name
        )
        # written anew for the copy
        kept = {checkpoints.STATE_FILE, checkpoints.MANIFEST_FILE, checkpoints.EXPIRY_FILE}

        def write(tmp: Path) -> None:
            for file in source.rglob("*"):
                if file.is_dir() or file.relative_to(source).as_posix() in kept:
                    continue
                target = tmp / file.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(file, target)
                except OSError:  # another file system: a plain copy
                    shutil.copy2(file, target)

        copied = {**meta, "run_id": copy.run_id, "copied_from": path}
        checkpoints.write_atomically(
            copy.directory(self.storage_dir), write, copied, ttl_seconds=ttl_seconds
        )
        return EngineFuture.completed(str(copy))

    def create_rest_client(self) -> LocalRestClient:
        """The SDK's REST operations on runs and checkpoints, over this storage directory."""
        return LocalRestClient(self.storage_dir)

    # ------------------------------------------------------------------------------------
    def _training_client(self, spec: LoraSpec) -> LocalTrainingClient:
        """A client with a fresh adapter: on the base model another client of this service
        already holds when there is one (one copy of the base weights, one worker taking
        the clients' calls in turn), else on a newly loaded one."""
        run_id = f"{_slug(spec.base_model)}-{uuid.uuid4().hex[:8]}"
        shared = self._bases.get(spec.base_model)
        if shared is None:
            shared, adapter = self._new_base(spec, run_id), "default"
        else:
            adapter = f"a{uuid.uuid4().hex[:8]}"
            shared.add(adapter, spec)
        lane = shared.lane(adapter)
        client = LocalTrainingClient(
            run_id,
            spec,
            shared.model,
            load_tokenizer(spec.base_model),
            self.placement,
            self.storage_dir,
            adapter=adapter,
            executor=lane,
        )
        # The lane (the client's executor) holds the shared base: it lives while a client does.
        weakref.finalize(client, shared.release, adapter, lane)
        self._hosts[spec.base_model] = client
        return client

    def _new_base(self, spec: LoraSpec, name: str) -> SharedBase:
        """The base model loaded, with `spec`'s adapter as "default", for clients to share;
        sharded over the ranks of a data-parallel run when it is too large for one device."""
        group = data_parallel.Group.current()
        why = sharding.decide(spec.base_model, self.placement, group)
        if group is not None and why is not None:
            flags = (spec.train_attn, spec.train_mlp, spec.train_unembed)
            model = sharding.load(
                spec.base_model, self.placement, group, spec.rank, spec.seed, flags, why
            )
            shared = SharedBase(model, name, self.placement.device)
            self._bases[spec.base_model] = shared
            return shared
        base = load_base_model(spec.base_model, self.placement)
        if self.placement.device.type == "cpu":
            apply_threads(base)
        if self.placement.quantization is not None:
            # QLoRA is the memory-first mode: keep one layer's activations at a time and
            # recompute the rest in backward (about a third more compute).
            base.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        targets = lora_target_modules(base, spec.train_attn, spec.train_mlp, spec.train_unembed)
        model = attach_lora(base, spec.rank, spec.seed, targets)
        shared = SharedBase(model, name, self.placement.device)
        self._bases[spec.base_model] = shared
        return shared

    def _from_state(self, path: str, with_optimizer: bool) -> LocalTrainingClient:
        meta = checkpoints.read_meta(checkpoints.resolve(path, self.storage_dir))
        spec = LoraSpec(
            meta["base_model"],
            meta["rank"],
            meta["seed"],
            meta["train_mlp"],
            meta["train_attn"],
            meta["train_unembed"],
        )
        client = self._training_client(spec)
        load = client.load_state_with_optimizer if with_optimizer else client.load_state
        load(path).result()
        return client

    def _sampling_client(
        self, model_path: str | None, base_model: str | None
    ) -> LocalSamplingClient:
        directory, meta = None, None
        if model_path is not None:
            directory = checkpoints.resolve(model_path, self.storage_dir)
            checkpoints.verify(directory)
            meta = checkpoints.read_meta(directory)
            if meta["kind"] == "external_weights":
                raise ConfigError(
                    f"{model_path} is a whole model in Hugging Face format, not an adapter: "
                    f"sample it with create_sampling_client(base_model={str(directory)!r})"
                )
            base_model = meta["base_model"]
        assert base_model is not None
        host = self._hosts.get(base_model)
        if host is not None and (meta is None or _same_adapter_shape(host.spec, meta)):
            adapter = None
            if directory is not None:
                adapter = load_file(directory / ADAPTER_FILE, device=str(self.placement.device))
            return host.shared_sampling_client(model_path, adapter)
        if (
            directory is not None
            and meta is not None
            and self._share_samplers
            and self.placement.quantization is None  # 4-bit bases keep the path below
        ):
            return self._adapter_sampler(base_model, model_path, directory, meta)
        base = load_base_model(base_model, self.placement)
        if self.placement.device.type == "cpu":
            apply_threads(base)
        model = _merged(base, directory) if directory is not None else base
        return LocalSamplingClient(
            model, load_tokenizer(base_model), base_model, model_path, self.placement.device
        )

    def _adapter_sampler(
        self, base_model: str, model_path: str | None, directory: Path, meta: dict[str, Any]
    ) -> LocalSamplingClient:
        """A sampler of a saved adapter in an adapter slot of its own on the base model this
        service holds (one copy of the base weights for every sampler and training client of
        that base, whatever their adapters' shapes), or on a newly loaded base that later
        clients share. Its calls run on the base's worker with its slot active; the slot goes
        with the sampler."""
        spec = LoraSpec(
            base_model,
            meta["rank"],
            meta["seed"],
            meta["train_mlp"],
            meta["train_attn"],
            meta["train_unembed"],
        )
        state = load_file(directory / ADAPTER_FILE, device=str(self.placement.device))
        shared = self._bases.get(base_model)
        if shared is None:
            shared, slot = (
                self._new_base(spec, f"{_slug(base_model)}-{uuid.uuid4().hex[:8]}"),
                "default",
            )
            shared.load(slot, state, str(model_path))
        else:
            slot = f"s{uuid.uuid4().hex[:8]}"
            shared.add(slot, spec, state, str(model_path))
        lane = shared.lane(slot)
        weights = SharedWeights(shared.model, lane, None, live=True, adapter_name=slot)
        sampler = LocalSamplingClient(
            shared.model,
            load_tokenizer(base_model),
            base_model,
            model_path,
            self.placement.device,
            weights,
        )
        weakref.finalize(sampler, shared.release, slot, lane)
        return sampler


class SharedBase:
    """One loaded base model with the adapters of the training clients on it, and the one
    worker that runs their calls, each client's in order and the clients in turn
    (FairExecutor). A client's calls activate its adapter first, so each trains and samples
    its own adapter alone; the others' weights, gradients and optimizer states are untouched.
    """

    def __init__(self, model: PeftModel, name: str, device: torch.device) -> None:
        self.model = model
        self.executor = FairExecutor(f"train-{name}", on_thread_start(device))
        self._active: str | None = model.active_adapter

    def lane(self, adapter: str) -> Lane:
        return self.executor.lane(lambda: self._activate(adapter))

    def add(
        self,
        adapter: str,
        spec: LoraSpec,
        state: dict[str, Tensor] | None = None,
        source: str = "",
    ) -> None:
        """A fresh adapter of `spec`'s shape, added on the worker (between other clients'
        calls), for training (refused when the device has no room for it and its optimizer
        state); or, given the `state` of a saved adapter (from `source`), that adapter to
        sample (refused when the device has no room for its weights)."""
        if sharding.is_sharded(self.model):
            raise ConfigError(
                "this base model is sharded over the GPUs of a data-parallel run (FSDP2) and "
                "holds one adapter, the job's: a second adapter or a sampler of another is not "
                "supported on a sharded model"
            )
        lane = self.executor.lane()
        try:
            lane.submit(self._add, adapter, spec, state, source).result()
        finally:
            lane.close()

    def load(self, adapter: str, state: dict[str, Tensor], source: str) -> None:
        """The weights of adapter `adapter` (of the same shape) replaced by a saved one's."""
        lane = self.executor.lane()
        try:
            lane.submit(self._load, adapter, state, source).result()
        finally:
            lane.close()

    def release(self, adapter: str, lane: Lane) -> None:
        """A client is gone: its adapter goes once its queued calls have run (nothing to do
        once the interpreter is exiting and the worker has stopped)."""
        try:
            lane.submit(self._delete, adapter)
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            return
        lane.close()

    def _add(
        self, adapter: str, spec: LoraSpec, state: dict[str, Tensor] | None, source: str
    ) -> None:
        base: PreTrainedModel = self.model.get_base_model()  # type: ignore[assignment]
        targets = lora_target_modules(base, spec.train_attn, spec.train_mlp, spec.train_unembed)
        add_lora(self.model, adapter, spec.rank, spec.seed, targets)
        if state is not None:
            try:
                self._load(adapter, state, source)
            except Exception:
                self._delete(adapter)
                raise
        device = next(self.model.parameters()).device
        if device.type != "cuda":
            return
        # Its weights exist now; training adds as much for the gradients and twice for AdamW.
        weights = sum(p.numel() * p.element_size() for p in adapter_parameters(self.model, adapter))
        needed = weights if state is not None else 3 * weights
        free, _ = torch.cuda.mem_get_info(device)
        if free < needed + ADAPTER_HEADROOM_BYTES:
            self._delete(adapter)
            what = "its weights" if state is not None else "its gradients and optimizer state"
            raise BackendError(
                f"no room on {device} for another adapter on {spec.base_model}: {what} "
                f"need {needed / 2**20:,.0f} MiB and {free / 2**20:,.0f} MiB are free; "
                "finish another client or use a lower rank"
            )

    def _load(self, adapter: str, state: dict[str, Tensor], source: str) -> None:
        result = set_peft_model_state_dict(self.model, state, adapter_name=adapter)
        unexpected: list[str] = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise ConfigError(
                f"{source} does not fit its recorded adapter shape: unexpected keys "
                f"{unexpected[:3]}"
            )

    def _activate(self, adapter: str) -> None:
        if self._active != adapter:
            self.model.set_adapter(adapter)
            self._active = adapter

    def _delete(self, adapter: str) -> None:
        others = [name for name in self.model.peft_config if name != adapter]
        if adapter in self.model.peft_config and others:
            self._activate(others[0])  # PEFT warns when the active adapter is deleted
            self.model.delete_adapter(adapter)


# What a training pass needs beyond the adapter's own state, kept free when one is added.
ADAPTER_HEADROOM_BYTES = 1 << 30


def _same_adapter_shape(spec: LoraSpec, meta: dict[str, object]) -> bool:
    keys = ("rank", "train_mlp", "train_attn", "train_unembed")
    return all(getattr(spec, k) == meta.get(k) for k in keys)


def _merged(model: PreTrainedModel, directory: Path) -> PreTrainedModel | PeftModel:
    """The base model with the adapter in `directory` folded into its weights (faster decode)."""
    peft_model = PeftModel.from_pretrained(model, directory, is_trainable=False)
    if getattr(model, "is_loaded_in_4bit", False):
        return peft_model  # 4-bit weights cannot absorb an adapter; keep it separate
    merged: PreTrainedModel = peft_model.merge_and_unload()
    return merged


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:40] or "model"


if TYPE_CHECKING:  # mypy proves that the local engine keeps the contract; nothing runs

    def _keeps_the_contract(
        service: LocalServiceClient, training: LocalTrainingClient, sampling: LocalSamplingClient
    ) -> tuple[
        protocols.ServiceClient,
        protocols.TrainingClient,
        protocols.SamplingClient,
        protocols.MemoryBudgeted,
    ]:
        return service, training, sampling, training
