"""`thinker.ServiceClient`: the one entry point, shaped like `tinker.ServiceClient`.

It takes `tinker.ServiceClient`'s arguments, in its order, and the backend by keyword:
`backend="local"` (the default, or `THINKER_BACKEND`) trains and samples in this process
with transformers + PEFT; `backend="tinker"` hands every call to the official tinker SDK.
Both return the tinker package's own types, and every call returns a future (`await fut` or
`fut.result()`); as in the SDK, the future of a client-creation call also serves, deprecated,
as the client, and each creation call has an `_async` twin. The clients it gives keep the
contract of `thinker.engine.protocols`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from thinker.engine import protocols
from thinker.engine.futures import ClientFuture, EngineFuture
from thinker.errors import ConfigError

Backend = Literal["local", "tinker"]
BACKENDS: tuple[Backend, ...] = ("local", "tinker")
C = TypeVar("C")


class ServiceClient:
    """Creates training and sampling clients on the chosen backend.

    The tinker SDK's arguments (`user_metadata`, `project_id`, `display_name`, `base_url`,
    `api_key`, `default_headers_overrides` and its client's keywords) go to the SDK on the
    tinker backend. Locally `user_metadata`, `project_id` and `display_name` are kept on this
    object and the rest of them have no meaning: accepted, unused.

    Args:
        backend: "local" (transformers + PEFT in this process) or "tinker" (the remote
            service); default `THINKER_BACKEND`, else "local". By keyword only: the first
            positional argument is the SDK's `user_metadata`.
        base_url: Tinker only; default `TINKER_BASE_URL`, else the hosted service.
        api_key: Tinker only; default `TINKER_API_KEY`. Never printed or logged.
        timeout_s: Tinker only; how long the first contact may take before a clear error.
        storage_dir: local only; where `tinker://<run>/...` checkpoint paths live
            (default `$THINKER_STORAGE_DIR`, else `~/.thinker/storage`).
        device: local only; "cuda", "cpu" or None (CUDA when available).
        quantization: local only; None or "4bit" (QLoRA through bitsandbytes, CUDA only).
    """

    def __init__(
        self,
        user_metadata: dict[str, str] | None = None,
        project_id: str | None = None,
        *,
        backend: Backend | None = None,
        display_name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        default_headers_overrides: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        storage_dir: str | Path | None = None,
        device: str | None = None,
        quantization: Literal["4bit"] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(user_metadata, str):
            raise ConfigError(
                f"ServiceClient({user_metadata!r}): the first argument is the tinker SDK's "
                "user_metadata (a dict); choose the backend by keyword, e.g. "
                f"ServiceClient(backend={user_metadata!r})"
            )
        named = backend or os.environ.get("THINKER_BACKEND") or "local"
        if named not in BACKENDS:
            raise ConfigError(f"unknown backend {named!r}: expected 'local' or 'tinker'")
        chosen: Backend = "tinker" if named == "tinker" else "local"
        self.user_metadata = dict(user_metadata or {})
        self.project_id, self.display_name = project_id, display_name
        self._tinker: TinkerServiceClient | None = None
        if chosen == "local":
            if kwargs:
                raise ConfigError(
                    f"unknown argument(s) for the local backend: {', '.join(sorted(kwargs))}"
                )
            # Deferred: each backend imports only its own stack (torch and peft, or tinker).
            from thinker.engine.local.service import LocalServiceClient

            self._impl: protocols.ServiceClient = LocalServiceClient(
                storage_dir=storage_dir, device=device, quantization=quantization
            )
        else:
            # Deferred: as above.
            from thinker.engine.tinker_backend import TinkerServiceClient

            sdk = {
                "user_metadata": user_metadata,
                "project_id": project_id,
                "display_name": display_name,
                "default_headers_overrides": default_headers_overrides,
                **kwargs,
            }
            self._tinker = TinkerServiceClient(
                base_url=base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                sdk_kwargs={k: v for k, v in sdk.items() if v is not None},
            )
            self._impl = self._tinker
        self.backend: Backend = chosen

    def __repr__(self) -> str:
        return f"ServiceClient(backend={self.backend!r})"

    # ---- training clients -------------------------------------------------------------
    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> ClientFuture[protocols.TrainingClient]:
        """A new LoRA adapter on `base_model`; the future gives its training client.
        `optimizer` (the SDK's OptimizerConfig) is for the tinker backend; the local engine's
        optimizer is AdamW with each `optim_step`'s parameters."""
        self._local_optimizer(optimizer)
        args = (base_model, rank, seed, train_mlp, train_attn, train_unembed)
        if self._tinker is not None:
            sdk = _given(user_metadata=user_metadata, optimizer=optimizer)
            return _as_client(self._tinker.create_lora_training_client(*args, **sdk))
        return self._local(self._impl.create_lora_training_client(*args), user_metadata)

    async def create_lora_training_client_async(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        user_metadata: dict[str, str] | None = None,
        optimizer: Any = None,
    ) -> protocols.TrainingClient:
        return await self.create_lora_training_client(
            base_model, rank, seed, train_mlp, train_attn, train_unembed, user_metadata, optimizer
        )

    def create_training_client_from_state(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: Any = None,
    ) -> ClientFuture[protocols.TrainingClient]:
        """A training client with the weights of a `save_state` checkpoint, fresh optimizer.
        `base_model`, when given, must be the checkpoint's; `weights_access_token` is for
        another owner's weights on Tinker (unused locally)."""
        self._local_optimizer(optimizer)
        if self._tinker is not None:
            sdk = _given(
                base_model=base_model,
                user_metadata=user_metadata,
                weights_access_token=weights_access_token,
                optimizer=optimizer,
            )
            return _as_client(self._tinker.create_training_client_from_state(path, **sdk))
        future = self._impl.create_training_client_from_state(path)
        return self._local(future, user_metadata, base_model)

    async def create_training_client_from_state_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
        optimizer: Any = None,
    ) -> protocols.TrainingClient:
        return await self.create_training_client_from_state(
            path, base_model, user_metadata, weights_access_token, optimizer
        )

    def create_training_client_from_state_with_optimizer(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> ClientFuture[protocols.TrainingClient]:
        """A training client resumed exactly: weights, optimizer state and step."""
        if self._tinker is not None:
            sdk = _given(
                base_model=base_model,
                user_metadata=user_metadata,
                weights_access_token=weights_access_token,
            )
            tinker_future = self._tinker.create_training_client_from_state_with_optimizer(
                path, **sdk
            )
            return _as_client(tinker_future)
        future = self._impl.create_training_client_from_state_with_optimizer(path)
        return self._local(future, user_metadata, base_model)

    async def create_training_client_from_state_with_optimizer_async(
        self,
        path: str,
        base_model: str | None = None,
        user_metadata: dict[str, str] | None = None,
        weights_access_token: str | None = None,
    ) -> protocols.TrainingClient:
        return await self.create_training_client_from_state_with_optimizer(
            path, base_model, user_metadata, weights_access_token
        )

    # ---- sampling clients -------------------------------------------------------------
    def create_sampling_client(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> ClientFuture[protocols.SamplingClient]:
        """A sampling client of sampler weights (`model_path`) or of a plain base model; with
        both, `base_model` must be the weights' base model. `retry_config` and
        `record_stability_info` are the SDK's client-side options (unused locally)."""
        if model_path is None and base_model is None:
            raise ConfigError("create_sampling_client needs model_path or base_model")
        if self._tinker is not None:
            sdk = _given(retry_config=retry_config)
            if record_stability_info:
                sdk["record_stability_info"] = True
            return _as_client(self._tinker.create_sampling_client(model_path, base_model, **sdk))
        if model_path is not None:
            future = self._impl.create_sampling_client(model_path=model_path)
            return self._local(future, None, base_model)
        return self._local(self._impl.create_sampling_client(base_model=base_model), None)

    async def create_sampling_client_async(
        self,
        model_path: str | None = None,
        base_model: str | None = None,
        retry_config: Any = None,
        record_stability_info: bool = False,
    ) -> protocols.SamplingClient:
        return await self.create_sampling_client(
            model_path, base_model, retry_config, record_stability_info
        )

    # ---- custom losses ------------------------------------------------------------------
    def create_custom_loss(
        self, fn: Callable[..., Any], input_ranks: Mapping[str, types.CustomLossInputRank]
    ) -> EngineFuture[Any]:
        """A per-datum loss for `TrainingClient.forward_backward_custom`, traced and checked by
        the tinker SDK's own code (`fn(logprobs, *inputs) -> (loss, metrics)`, torch and math
        only). Locally it runs in this process on every training client (no session bounds
        it); on Tinker the SDK decides where."""
        if self._tinker is not None:
            return EngineFuture.completed(
                self._tinker._sdk_client().create_custom_loss(fn, input_ranks).result()
            )
        from tinker.lib.public_interfaces.custom_loss import trace_loss  # the SDK's tracer

        return EngineFuture.completed(trace_loss(fn, input_ranks, session_id="local"))

    # ---- the service ------------------------------------------------------------------
    def copy_weights(
        self, path: str, *, ttl_seconds: int | None = None, weights_access_token: str | None = None
    ) -> EngineFuture[str]:
        """A copy of the weights at `path` under a new run; the future gives its path. Locally
        the files are hard links to the source's (no bytes duplicated) and a TTL is refused."""
        if self._tinker is not None:
            sdk = self._tinker._sdk_client()
            future = sdk.copy_weights(
                path, ttl_seconds=ttl_seconds, weights_access_token=weights_access_token
            )
            return EngineFuture.completed(future.result())
        return self._local_service().copy_weights(
            path, ttl_seconds=ttl_seconds, weights_access_token=weights_access_token
        )

    def create_rest_client(self) -> Any:
        """The SDK's REST operations on runs and checkpoints: on Tinker the SDK's RestClient;
        locally the same operations over the checkpoint storage (listing, reading, deleting;
        not the account-level ones)."""
        if self._tinker is not None:
            return self._tinker._sdk_client().create_rest_client()
        return self._local_service().create_rest_client()

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        """The base models on offer: locally the built-ins and the models in this machine's
        Hugging Face cache (a hub id or a directory works too); on Tinker, the service's."""
        if self._tinker is not None:
            return self._tinker.get_server_capabilities()
        return self._local_service().get_server_capabilities()

    async def get_server_capabilities_async(self) -> types.GetServerCapabilitiesResponse:
        return self.get_server_capabilities()

    def get_console_url(self) -> str:
        """The SDK's link to Tinker's console; "" locally (the dashboard is `thinker serve`)."""
        if self._tinker is not None:
            return str(self._tinker._sdk_client().get_console_url())
        return ""

    def get_telemetry(self) -> Any:
        """The SDK's telemetry handle; None locally (nothing is sent)."""
        return self._tinker._sdk_client().get_telemetry() if self._tinker is not None else None

    def close(
        self,
        status: Literal["success", "errored", "interrupted"],
        detail: str | None = None,
    ) -> EngineFuture[None]:
        """End the session (on Tinker, its session finishes with `status`); locally nothing is
        held open."""
        if self._tinker is not None:
            self._tinker.close(status, detail)
        return EngineFuture.completed(None)

    # ---- helpers ------------------------------------------------------------------------
    def _local_service(self) -> LocalServiceClient:
        from thinker.engine.local.service import LocalServiceClient  # deferred, as in __init__

        assert isinstance(self._impl, LocalServiceClient), "the local backend"
        return self._impl

    def _local_optimizer(self, optimizer: Any) -> None:
        if optimizer is not None and self.backend == "local":
            raise ConfigError(
                "optimizer: the local engine's optimizer is AdamW, set by each optim_step's "
                "AdamParams; pass optimizer=None"
            )

    def _local(
        self,
        future: protocols.APIFuture[C],
        user_metadata: dict[str, str] | None,
        base_model: str | None = None,
    ) -> ClientFuture[C]:
        """A local creation future as the SDK gives it (also usable as the client), checking
        that a given `base_model` is the client's and keeping the user metadata on it."""
        metadata = {**self.user_metadata, **(user_metadata or {})}

        def checked(client: Any) -> Any:
            actual = _base_model_of(client)
            if base_model is not None and actual != base_model:
                raise ConfigError(
                    f"base_model {base_model!r} given, but the checkpoint's base model is "
                    f"{actual!r}"
                )
            if metadata:
                client.user_metadata = metadata
            return client

        assert isinstance(future, EngineFuture), "the local engine returns EngineFutures"
        return ClientFuture(_then(future.future(), checked))


def _base_model_of(client: Any) -> str | None:
    """A local training client's (its LoRA spec) or sampling client's base model."""
    spec = getattr(client, "spec", None)
    if spec is not None:
        return str(spec.base_model)
    get = getattr(client, "get_base_model", None)
    return str(get()) if callable(get) else None


def _as_client(future: EngineFuture[Any]) -> ClientFuture[Any]:
    """A tinker-backend creation future, also usable as the client."""
    return ClientFuture(future.future())


def _given(**kwargs: Any) -> dict[str, Any]:
    """The SDK arguments the caller set (the SDK's defaults stand for the rest)."""
    return {k: v for k, v in kwargs.items() if v is not None}


def _then(future: Future[Any], fn: Callable[[Any], Any]) -> Future[Any]:
    """A future of `fn(value)` once `future` has a value (or of its error)."""
    out: Future[Any] = Future()

    def done(f: Future[Any]) -> None:
        try:
            out.set_result(fn(f.result()))
        except BaseException as e:  # the caller's future carries it
            out.set_exception(e)

    future.add_done_callback(done)
    return out


if TYPE_CHECKING:  # mypy proves that the façade keeps the contract too; nothing runs
    from tinker import types

    from thinker.engine.local.service import LocalServiceClient
    from thinker.engine.tinker_backend import TinkerServiceClient

    def _keeps_the_contract(service: ServiceClient) -> protocols.ServiceClient:
        return service
