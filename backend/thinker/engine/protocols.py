"""The engine contract: the Tinker-shaped clients every backend provides, as Protocols.

The algorithms are written once against these types, and mypy (`scripts/typecheck.sh`)
checks that `thinker.ServiceClient` and both backends satisfy them: the local engine
(`engine/local`) and the tinker SDK's own clients (`engine/tinker_backend.py`). Method and
argument names and types are the SDK's; each protocol lists what this code calls and no more,
so a backend owes nothing else. Data crosses as the SDK's `tinker.types`.

At run time this module imports neither torch nor tinker: `thinker.engine` stays light.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from tinker import types
    from torch import Tensor
    from transformers import PreTrainedTokenizerBase

T_co = TypeVar("T_co", covariant=True)

# `forward_backward_custom`'s loss: (data, each datum's target logprobs) -> (loss, metrics),
# run under autograd by the caller. A string: its types are imported for type checking only.
CustomLossFn: TypeAlias = (
    "Callable[[list[types.Datum], list[Tensor]], tuple[Tensor, dict[str, float]]]"
)


class APIFuture(Protocol[T_co]):
    """What every engine call returns: the SDK's `APIFuture`, the local `EngineFuture`.

    `await fut` or `fut.result()`. Calls on one client run in submission order, so a loop
    submits `forward_backward` and `optim_step` before waiting for either.
    """

    def result(self, timeout: float | None = None) -> T_co:
        """The value, blocking until it is there (at most `timeout` seconds)."""
        ...

    def future(self) -> Future[Any]:
        """The underlying `concurrent.futures.Future`, to wait on many at once with
        `concurrent.futures.wait` (then read each with `result()`, which no longer blocks)."""
        ...

    def __await__(self) -> Generator[Any, None, T_co]: ...


class SamplingClient(Protocol):
    """Samples from, and scores with, one set of frozen weights."""

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
    ) -> APIFuture[types.SampleResponse]:
        """`num_samples` completions of `prompt`, with each sampled token's logprob."""
        ...

    def compute_logprobs(self, prompt: types.ModelInput) -> APIFuture[list[float | None]]:
        """log p(token i | tokens before i) for each token of `prompt`; None at position 0."""
        ...

    def get_tokenizer(self) -> PreTrainedTokenizerBase: ...


def together(client: object) -> contextlib.AbstractContextManager[object]:
    """A block whose requests to `client` are batched together: the local sampler's `burst`
    (it otherwise batches requests by arrival, so that timing would decide which share a batch
    and, in the last bits, their logprobs). Elsewhere a no-op: Tinker's service batches as
    it will."""
    burst = getattr(client, "burst", None)
    return burst() if burst is not None else contextlib.nullcontext()


class TrainingClient(Protocol):
    """A LoRA adapter being trained: gradients accumulate until `optim_step` applies them."""

    def forward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """The loss and each datum's logprobs, gradients untouched."""
        ...

    def forward_backward(
        self,
        data: list[types.Datum],
        loss_fn: types.LossFnType,
        loss_fn_config: Mapping[str, float] | None = None,
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """As `forward`, and the loss's gradient added to the adapter's."""
        ...

    def forward_backward_custom(
        self, data: list[types.Datum], loss_fn: CustomLossFn
    ) -> APIFuture[types.ForwardBackwardOutput]:
        """`loss_fn(data, logprobs)` differentiated through the model (how DPO trains)."""
        ...

    def optim_step(
        self, optim_params: types.AdamParams | None = None
    ) -> APIFuture[types.OptimStepResponse]:
        """One AdamW step with these settings; the gradients are then cleared."""
        ...

    def save_state(
        self, name: str, ttl_seconds: int | None = None
    ) -> APIFuture[types.SaveWeightsResponse]:
        """Weights and optimizer state, as `<scheme>://<run>/weights/<name>` (the SDK's
        argument order: the second is a time to live)."""
        ...

    def save_weights_for_sampler(
        self, name: str, ttl_seconds: int | None = None
    ) -> APIFuture[types.SaveWeightsForSamplerResponse]:
        """The weights alone, as `<scheme>://<run>/sampler_weights/<name>`."""
        ...

    def save_weights_and_get_sampling_client(
        self, name: str | None = None
    ) -> APIFuture[SamplingClient]:
        """A sampler frozen at the current weights (saved as sampler weights if named)."""
        ...

    def get_tokenizer(self) -> PreTrainedTokenizerBase: ...

    def get_info(self) -> types.GetInfoResponse: ...


class ServiceClient(Protocol):
    """Creates training and sampling clients: `thinker.ServiceClient` and each backend's."""

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
    ) -> APIFuture[TrainingClient]:
        """A new LoRA adapter on `base_model`."""
        ...

    def create_training_client_from_state(self, path: str) -> APIFuture[TrainingClient]:
        """The weights of a `save_state` checkpoint, with a fresh optimizer."""
        ...

    def create_training_client_from_state_with_optimizer(
        self, path: str
    ) -> APIFuture[TrainingClient]:
        """A `save_state` checkpoint resumed exactly: weights, optimizer state and step."""
        ...

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None
    ) -> APIFuture[SamplingClient]:
        """A sampler of saved sampler weights (`model_path`) or of a base model."""
        ...


# ---- local-engine extras, which the algorithms look for with getattr ----------------------


class MemoryBudget(Protocol):
    """How many tokens one forward/backward pass can hold in the memory free now, and why."""

    @property
    def tokens(self) -> int: ...

    @property
    def explanation(self) -> str: ...


class MemoryBudgeted(Protocol):
    """A training client that knows its memory (the local engine's; Tinker manages its own)."""

    def memory_budget(self, longest: int = 0) -> MemoryBudget:
        """The budget with the gradient checkpointing a `longest`-token sequence needs."""
        ...
