"""`backend="tinker"`: the official tinker SDK behind `thinker.ServiceClient`, with bounded waits.

Training and sampling need no wrapping: each `create_*` call here gives the SDK's own
`tinker.TrainingClient` / `tinker.SamplingClient`, whose calls already return APIFutures. What
this module adds is what the SDK lacks at first contact:

- a missing API key fails at construction, saying how to set one, not at the first call;
- an unreachable service fails within `timeout_s` (default 30 s) instead of after the SDK's
  ~300 s of silent retries. Those retries run inside the *synchronous* part of the SDK's
  `create_*` calls (the session setup), where `asyncio.wait_for` cannot reach them. So every
  creation first probes `<base_url>/api/v1/healthz` (any HTTP answer counts as reachable), then
  runs the SDK call on a daemon thread and waits on it with a timeout. The SDK's future of the
  client is then waited on in slices of `timeout_s`, re-probing between slices: a service that
  still answers may be queueing the request (the SDK allows minutes for that), one that stops
  answering fails the creation;
- the key never appears in a repr, a log line or an error message: it lives in a `SecretStr`
  and is replaced by "***" in every error text passed on.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx
import tinker
from pydantic import SecretStr
from tinker import types
from tinker.lib.base_url import resolve_base_url

from thinker.engine import protocols
from thinker.engine.futures import EngineFuture
from thinker.errors import BackendError, ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")
C = TypeVar("C", tinker.TrainingClient, tinker.SamplingClient)

DEFAULT_TIMEOUT_S = 30.0
TIMEOUT_ENV = "THINKER_TINKER_TIMEOUT_S"
HEALTH_PATH = "/api/v1/healthz"
MISSING_KEY_MESSAGE = (
    "No Tinker API key. Set one with `export TINKER_API_KEY=tml-...`, or pass api_key=... to "
    'thinker.ServiceClient(backend="tinker").'
)


class TinkerServiceClient:
    """Creates clients on the Tinker service through the official SDK.

    Args:
        base_url: default `TINKER_BASE_URL`, else the SDK's hosted service.
        api_key: default `TINKER_API_KEY`; required. Never printed or logged.
        timeout_s: how long first contact may take before a clear error; default
            `THINKER_TINKER_TIMEOUT_S`, else 30 s.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = None,
        sdk_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """`sdk_kwargs`: the rest of `tinker.ServiceClient`'s arguments (user_metadata,
        project_id, display_name, default_headers_overrides, its client's keywords)."""
        self._sdk_kwargs = dict(sdk_kwargs or {})
        self._api_key = _resolve_api_key(api_key)
        self.base_url = _resolve_base_url(base_url)
        self.timeout_s = _resolve_timeout(timeout_s)
        # Built on first use: constructing the client object sends nothing, but stays lazy so
        # that a failed session setup can be dropped and retried with a fresh one.
        self._sdk: tinker.ServiceClient | None = None
        self._sdk_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TinkerServiceClient(base_url={self.base_url!r}, timeout_s={self.timeout_s:g})"

    def create_lora_training_client(
        self,
        base_model: str,
        rank: int = 32,
        seed: int | None = None,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        **sdk_kwargs: Any,
    ) -> EngineFuture[tinker.TrainingClient]:
        """A new LoRA adapter on `base_model`; the future gives the SDK's `TrainingClient`.
        `sdk_kwargs`: the SDK's other arguments (user_metadata, optimizer)."""
        return self._create(
            "a LoRA training client",
            lambda sdk: sdk.create_lora_training_client(
                base_model,
                rank=rank,
                seed=seed,
                train_mlp=train_mlp,
                train_attn=train_attn,
                train_unembed=train_unembed,
                **sdk_kwargs,
            ),
        )

    def create_training_client_from_state(
        self, path: str, **sdk_kwargs: Any
    ) -> EngineFuture[tinker.TrainingClient]:
        """A training client with the weights of `path`, fresh optimizer."""
        return self._create(
            "a training client from state",
            lambda sdk: sdk.create_training_client_from_state(path, **sdk_kwargs),
        )

    def create_training_client_from_state_with_optimizer(
        self, path: str, **sdk_kwargs: Any
    ) -> EngineFuture[tinker.TrainingClient]:
        """A training client with the weights and optimizer state of `path`."""
        return self._create(
            "a training client from state with optimizer",
            lambda sdk: sdk.create_training_client_from_state_with_optimizer(path, **sdk_kwargs),
        )

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None, **sdk_kwargs: Any
    ) -> EngineFuture[tinker.SamplingClient]:
        """A sampling client of sampler weights or of a base model."""
        return self._create(
            "a sampling client",
            lambda sdk: sdk.create_sampling_client(
                model_path=model_path, base_model=base_model, **sdk_kwargs
            ),
        )

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        """The service's own list of models (the SDK's call)."""
        return self._sdk_client().get_server_capabilities()

    def close(
        self,
        status: Literal["success", "errored", "interrupted"] = "success",
        detail: str | None = None,
    ) -> None:
        """Finish the Tinker session with `status`, if one was opened; waits at most
        `timeout_s`."""
        with self._sdk_lock:
            sdk, self._sdk = self._sdk, None
        if sdk is None:
            return
        closing = _in_daemon_thread(lambda: sdk.close(status, detail).result())
        if not wait([closing], timeout=self.timeout_s).done or closing.exception() is not None:
            logger.warning("Tinker session at %s did not close cleanly", self.base_url)

    def _create(
        self, what: str, submit: Callable[[tinker.ServiceClient], tinker.APIFuture[C]]
    ) -> EngineFuture[C]:
        # On a daemon thread, not a pool: a thread stuck in the SDK's retries must not hold
        # up interpreter exit (pool threads are joined at exit).
        return EngineFuture(_in_daemon_thread(lambda: self._create_now(what, submit)))

    def _create_now(
        self, what: str, submit: Callable[[tinker.ServiceClient], tinker.APIFuture[C]]
    ) -> C:
        reason = self._probe()
        if reason is not None:
            raise BackendError(self._unreachable(reason))
        sdk = self._sdk_client()
        started = _in_daemon_thread(lambda: submit(sdk))
        if not wait([started], timeout=self.timeout_s).done:
            self._forget(sdk)  # its thread may retry for minutes; the next call starts afresh
            raise BackendError(
                self._unreachable("it answers HTTP, but the SDK's session setup did not finish")
            )
        return self._wait_for_client(what, self._outcome(what, started).future())

    def _wait_for_client(self, what: str, future: Future[C]) -> C:
        while not wait([future], timeout=self.timeout_s).done:
            reason = self._probe()
            if reason is not None:
                future.cancel()
                raise BackendError(self._unreachable(reason))
            logger.info(
                "Still waiting for Tinker to create %s at %s; the service answers, so it may "
                "be queueing the request",
                what,
                self.base_url,
            )
        return self._outcome(what, future)

    def _outcome(self, what: str, future: Future[T]) -> T:
        """The future's value, or a BackendError with the key scrubbed out and no chained cause."""
        error = future.exception()
        if error is None:
            return future.result()
        detail = f"{type(error).__name__}: {error}"
        if isinstance(error, tinker.APIConnectionError):
            raise BackendError(self._unreachable(detail))
        raise BackendError(
            self._scrub(f"Tinker could not create {what} at {self.base_url}: {detail}")
        )

    def _probe(self) -> str | None:
        """None when the service gives any HTTP answer within the timeout, else why not."""
        try:
            with (
                httpx.Client(timeout=self.timeout_s) as http,
                http.stream("GET", self.base_url + HEALTH_PATH),
            ):
                return None
        except httpx.TimeoutException as error:
            return f"no answer within {self.timeout_s:g} s: {type(error).__name__}"
        except httpx.HTTPError as error:  # refused, DNS, TLS, protocol errors
            return self._scrub(f"{type(error).__name__}: {error}")

    def _unreachable(self, reason: str) -> str:
        return self._scrub(
            f"Tinker service at {self.base_url} is not reachable within {self.timeout_s:g} s "
            f"({reason}). Check TINKER_BASE_URL and your network; set {TIMEOUT_ENV} to wait "
            "longer."
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key.get_secret_value(), "***")

    def _sdk_client(self) -> tinker.ServiceClient:
        with self._sdk_lock:
            if self._sdk is None:
                self._sdk = tinker.ServiceClient(
                    base_url=self.base_url,
                    api_key=self._api_key.get_secret_value(),
                    **self._sdk_kwargs,
                )
            return self._sdk

    def _forget(self, sdk: tinker.ServiceClient) -> None:
        with self._sdk_lock:
            if self._sdk is sdk:
                self._sdk = None


def _resolve_api_key(api_key: str | None) -> SecretStr:
    key = (api_key or os.environ.get("TINKER_API_KEY") or "").strip()
    if not key:
        raise BackendError(MISSING_KEY_MESSAGE)
    return SecretStr(key)


def _resolve_base_url(base_url: str | None) -> str:
    url = resolve_base_url(base_url)
    try:
        scheme = httpx.URL(url).scheme
    except httpx.InvalidURL as error:
        raise ConfigError(f"Tinker base URL {url!r} is not a valid URL: {error}") from None
    if scheme not in ("http", "https"):
        raise ConfigError(f"Tinker base URL {url!r} must start with http:// or https://")
    return url


def _resolve_timeout(timeout_s: float | None) -> float:
    raw: float | str = timeout_s if timeout_s is not None else os.environ.get(TIMEOUT_ENV, "")
    if raw == "":
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"the Tinker timeout must be a positive number of seconds, got {raw!r}")
    return value


def _in_daemon_thread(fn: Callable[[], T]) -> Future[T]:
    """Runs `fn` on a fresh daemon thread; the returned future gives its outcome."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as error:  # handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=run, name="thinker-tinker", daemon=True).start()
    return future


if TYPE_CHECKING:  # mypy proves that the SDK's clients keep the contract; nothing runs

    def _keeps_the_contract(
        service: TinkerServiceClient,
        training: tinker.TrainingClient,
        sampling: tinker.SamplingClient,
    ) -> tuple[protocols.ServiceClient, protocols.TrainingClient, protocols.SamplingClient]:
        return service, training, sampling
