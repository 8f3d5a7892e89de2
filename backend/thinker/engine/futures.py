"""Engine futures: awaitable and `.result()`-able, like the tinker SDK's APIFuture."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class EngineFuture(Generic[T]):
    """A handle on work submitted to an engine; `await fut` or `fut.result()` gives its value."""

    def __init__(self, future: Future[T]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> T:
        return self._future.result(timeout)

    async def result_async(self, timeout: float | None = None) -> T:
        async with asyncio.timeout(timeout):
            return await asyncio.wrap_future(self._future)

    def done(self) -> bool:
        return self._future.done()

    def future(self) -> Future[T]:
        return self._future

    def __await__(self) -> Generator[Any, None, T]:
        return asyncio.wrap_future(self._future).__await__()

    @classmethod
    def completed(cls, value: T) -> EngineFuture[T]:
        future: Future[T] = Future()
        future.set_result(value)
        return cls(future)


class ClientFuture(EngineFuture[T]):
    """The future of a client-creation call, which also serves, deprecated, as the client:
    the tinker SDK's futures do (`BackcompatTrainingClientFuture`), and code written for it
    calls methods on them directly. Any public attribute the future lacks is read from the
    finished client, with the SDK's FutureWarning."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        warnings.warn(
            f"Reading `.{name}` from the future returned by a client-creation method is "
            "deprecated (as in the tinker SDK): call .result() on the future, or await it, "
            "to get the client first.",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self.result(), name)


class OrderedExecutor:
    """Runs submitted calls one at a time, in submission order, on one worker thread.

    One per loaded model: training and sampling on the same weights never interleave, and
    `forward_backward` then `optim_step` can both be submitted before either is awaited.
    """

    def __init__(self, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> EngineFuture[T]:
        return EngineFuture(self._pool.submit(fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
