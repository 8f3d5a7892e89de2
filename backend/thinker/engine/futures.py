"""Engine futures: awaitable and `.result()`-able, like the tinker SDK's APIFuture."""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import warnings
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

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

    def __init__(self, name: str, on_start: Callable[[], None] | None = None) -> None:
        """`on_start` runs first on the worker thread (the local engine pins it to its GPU)."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._started = _Start(on_start)

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> EngineFuture[T]:
        return EngineFuture(self._pool.submit(self._started.then, fn, *args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


class Serial(Protocol):
    """Runs submitted calls one at a time, in submission order (an OrderedExecutor, or one
    client's lane of a FairExecutor)."""

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> EngineFuture[T]: ...


class FairExecutor:
    """One worker thread for several clients of one model, each with its own lane.

    A lane runs its calls in submission order (a client's `forward_backward` before its
    `optim_step`); the worker takes one call from each lane with work in turn (round robin),
    so a client that queues a hundred calls delays another's next call by one call, not a
    hundred. Before a call the lane's `before` runs on the worker (a client activates its
    adapter there). Used where training clients share one copy of a base model's weights.
    The worker is a one-thread pool that runs, for each call submitted, the next call in
    turn, so it starts, idles and ends at exit as an OrderedExecutor's does.
    """

    def __init__(self, name: str, on_start: Callable[[], None] | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._started = _Start(on_start)
        self._lanes: collections.OrderedDict[int, collections.deque[_Call]] = (
            collections.OrderedDict()
        )
        self._closed: set[int] = set()  # lanes that take no more calls
        self._lock = threading.Lock()
        self._next_lane = itertools.count()

    def lane(self, before: Callable[[], None] | None = None) -> Lane:
        """A new client's lane."""
        with self._lock:
            key = next(self._next_lane)
            self._lanes[key] = collections.deque()
        return Lane(self, key, before)

    def _put(self, key: int, call: _Call) -> None:
        with self._lock:
            if key not in self._lanes or key in self._closed:
                raise RuntimeError("this client's lane is closed: it takes no more calls")
            if call.closes:
                self._closed.add(key)
            self._lanes[key].append(call)
        self._pool.submit(self._run_next)  # one turn of the worker for each call queued

    def _take(self) -> tuple[int, _Call]:
        with self._lock:
            for key, queue in self._lanes.items():
                if queue:
                    self._lanes.move_to_end(key)  # this lane goes to the back of the turn
                    call = queue.popleft()
                    if call.closes:  # the last call of its lane
                        del self._lanes[key]
                        self._closed.discard(key)
                    return key, call
        raise AssertionError("a turn of the worker with no call queued")

    def _run_next(self) -> None:
        _, call = self._take()
        if call.closes or call.future is None or call.run is None:
            return
        if not call.future.set_running_or_notify_cancel():
            return
        try:
            result = self._started.then(call.run)
        except BaseException as e:  # noqa: BLE001 - the caller's future carries it
            call.future.set_exception(e)
        else:
            call.future.set_result(result)


class _Start:
    """A worker thread's `on_start`, run before its first call. Not the pool's initializer:
    one that raises there breaks the pool, and work handed to the worker indirectly (a
    sampling client's waiting calls) would wait forever; here every call gets the error."""

    def __init__(self, on_start: Callable[[], None] | None) -> None:
        self._on_start = on_start
        self._error: Exception | None = None

    def then(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._on_start is not None:  # only ever on the one worker thread
            on_start, self._on_start = self._on_start, None
            try:
                on_start()
            except Exception as e:  # noqa: BLE001 - every call of this worker reports it
                self._error = e
        if self._error is not None:
            raise RuntimeError(
                f"the engine's worker thread could not start: {self._error}"
            ) from self._error
        return fn(*args, **kwargs)


@dataclass
class _Call:
    run: Callable[[], Any] | None
    future: Future[Any] | None
    closes: bool = False  # a marker: the lane closes once the calls before it have run


class Lane:
    """One client's queue on a FairExecutor."""

    def __init__(self, executor: FairExecutor, key: int, before: Callable[[], None] | None) -> None:
        self._executor, self._key, self._before = executor, key, before

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> EngineFuture[T]:
        before = self._before

        def run() -> T:
            if before is not None:
                before()
            return fn(*args, **kwargs)

        future: Future[T] = Future()
        self._executor._put(self._key, _Call(run, future))
        return EngineFuture(future)

    def close(self) -> None:
        """No more calls; the queued ones still run."""
        self._executor._put(self._key, _Call(None, None, closes=True))
