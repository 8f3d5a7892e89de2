"""`thinker.ServiceClient`: the one entry point, shaped like `tinker.ServiceClient`.

`backend="local"` trains and samples in this process with transformers + PEFT;
`backend="tinker"` hands every call to the official tinker SDK. Both return the tinker
package's own types, and every call returns a future (`await fut` or `fut.result()`). The
clients it gives keep the contract of `thinker.engine.protocols`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from thinker.engine import protocols
from thinker.errors import ConfigError

Backend = Literal["local", "tinker"]


class ServiceClient:
    """Creates training and sampling clients on the chosen backend.

    Args:
        backend: "local" (transformers + PEFT in this process) or "tinker" (the remote service).
        base_url: Tinker only; default `TINKER_BASE_URL`, else the hosted service.
        api_key: Tinker only; default `TINKER_API_KEY`. Never printed or logged.
        timeout_s: Tinker only; how long the first contact may take before a clear error.
        storage_dir: local only; where `thinker://<run>/...` checkpoint paths live
            (default `$THINKER_STORAGE_DIR`, else `~/.thinker/storage`).
        device: local only; "cuda", "cpu" or None (CUDA when available).
        quantization: local only; None or "4bit" (QLoRA through bitsandbytes, CUDA only).
    """

    def __init__(
        self,
        backend: Backend = "local",
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float | None = None,
        storage_dir: str | Path | None = None,
        device: str | None = None,
        quantization: Literal["4bit"] | None = None,
    ) -> None:
        if backend == "local":
            # Deferred: each backend imports only its own stack (torch and peft, or tinker).
            from thinker.engine.local.service import LocalServiceClient

            self._impl: protocols.ServiceClient = LocalServiceClient(
                storage_dir=storage_dir, device=device, quantization=quantization
            )
        elif backend == "tinker":
            # Deferred: as above.
            from thinker.engine.tinker_backend import TinkerServiceClient

            self._impl = TinkerServiceClient(
                base_url=base_url, api_key=api_key, timeout_s=timeout_s
            )
        else:
            raise ConfigError(f"unknown backend {backend!r}: expected 'local' or 'tinker'")
        self.backend: Backend = backend

    def __repr__(self) -> str:
        return f"ServiceClient(backend={self.backend!r})"

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> protocols.APIFuture[protocols.TrainingClient]:
        """A new LoRA adapter on `base_model`; the future gives its training client."""
        return self._impl.create_lora_training_client(
            base_model, rank, seed, train_mlp, train_attn, train_unembed
        )

    def create_training_client_from_state(
        self, path: str
    ) -> protocols.APIFuture[protocols.TrainingClient]:
        """A training client with the weights of a `save_state` checkpoint, fresh optimizer."""
        return self._impl.create_training_client_from_state(path)

    def create_training_client_from_state_with_optimizer(
        self, path: str
    ) -> protocols.APIFuture[protocols.TrainingClient]:
        """A training client resumed exactly: weights, optimizer state and step."""
        return self._impl.create_training_client_from_state_with_optimizer(path)

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> protocols.APIFuture[protocols.SamplingClient]:
        """A sampling client of sampler weights (`model_path`) or of a plain base model."""
        if (model_path is None) == (base_model is None):
            raise ConfigError("create_sampling_client needs exactly one of model_path, base_model")
        return self._impl.create_sampling_client(model_path=model_path, base_model=base_model)


if TYPE_CHECKING:  # mypy proves that the façade keeps the contract too; nothing runs

    def _keeps_the_contract(service: ServiceClient) -> protocols.ServiceClient:
        return service
