"""The local training client: a LoRA adapter on a base model, with the Tinker client's methods.

Every method returns an `EngineFuture` at once; the work runs on the client's own worker
thread in submission order. Gradients accumulate across `forward_backward` calls until
`optim_step` applies them (AdamW on the adapter weights) and clears them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from peft import PeftModel, get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file
from tinker import types
from tinker.lib.public_interfaces.custom_loss import (
    LossHandle,
    check_loss_inputs,
    run_loss_handle,
)
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from thinker.engine.futures import ClientFuture, EngineFuture, OrderedExecutor, Serial
from thinker.engine.local import (
    checkpoints,
    data_parallel,
    decode,
    fast,
    memory,
    prefix,
    sharding,
)
from thinker.engine.local.checkpoints import CheckpointPath
from thinker.engine.local.forward import target_logprobs, to_host, token_ranges
from thinker.engine.local.models import (
    COMPILED_ATTR,
    ROOMY_ATTR,
    Placement,
    load_base_model,
    on_thread_start,
)
from thinker.engine.local.sampling import LocalSamplingClient, SharedWeights
from thinker.engine.losses import get_loss_fn, inputs_read
from thinker.engine.protocols import CustomLossFn
from thinker.errors import BackendError, ConfigError

ADAPTER_FILE = "adapter_model.safetensors"
OOM_RETRIES = 4  # halvings of the memory budget after the device ran out of memory
OPTIMIZER_FILE = "optimizer.pt"


@dataclass(frozen=True)
class LoraSpec:
    """What defines an adapter: enough to rebuild it from a checkpoint."""

    base_model: str
    rank: int
    seed: int | None
    train_mlp: bool
    train_attn: bool
    train_unembed: bool


class LocalTrainingClient:
    def __init__(
        self,
        run_id: str,
        spec: LoraSpec,
        model: PeftModel,
        tokenizer: PreTrainedTokenizerBase,
        placement: Placement,
        storage_dir: Path,
        adapter: str = "default",
        executor: Serial | None = None,
    ) -> None:
        """`adapter` is this client's adapter on `model`, which other clients' adapters may
        share (one copy of the base weights); `executor` then is this client's lane on the
        model's one worker, which activates the adapter before each call."""
        self.run_id = run_id
        self.spec = spec
        self._model = model
        self._tokenizer = tokenizer
        self._placement = placement
        self._storage_dir = storage_dir
        self.adapter = adapter
        self._params = adapter_parameters(model, adapter)
        # Layers sharded over the ranks (sharding.py): their adapter tensors are DTensors.
        self._sharded = sharding.is_sharded(model)
        # The fused (single-kernel) AdamW on CUDA: one launch for all adapter tensors. Its
        # kernels (and the foreach ones) take one kind of tensor a call, so a sharded model's
        # adapter, DTensors and whole tensors, steps tensor by tensor.
        fused = placement.device.type == "cuda" and not self._sharded
        foreach = False if self._sharded else None
        self._optimizer = torch.optim.AdamW(self._params, lr=0.0, fused=fused, foreach=foreach)
        self._step = 0
        self._version = 0  # bumped whenever the adapter weights change
        self._executor: Serial = executor or OrderedExecutor(
            f"train-{run_id}", on_thread_start(placement.device)
        )
        self._memory_estimate: memory.Estimate | None = None
        self._memory_scale = 1.0  # of the usable memory: halved each time the device ran out
        self._budget_tokens = 0  # what the last call's passes were cut to (0: not measured)
        if not hasattr(model, CHECKPOINTING_ATTR):  # the first client on this model
            always = memory.is_checkpointed(model)  # the QLoRA path checkpoints every layer
            setattr(model, CHECKPOINTING_ATTR, memory.Checkpointing(every=1 if always else 0))
        self._explained = {self._checkpointing}
        self._forward_in_training_graph = compiled_without_dropout(model)
        # One rank of a data-parallel run (data_parallel.py), or None: the whole batch here.
        self._group = data_parallel.Group.current()
        self._sharing: data_parallel.SampleSharing | None = None
        if self._group is not None:
            if not self._sharded:  # a sharded model's adapter came from rank 0 already
                self._group.broadcast(self._params)
                self._sharing = data_parallel.SampleSharing(self._group)
            else:  # its every pass is a collective: the ranks sample in lockstep
                lockstep = data_parallel.Lockstep(
                    self._group, sharding.decoder(model), self._idle_pass
                )
                self._sharing = data_parallel.SampleSharing(self._group, lockstep, self._executor)
            rank, world = self._group.rank, self._group.world
            print(
                f"[thinker] data-parallel: rank {rank} of {world} runs 1/{world} of each "
                "batch's datums; their gradients are summed over the ranks at each step",
                flush=True,
            )

    # ---- the Tinker TrainingClient interface -------------------------------------------
    def forward(
        self,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        """Loss and per-datum logprobs without touching gradients."""
        return self._executor.submit(self._run_loss, data, loss_fn, loss_fn_config, False)

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        """Loss, per-datum logprobs, and the loss's gradient added to the adapter's."""
        return self._executor.submit(self._run_loss, data, loss_fn, loss_fn_config, True)

    def forward_backward_custom(
        self,
        data: list[types.Datum],
        loss_fn: CustomLossFn | LossHandle,
        *,
        loss_type_input: Literal["logprobs"] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        """`loss_fn(data, logprobs_list) -> (loss, metrics)`, differentiated through the model
        (`loss_type_input`: the SDK's name for what the function reads; logprobs, the only
        kind)."""
        if loss_type_input not in (None, "logprobs"):
            raise ConfigError(f"loss_type_input must be 'logprobs', got {loss_type_input!r}")
        if isinstance(loss_fn, LossHandle):  # from create_custom_loss: the SDK's own runner
            check_loss_inputs(loss_fn, data)
            handle = loss_fn
            return self._executor.submit(
                self._run_custom, data, lambda d, lps: run_loss_handle(handle, d, lps)
            )
        return self._executor.submit(self._run_custom, data, loss_fn)

    def optim_step(
        self,
        optim_params: types.AdamParams | None = None,
        *,
        adam_params: types.AdamParams | None = None,
    ) -> EngineFuture[types.OptimStepResponse]:
        """One AdamW step with these hyperparameters, then the gradients are cleared (the
        SDK's two spellings: `optim_step(params)` or `optim_step(adam_params=params)`)."""
        if optim_params is not None and adam_params is not None:
            raise ConfigError("optim_step takes optim_params or adam_params, not both")
        params = optim_params if optim_params is not None else adam_params
        if params is not None and not isinstance(params, types.AdamParams):
            raise ConfigError(
                f"optim_step: the local engine's optimizer is AdamW; got {type(params).__name__}"
            )
        return self._executor.submit(self._run_optim_step, params or types.AdamParams())

    def save_state(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> EngineFuture[types.SaveWeightsResponse]:
        """Adapter, optimizer state and step, as `tinker://<run>/weights/<name>`. The
        arguments are the tinker SDK's, in its order (`save_state("x", 3600)` is a TTL, never
        an overwrite): with a TTL the checkpoint is deleted once it runs out
        (checkpoints.py); `user_metadata` is kept in the checkpoint's metadata."""
        checkpoints.check_name(name)
        checkpoints.check_ttl(ttl_seconds)
        return self._executor.submit(
            lambda: types.SaveWeightsResponse(
                path=self._save(name, "weights", overwrite, user_metadata, ttl_seconds)
            )
        )

    def save_weights_for_sampler(
        self,
        name: str,
        ttl_seconds: int | None = None,
        user_metadata: dict[str, str] | None = None,
        *,
        overwrite: bool = False,
    ) -> EngineFuture[types.SaveWeightsForSamplerResponse]:
        """The adapter alone (PEFT format), as `tinker://<run>/sampler_weights/<name>`; the
        arguments as `save_state`'s."""
        checkpoints.check_name(name)
        checkpoints.check_ttl(ttl_seconds)
        return self._executor.submit(
            lambda: types.SaveWeightsForSamplerResponse(
                path=self._save(name, "sampler_weights", overwrite, user_metadata, ttl_seconds)
            )
        )

    def save_weights_external(
        self,
        name: str,
        ttl_seconds: int | None = None,
        age_encryption_recipients: list[str] | None = None,
    ) -> EngineFuture[types.SaveWeightsExternalResponse]:
        """The whole model with the adapter folded in, in Hugging Face format (safetensors,
        config, tokenizer), as `tinker://<run>/external_weights/<name>`: what
        `from_pretrained` loads, and a `base_model` for a new job. Merged on the CPU in fp32
        (a small adapter delta is not rounded away), like the model library's export."""
        checkpoints.check_name(name)
        checkpoints.check_ttl(ttl_seconds)
        if age_encryption_recipients:
            raise ConfigError(
                "age_encryption_recipients: local weights stay on this machine and are not "
                "encrypted; pass None"
            )
        if self._placement.quantization is not None:
            raise ConfigError("save_weights_external: a 4-bit base cannot absorb an adapter")
        return self._executor.submit(
            lambda: types.SaveWeightsExternalResponse(path=self._save_external(name, ttl_seconds))
        )

    def save_weights_and_get_sampling_client(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> ClientFuture[LocalSamplingClient]:
        """A sampler frozen at the current weights; saved as sampler weights if `name` is given.

        Without a name the snapshot is ephemeral, as on Tinker: it lives in memory only (the
        RL loop takes one per step) and its `model_path` is None. `kind="inflight"` gives a
        sampler of the live weights instead, which follows every later optimizer step.
        `retry_config` and `record_stability_info` are the SDK's client-side options (unused
        locally). The future also serves, deprecated, as the sampler, as the SDK's does
        (the cookbook's rl_loop samples from it directly).
        """
        if kind not in ("snapshot", "inflight"):
            raise ConfigError(f"kind must be 'snapshot' or 'inflight', got {kind!r}")
        live = kind == "inflight"
        if name is None:
            return _as_client(self._executor.submit(lambda: self._snapshot_client(None, live)))
        checkpoints.check_name(name)
        saved = self._executor.submit(self._save, name, "sampler_weights", False)
        return _as_client(
            self._executor.submit(lambda: self._snapshot_client(saved.result(), live))
        )

    def create_sampling_client(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> ClientFuture[LocalSamplingClient]:
        """A sampler of saved sampler weights of this client's shape, on this client's model
        (no second copy of the base weights); the future also serves as the sampler."""
        directory = checkpoints.resolve(model_path, self._storage_dir)
        checkpoints.verify(directory)
        meta = checkpoints.read_meta(directory)
        if meta.get("base_model") != self.spec.base_model:
            raise ConfigError(
                f"{model_path} adapts {meta.get('base_model')!r}, not this client's "
                f"{self.spec.base_model!r}"
            )
        adapter = load_file(directory / ADAPTER_FILE, device=str(self._placement.device))
        adapter = self._sharded_as_params(adapter)
        return _as_client(EngineFuture.completed(self.shared_sampling_client(model_path, adapter)))

    def _snapshot_client(self, model_path: str | None, live: bool = False) -> LocalSamplingClient:
        shared = SharedWeights(
            self._model,
            self._executor,
            None if live else self._adapter_snapshot(),
            self._version,
            lambda: self._version,
            live=live,
            adapter_name=self.adapter,
            owner=self,
        )
        return LocalSamplingClient(
            self._model,
            self._tokenizer,
            self.spec.base_model,
            model_path,
            self._placement.device,
            shared,
            self._sharing,
        )

    def shared_sampling_client(
        self, model_path: str | None, adapter: dict[str, Tensor] | None
    ) -> LocalSamplingClient:
        """A sampler on this client's model: `adapter` weights swapped in, or None for the base."""
        shared = SharedWeights(
            self._model, self._executor, adapter, adapter_name=self.adapter, owner=self
        )
        return LocalSamplingClient(
            self._model,
            self._tokenizer,
            self.spec.base_model,
            model_path,
            self._placement.device,
            shared,
            # Whole models: each rank scores and samples what it asks itself. A sharded one's
            # passes are collectives: its ranks share out the calls, in lockstep.
            self._sharing if self._sharded else None,
        )

    def _idle_pass(self) -> None:
        """A sharded rank's pass without work, beside the others' sampling passes."""
        with torch.no_grad():
            self._idle_logprobs()

    def _sharded_as_params(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """A whole adapter's tensors (by their names in the adapter's file) sharded as the
        parameters they load into are, on a sharded model; as they are on a whole one."""
        if not self._sharded:
            return state
        params = {
            name.replace(f".{self.adapter}.", "."): p
            for name, p in self._model.named_parameters()
            if f".{self.adapter}." in name
        }
        return {k: sharding.like(v, params[k]) if k in params else v for k, v in state.items()}

    def load_state(
        self, path: str, weights_access_token: str | None = None
    ) -> EngineFuture[types.LoadWeightsResponse]:
        """Replace the adapter with a saved state's; the optimizer state stays as it is.
        `weights_access_token` (another owner's weights on Tinker) is unused locally."""
        return self._executor.submit(self._load, path, False)

    def load_state_with_optimizer(
        self, path: str, weights_access_token: str | None = None
    ) -> EngineFuture[types.LoadWeightsResponse]:
        """Replace the adapter, the optimizer state and the step with a saved state's."""
        return self._executor.submit(self._load, path, True)

    def get_tokenizer(self) -> PreTrainedTokenizerBase:
        return self._tokenizer

    def get_info(self) -> types.GetInfoResponse:
        arch = (self._model.config.architectures or [type(self._model.base_model.model).__name__])[
            0
        ]
        data = types.ModelData(
            arch=arch, model_name=self.spec.base_model, tokenizer_id=self.spec.base_model
        )
        return types.GetInfoResponse(
            model_data=data,
            model_id=self.run_id,
            is_lora=True,
            lora_rank=self.spec.rank,
            model_name=self.spec.base_model,
        )

    def get_console_url(self) -> str:
        """The SDK's link to Tinker's console; a local run has none ("")."""
        return ""

    def get_telemetry(self) -> None:
        """The SDK's telemetry handle; the local engine sends none."""
        return None

    # The SDK's `_async` twins: the submitting ones give the future (await it again, or its
    # `result_async()`, for the value), the others the value itself, as in tinker 0.38.
    async def forward_async(
        self,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        return self.forward(data, loss_fn, loss_fn_config)

    async def forward_backward_async(
        self,
        data: list[types.Datum],
        loss_fn: str,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        return self.forward_backward(data, loss_fn, loss_fn_config)

    async def forward_backward_custom_async(
        self,
        data: list[types.Datum],
        loss_fn: CustomLossFn | LossHandle,
        *,
        loss_type_input: Literal["logprobs"] | None = None,
    ) -> EngineFuture[types.ForwardBackwardOutput]:
        return self.forward_backward_custom(data, loss_fn, loss_type_input=loss_type_input)

    async def optim_step_async(
        self,
        optim_params: types.AdamParams | None = None,
        *,
        adam_params: types.AdamParams | None = None,
    ) -> EngineFuture[types.OptimStepResponse]:
        return self.optim_step(optim_params, adam_params=adam_params)

    async def save_state_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        overwrite: bool = False,
        user_metadata: dict[str, str] | None = None,
    ) -> EngineFuture[types.SaveWeightsResponse]:
        return self.save_state(name, ttl_seconds, overwrite, user_metadata)

    async def save_weights_for_sampler_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        user_metadata: dict[str, str] | None = None,
    ) -> EngineFuture[types.SaveWeightsForSamplerResponse]:
        return self.save_weights_for_sampler(name, ttl_seconds, user_metadata)

    async def load_state_async(
        self, path: str, weights_access_token: str | None = None
    ) -> EngineFuture[types.LoadWeightsResponse]:
        return self.load_state(path, weights_access_token)

    async def load_state_with_optimizer_async(
        self, path: str, weights_access_token: str | None = None
    ) -> EngineFuture[types.LoadWeightsResponse]:
        return self.load_state_with_optimizer(path, weights_access_token)

    async def save_weights_and_get_sampling_client_async(
        self,
        name: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
        kind: types.SamplingClientKind = "snapshot",
    ) -> LocalSamplingClient:
        return await self.save_weights_and_get_sampling_client(
            name, retry_config, record_stability_info, kind
        )

    async def create_sampling_client_async(
        self, model_path: str, retry_config: Any = None, record_stability_info: bool = False
    ) -> LocalSamplingClient:
        return await self.create_sampling_client(model_path, retry_config, record_stability_info)

    async def save_weights_external_async(
        self,
        name: str,
        ttl_seconds: int | None = None,
        age_encryption_recipients: list[str] | None = None,
    ) -> EngineFuture[types.SaveWeightsExternalResponse]:
        return self.save_weights_external(name, ttl_seconds, age_encryption_recipients)

    async def get_info_async(self) -> types.GetInfoResponse:
        return self.get_info()

    def memory_budget(self, longest: int = 0) -> memory.Budget:
        """How many tokens one forward/backward pass can hold in the memory free now, with
        the gradient checkpointing a sequence of `longest` tokens needs."""
        return memory.budget_of(
            self._estimate(), self._placement, longest=longest, scale=self._memory_scale
        )

    def _estimate(self) -> memory.Estimate:
        if self._memory_estimate is None:  # the model's walk, once; free memory each call
            known = memory.estimate(self._model, self._placement)
            if self._sharded:  # the gathered layers, beside the shards
                fixed = known.fixed + sharding.sharded_layer_bytes(self._model)
                known = dataclasses.replace(known, fixed=fixed)
            self._memory_estimate = known
        return self._memory_estimate

    @property
    def step(self) -> int:
        """Optimizer steps taken so far (restored along with the optimizer state)."""
        return self._step

    # ---- work, on the worker thread ----------------------------------------------------
    def _logprobs(self, data: Sequence[types.Datum]) -> list[Tensor]:
        if not data:
            raise ConfigError("forward_backward needs at least one Datum")
        # A sampler of these weights keeps its KV cache, graphs and merged adapter between
        # calls; training needs that memory (the budget reads what is free), so they go, and
        # the next sampling call makes them again.
        decode.release(self._model)
        prefix.release(self._model)
        inputs = [d.model_input.to_ints() for d in data]
        targets = [_input(d, "target_tokens", i).to(torch.long) for i, d in enumerate(data)]
        for i, (x, t) in enumerate(zip(inputs, targets, strict=True)):
            if len(x) != t.shape[0]:
                raise ConfigError(
                    f"datum {i}: target_tokens has length {t.shape[0]} but "
                    f"model_input has {len(x)}; they must be equal"
                )
        device = self._placement.device
        pack = fast.enabled("PACKING", device)
        return target_logprobs(self._model, inputs, targets, device, pack=pack)

    def _run_loss(
        self,
        data: list[types.Datum],
        loss_fn: str,
        config: Mapping[str, float] | None,
        backward: bool,
    ) -> types.ForwardBackwardOutput:
        """A loss call; one rank of a data-parallel run takes its share of the datums and
        returns every rank's logprobs, and the loss summed over the ranks."""
        group = self._group
        here = data if group is None else group.share(data)
        logprobs, total = self._loss_here(here, loss_fn, config, backward)
        if group is not None:  # every rank's logprobs, in order; the loss summed
            logprobs, total = group.gather(logprobs, len(data)), group.sum(total)
        return _output(logprobs, {"loss:sum": total})

    def _loss_here(
        self,
        data: list[types.Datum],
        loss_fn: str,
        config: Mapping[str, float] | None,
        backward: bool,
    ) -> tuple[list[Tensor], float]:
        """The datums this process runs: their logprobs and summed loss, in passes that fit
        memory. When the device runs out of memory anyway (an estimate off, another process),
        the gradients go back to what they were before the call, the budget halves (more
        passes, more layers checkpointed) and the call runs again; at most OOM_RETRIES times,
        then an error that says what to change. A sharded model's call fails at once instead."""
        if self._sharded:  # every rank is inside the same gathers: none can retry alone
            try:
                return self._loss_in_passes(data, loss_fn, config, backward)
            except torch.OutOfMemoryError as e:
                raise BackendError(
                    f"out of memory on {self._placement.device} in a pass of a sharded model "
                    f"({str(e).splitlines()[0]}): lower max_length (the longest sequence here "
                    f"is {self._longest(data):,} tokens) or micro_batch_size, or train on more "
                    "GPUs"
                ) from None
        if not data:  # a rank with no share of a small batch
            return [], 0.0
        # The gradients of earlier calls (accumulating to one step), to go back to; a
        # forward-only call leaves them alone.
        before = [g.clone() if g is not None and backward else g for g in self._grads()]
        for attempt in range(OOM_RETRIES + 1):
            try:
                return self._loss_in_passes(data, loss_fn, config, backward)
            except torch.OutOfMemoryError as e:
                failed = str(e).splitlines()[0]
            # Outside the except block: its traceback no longer holds the pass's tensors.
            for p, grad in zip(self._params, before, strict=True):
                p.grad = grad
            self._release_memory()
            if attempt == OOM_RETRIES:
                break
            self._memory_scale /= 2
            print(
                f"[thinker] out of memory ({failed}); running the call again in smaller passes: "
                f"{self.memory_budget(self._longest(data)).explanation}",
                flush=True,
            )
        raise BackendError(
            f"out of memory on {self._placement.device} even with passes of "
            f"{self.memory_budget(self._longest(data)).tokens:,} tokens and "
            f"{self._checkpointing.describe(self._layers())} ({OOM_RETRIES} retries): lower "
            "max_length (the longest sequence is "
            f"{self._longest(data):,} tokens) or micro_batch_size, or train with quantization "
            "4bit, or free the device's memory (another process may hold it)"
        )

    def _loss_in_passes(
        self,
        data: list[types.Datum],
        loss_fn: str,
        config: Mapping[str, float] | None,
        backward: bool,
    ) -> tuple[list[Tensor], float]:
        fn = get_loss_fn(loss_fn, config)
        config = dict(config or {})
        device = self._placement.device
        # The loss inputs go to the device before any forward pass: a copy from host memory
        # waits for the GPU's queue, and would hold back the backward's launch until the
        # forward had finished.
        inputs = [
            {k: _input(d, k, i).to(device) for k in inputs_read(loss_fn, d.loss_fn_inputs, i)}
            for i, d in enumerate(data)
        ]
        logprobs: list[Tensor] = []
        total = torch.zeros((), device=device)
        # A forward-only call on compiled layers runs the training graph, gradients on and
        # no backward: without gradients dynamo would compile an inference variant of the
        # layers, tens of seconds once per job for a held-out evaluation that takes a few.
        graph = backward or self._forward_in_training_graph
        with torch.set_grad_enabled(graph):
            self._model.train(graph)
            passes = self._passes(data, graph)
            if self._sharded and self._group is not None:  # as many passes on every rank
                passes += [(0, 0)] * (self._group.max(len(passes)) - len(passes))
            for start, end in passes:
                if start == end:  # a sharded rank out of datums
                    idle = self._idle_logprobs()
                    if backward:
                        (idle.sum() * 0).backward()
                    continue
                self._mark_roomy(data[start:end])
                # Tiled MLPs run eagerly: compiled layers would trace their checkpointed
                # chunks into one graph, whose memory Inductor plans instead.
                tiled = fast.eager() if self._checkpointing.mlp_chunk else contextlib.nullcontext()
                with tiled:
                    part = self._logprobs(data[start:end])
                    loss = torch.stack(
                        [fn(lp, inputs[start + j], config) for j, lp in enumerate(part)]
                    ).sum()
                    if backward:
                        loss.backward()
                logprobs += [lp.detach() for lp in part]
                total += loss.detach()
        return logprobs, float(total)

    def _passes(self, data: list[types.Datum], with_graph: bool) -> list[tuple[int, int]]:
        """Consecutive ranges of `data`, each within the tokens one pass that keeps its
        autograd graph can hold (the losses are sums over datums, so the accumulated gradient
        is the same); one range when no graph is kept. Turns on the gradient checkpointing
        the longest sequence needs (off again when none does), and refuses a sequence that
        cannot fit at all before it runs the device out of memory."""
        if not with_graph:
            return [(0, len(data))]
        lengths = [d.model_input.length for d in data]
        if self._sharded and self._group is not None:
            # One plan on every rank: the same checkpointing, from the same longest sequence
            # and the least free memory.
            group, device = self._group, self._placement.device
            longest, free = group.max(max(lengths, default=0)), memory.free_memory(device)
            budget = memory.budget_of(
                self._estimate(), self._placement, free_bytes=group.min(free),
                longest=longest, scale=self._memory_scale,
            )  # fmt: skip
            self._use_checkpointing(budget.checkpointing, budget.explanation)
            self._budget_tokens = budget.tokens
            return token_ranges(lengths, budget.tokens) if lengths else []
        budget = self.memory_budget(max(lengths))
        if budget.longest_fits is not None and max(lengths) > budget.longest_fits:
            raise BackendError(f"a sequence does not fit in memory: {budget.explanation}")
        self._use_checkpointing(budget.checkpointing, budget.explanation)
        self._budget_tokens = budget.tokens
        return token_ranges(lengths, budget.tokens)

    def _idle_logprobs(self) -> Tensor:
        """A pass for a sharded rank without datums: one token through every layer, so that
        the rank joins the others' gathers (and, its loss times zero, their
        reduce-scatters)."""
        device = self._placement.device
        target = torch.zeros(1, dtype=torch.long)
        pack = fast.enabled("PACKING", device)
        return target_logprobs(self._model, [[0]], [target], device, pack=pack)[0]

    def _mark_roomy(self, data: Sequence[types.Datum]) -> None:
        """Tell the compiled layers whether this pass may use the C++ wrapper (models.py's
        CPP_WRAPPER_MAX_TOKENS): only at half its memory budget or less, and never after the
        device ran out of memory."""
        tokens = sum(d.model_input.length for d in data)
        roomy = self._memory_scale == 1.0 and 2 * tokens <= self._budget_tokens
        setattr(self._model.get_base_model(), ROOMY_ATTR, roomy)

    @property
    def _checkpointing(self) -> memory.Checkpointing:
        """What the model's layers do now (a model's, shared by the clients on it)."""
        checkpointing: memory.Checkpointing = getattr(self._model, CHECKPOINTING_ATTR)
        return checkpointing

    def _use_checkpointing(self, checkpointing: memory.Checkpointing, why: str) -> None:
        if checkpointing == self._checkpointing:
            return
        memory.use_checkpointing(self._model.get_base_model(), checkpointing)
        setattr(self._model, CHECKPOINTING_ATTR, checkpointing)
        if checkpointing not in self._explained:  # said once per choice, not at every switch
            self._explained.add(checkpointing)
            print(f"[thinker] {checkpointing.describe(self._layers())}: {why}", flush=True)

    def _grads(self) -> list[Tensor | None]:
        return [p.grad for p in self._params]

    def _layers(self) -> int:
        return self._estimate().shape.layers

    @staticmethod
    def _longest(data: Sequence[types.Datum]) -> int:
        return max((d.model_input.length for d in data), default=0)

    def _release_memory(self) -> None:
        gc.collect()
        if self._placement.device.type == "cuda":
            torch.cuda.empty_cache()

    def _run_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> types.ForwardBackwardOutput:
        # As on Tinker: the user's function sees detached fp32 CPU logprobs; its gradient with
        # respect to them is then pushed back through the model's graph in one backward pass.
        # One rank of several runs its share of the datums and gives the function everyone's.
        self._model.train(True)
        group = self._group
        mine = list(range(len(data))) if group is None else group.share(range(len(data)))
        logprobs = self._logprobs([data[i] for i in mine]) if mine else []
        # A sharded rank without datums still joins the gathers and reduce-scatters.
        idle = self._idle_logprobs() if self._sharded and not mine else None
        every = logprobs if group is None else group.gather(logprobs, len(data))
        leaves = [lp.detach().float().cpu().requires_grad_(True) for lp in every]
        loss, metrics = loss_fn(data, leaves)
        loss.backward()
        grads = [leaves[i].grad for i in mine]
        if logprobs:
            torch.autograd.backward(
                logprobs,
                [
                    g.to(lp.device, lp.dtype) if g is not None else torch.zeros_like(lp)
                    for g, lp in zip(grads, logprobs, strict=True)
                ],
            )
        if idle is not None:
            (idle.sum() * 0).backward()
        return _output(every, {**metrics, "loss:sum": float(loss.detach().sum())})

    def _run_optim_step(self, params: types.AdamParams) -> types.OptimStepResponse:
        for param_group in self._optimizer.param_groups:
            param_group.update(
                lr=params.learning_rate,
                betas=(params.beta1, params.beta2),
                eps=params.eps,
                weight_decay=params.weight_decay,
            )
        group = self._group
        max_norm = params.grad_clip_norm if params.grad_clip_norm > 0 else float("inf")
        if group is not None and self._sharded:  # shards: reduce-scattered in the backward
            sharding.finish_gradients(self._params, group)
            grad_norm = sharding.clip_gradients(self._params, max_norm, group)
        else:
            if group is not None:  # the batch's gradient: every rank's share summed
                group.sum_gradients(self._params)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self._params, max_norm))
        self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
        self._step += 1
        self._version += 1
        # The adapter's norm after the step: a step that sent a weight to inf or NaN shows
        # here at once (the loss shows it only at the next step, and a sampler not at all).
        weights = [p.detach() for p in self._params]
        if group is not None and self._sharded:
            param_norm = float(sharding.total_norm(weights, group))
        else:
            param_norm = float(torch.nn.utils.get_total_norm(weights))
        metrics = {"grad_norm": grad_norm, "param_norm": param_norm}
        return types.OptimStepResponse(metrics={**metrics, "learning_rate": params.learning_rate})

    def _save(
        self,
        name: str,
        kind: checkpoints.CheckpointKind,
        overwrite: bool,
        user_metadata: dict[str, str] | None = None,
        ttl_seconds: int | None = None,
    ) -> str:
        """Write the checkpoint `name` of `kind`; its tinker:// path."""
        path = CheckpointPath(self.run_id, kind, name)
        meta = {
            "kind": kind,
            "step": self._step,
            "run_id": self.run_id,
            "created": time.time(),
            **asdict(self.spec),
        }
        if user_metadata:
            meta["user_metadata"] = dict(user_metadata)
        # A sharded adapter and its moments, whole, gathered by every rank for rank 0 to write.
        adapter = self._whole_adapter()
        optimizer = None
        if kind == "weights":
            optimizer = self._optimizer.state_dict()
            if self._sharded:
                optimizer = sharding.full_optimizer_state(optimizer)

        def write(tmp: Path) -> None:
            save_adapter(self._model, self.adapter, tmp, adapter)
            if optimizer is not None:
                torch.save(optimizer, tmp / OPTIMIZER_FILE)

        with self._rank_zero_writes() as writes:
            if writes:
                checkpoints.write_atomically(
                    path.directory(self._storage_dir), write, meta, overwrite, ttl_seconds
                )
        return str(path)

    @contextlib.contextmanager
    def _rank_zero_writes(self) -> Iterator[bool]:
        """Around a checkpoint's writing: rank 0 of a data-parallel run writes it (the ranks
        hold the same weights), the others wait until it is there. Yields whether this
        process writes."""
        group = self._group
        if group is None:
            yield True
            return
        try:
            yield group.rank == 0
        finally:
            group.barrier()

    def _save_external(self, name: str, ttl_seconds: int | None = None) -> str:
        path = CheckpointPath(self.run_id, "external_weights", name)
        meta = {
            "kind": "external_weights",
            "step": self._step,
            "run_id": self.run_id,
            "created": time.time(),
            **asdict(self.spec),
        }

        adapter = self._whole_adapter()

        def write(tmp: Path) -> None:
            with tempfile.TemporaryDirectory() as adapter_dir:
                save_adapter(self._model, self.adapter, Path(adapter_dir), adapter)
                base = load_base_model(
                    self.spec.base_model, Placement(torch.device("cpu"), torch.float32)
                )
                peft_model = PeftModel.from_pretrained(base, adapter_dir, is_trainable=False)
                peft_model.merge_and_unload().save_pretrained(str(tmp), max_shard_size="5GB")
            self._tokenizer.save_pretrained(str(tmp))

        with self._rank_zero_writes() as writes:
            if writes:
                checkpoints.write_atomically(
                    path.directory(self._storage_dir), write, meta, ttl_seconds=ttl_seconds
                )
        return str(path)

    def _whole_adapter(self) -> dict[str, Tensor] | None:
        """A sharded model's adapter tensors, whole (a collective: every rank calls it), by
        their names in the model's state dict; None when the model is not sharded."""
        if not self._sharded:
            return None
        return {
            name: sharding.full(p.detach()).cpu()
            for name, p in self._model.named_parameters()
            if f".{self.adapter}." in name
        }

    def _adapter_snapshot(self) -> dict[str, Tensor]:
        return {
            k: v.detach().clone()
            for k, v in get_peft_model_state_dict(
                self._model, adapter_name=self.adapter, save_embedding_layers=False
            ).items()
        }

    def _load(self, path: str, with_optimizer: bool) -> types.LoadWeightsResponse:
        directory = checkpoints.resolve(path, self._storage_dir)
        checkpoints.verify(directory)
        meta = checkpoints.read_meta(directory)
        state = load_file(directory / ADAPTER_FILE, device=str(self._placement.device))
        state = self._sharded_as_params(state)  # each tensor sharded as its parameter is
        result = set_peft_model_state_dict(self._model, state, adapter_name=self.adapter)
        self._version += 1
        unexpected: list[str] = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise ConfigError(
                f"checkpoint {path} does not fit this adapter: unexpected keys {unexpected[:3]}"
            )
        if with_optimizer:
            if meta["kind"] != "weights":
                raise ConfigError(f"{path} is a sampler checkpoint: it has no optimizer state")
            optim_state = torch.load(
                directory / OPTIMIZER_FILE, map_location=self._placement.device
            )
            if self._sharded:
                optim_state = sharding.shard_optimizer_state(optim_state, self._params)
            self._optimizer.load_state_dict(optim_state)
            self._step = int(meta["step"])
        return types.LoadWeightsResponse(path=path)


CHECKPOINTING_ATTR = "thinker_checkpointing"  # on a model: what its layers checkpoint now


def adapter_parameters(model: PeftModel, adapter: str) -> list[torch.nn.Parameter]:
    """The trainable tensors of `adapter` on `model` (PEFT: `...lora_A.<adapter>.weight`)."""
    params = [p for name, p in model.named_parameters() if f".{adapter}." in name]
    if not params:
        raise BackendError(f"the model has no adapter named {adapter!r}")
    return params


def save_adapter(
    model: PeftModel, adapter: str, directory: Path, tensors: dict[str, Tensor] | None = None
) -> None:
    """`adapter` alone in PEFT's format (adapter_config.json, adapter_model.safetensors) in
    `directory`, whatever its name (PEFT writes an adapter not named "default" to a folder of
    its name); `tensors`: its weights by state-dict name, when the model's own are shards."""
    extra: dict[str, Any] = {} if tensors is None else {"state_dict": tensors}
    model.save_pretrained(
        str(directory), selected_adapters=[adapter], save_embedding_layers=False, **extra
    )
    if adapter != "default":
        for file in (directory / adapter).iterdir():
            file.rename(directory / file.name)
        (directory / adapter).rmdir()


def compiled_without_dropout(model: torch.nn.Module) -> bool:
    """Whether the model's layers are compiled and train mode changes nothing in them (no
    dropout), so a forward-only pass can run in train mode through the training graph."""
    if not getattr(model, COMPILED_ATTR, False):
        return False
    config = getattr(model, "config", None)
    if any(
        (getattr(config, name, 0.0) or 0.0) > 0
        for name in ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop")
    ):
        return False
    return not any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def _input(datum: types.Datum, key: str, index: int) -> Tensor:
    if key not in datum.loss_fn_inputs:
        raise ConfigError(
            f"datum {index}: loss_fn_inputs lacks {key!r} (has {sorted(datum.loss_fn_inputs)})"
        )
    return datum.loss_fn_inputs[key].to_torch()


def _output(logprobs: list[Tensor], metrics: dict[str, float]) -> types.ForwardBackwardOutput:
    outputs = [{"logprobs": types.TensorData.from_numpy(lp.numpy())} for lp in to_host(logprobs)]
    return types.ForwardBackwardOutput(
        loss_fn_output_type="TorchLossReturn", loss_fn_outputs=outputs, metrics=metrics
    )


def _as_client(future: EngineFuture[LocalSamplingClient]) -> ClientFuture[LocalSamplingClient]:
    """A sampler's future that also serves as the sampler, as the SDK's does."""
    return ClientFuture(future.future())
