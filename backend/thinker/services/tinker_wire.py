"""Tinker's HTTP protocol over the local engine: sessions, models, futures and samplers.

The unmodified `tinker` SDK, given a Thinker server's root as `base_url`, speaks this protocol
(its `/api/v1/...` routes, server/routes/tinker_api.py). This module is what those routes call:
it keeps the protocol's state and runs the work on the local engine of this process.

- A session (`create_session`) groups a client's models and samplers; its heartbeats are
  recorded, and `finish` ends it.
- A model (`create_model`, or `load_weights` with a session) is a LoRA training client of the
  engine, `"{session}:train:{n}"` as the SDK expects. Its requests carry `seq_id` 1, 2, 3...,
  and the SDK sends the next before the last has run (and a large `forward_backward`'s chunks
  concurrently, the first last), so they are started strictly in `seq_id` order: a request
  that arrives early waits for those before it. A retried submission (the same `seq_id`)
  gets the first one's future, never runs twice.
- Every operation answers at once with a request id; its result is polled
  (`result`), which waits up to `POLL_WAIT_S` for the work before telling the client to try
  again. A result is JSON (a dict), or protobuf bytes for the two the SDK reads only as
  protobuf (`forward_backward`'s output and samples). A failed operation's result is
  `{"error", "category"}`: "user" for bad input, "server" otherwise.
- A sampler (`create_sampling_session`, or a training client's
  `save_weights_and_get_sampling_client`) is a sampling client of the engine,
  `"{session}:sample:{n}"`. Each sample's sequences get ids unique on this server, which the
  SDK 0.38 requires.
- Each model is a platform run (services/sdk_runs.py): a job, live in the dashboard, whose
  sampler checkpoints enter the model library. Cancelling the job stops the model: its pending
  and later requests fail with the reason. The job ends when the session does: `finish`, or
  no heartbeat for `session_expires_s` (the SDK sends one every 10 s).

State lives in this process: after a restart, the SDK's polls of an older request are
answered 410 ("the server restarted") and fail at once instead of hanging, and its models and
samplers are gone (their checkpoints stay: load them again).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tinker import types
from tinker.proto import tinker_public_pb2 as pb
from tinker.types._pydantic_types.tensor_data import TensorData as TensorDataModel
from tinker.types.topk_logprobs import TopkLogprobs

from thinker.engine.futures import EngineFuture
from thinker.engine.local.sampling import LocalSamplingClient
from thinker.engine.local.service import LocalServiceClient
from thinker.engine.local.training import LocalTrainingClient
from thinker.errors import ConfigError, DatasetError, NotFoundError, ThinkerError
from thinker.jobs.states import JobState
from thinker.services.sdk_runs import SdkRun, SdkRuns

POLL_WAIT_S = 20.0  # a poll waits this long for its result (the SDK's own timeout is 45 s)
KEEP_RESULTS_S = 600.0  # a finished request's result stays this long for the client to read
# A session without a heartbeat this long has ended (the SDK warns after 120 s without one).
SESSION_EXPIRES_S = 120.0
# How a session's end (the SDK's finish reason, or "expired") ends its runs' jobs.
_END_OF_SESSION: dict[str, tuple[JobState, str]] = {
    "success": (JobState.SUCCEEDED, "the SDK client closed its session"),
    "errored": (JobState.FAILED, "the SDK client closed its session as errored"),
    "interrupted": (JobState.INTERRUPTED, "the SDK client closed its session as interrupted"),
    "expired": (JobState.SUCCEEDED, "the SDK client stopped sending heartbeats"),
}
Result = dict[str, Any] | bytes  # JSON, or a serialized protobuf message
log = logging.getLogger("thinker.tinker_wire")


class ExpiredError(ThinkerError):
    """A request id this server does not know: issued before a restart, or long expired."""


class StoppedError(ThinkerError, RuntimeError):
    """A request on a model that was stopped (from the dashboard) or whose session ended."""


@dataclass
class Session:
    session_id: str
    user_metadata: dict[str, str]
    tags: list[str]
    display_name: str | None
    created: float = field(default_factory=time.time)
    last_heartbeat: float = field(default_factory=time.time)
    finished: str | None = None  # the reason the client gave
    ended: tuple[JobState, str] | None = None  # once finished: how its runs' jobs end, and why
    model_ids: list[str] = field(default_factory=list)
    sampler_ids: list[str] = field(default_factory=list)
    next_model_seq: int = 0


@dataclass
class WireModel:
    """A training client, and its requests in `seq_id` order."""

    model_id: str
    session_id: str
    client: LocalTrainingClient | None  # None once stopped: its adapter is freed
    next_seq: int = 1
    # Requests that arrived before one with a lower seq_id: how to start each, its result's
    # future and how to turn its value into the wire's form.
    waiting: dict[
        int, tuple[Callable[[], Future[Any]], Future[Result], Callable[[Any], Result]]
    ] = field(default_factory=dict)
    request_of_seq: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    run: SdkRun | None = None  # its job (None without SdkRuns)
    stopped: str | None = None  # why its requests now fail


@dataclass
class Sampler:
    sampler_id: str
    client: LocalSamplingClient
    base_model: str
    model_path: str | None


@dataclass
class _Pending:
    kind: str
    future: Future[Result]
    finished_at: float | None = None


class TinkerWire:
    """The protocol's state over one local engine (a `LocalServiceClient`)."""

    def __init__(
        self,
        storage_dir: Path,
        device: str | None = None,
        runs: SdkRuns | None = None,
        session_expires_s: float = SESSION_EXPIRES_S,
    ) -> None:
        self.engine = LocalServiceClient(storage_dir=storage_dir, device=device)
        self.runs = runs
        self.session_expires_s = session_expires_s
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tinker-wire")
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._instance = uuid.uuid4().hex[:6]  # request ids of this process only
        self.sessions: dict[str, Session] = {}
        self.models: dict[str, WireModel] = {}
        self.samplers: dict[str, Sampler] = {}
        self._pending: dict[str, _Pending] = {}
        self._closing = threading.Event()
        threading.Thread(target=self._expire, name="tinker-wire-expiry", daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- sessions ------------------------------------------------------------------------
    def create_session(self, request: types.CreateSessionRequest) -> str:
        session_id = f"sess-{uuid.uuid4().hex[:12]}"
        metadata = dict(request.user_metadata or {})
        display_name = getattr(request, "display_name", None)
        with self._lock:
            self.sessions[session_id] = Session(
                session_id, metadata, list(request.tags or []), display_name
            )
        return session_id

    def session(self, session_id: str) -> Session:
        found = self.sessions.get(session_id)
        if found is None:
            raise NotFoundError(f"no session {session_id!r} on this server")
        return found

    def heartbeat(self, session_id: str) -> bool:
        """Record a heartbeat; False when the session has finished (the SDK then stops)."""
        session = self.session(session_id)
        session.last_heartbeat = time.time()
        return session.finished is None

    def finish(self, session_id: str, reason: str, detail: str | None = None) -> None:
        """End a session (the first reason wins): its models stop, their jobs end."""
        session = self.session(session_id)
        state, why = _END_OF_SESSION.get(reason, _END_OF_SESSION["success"])
        if reason == "expired":
            why += f" (none for {self.session_expires_s:g} s)"
        if detail:
            why += f": {detail}"
        with self._lock:
            if session.finished is not None:
                return
            session.finished, session.ended = reason, (state, why)
            models = [self.models[m] for m in session.model_ids]
        for model in models:
            self._end(model, session)

    def _end(self, model: WireModel, session: Session) -> None:
        """A model of a finished session: its requests fail, its job ends."""
        assert session.ended is not None
        state, why = session.ended
        self._stop(model, f"its session {session.session_id} has ended ({why})")
        if model.run is not None:
            model.run.end(state, why)

    def _expire(self) -> None:
        """End the sessions whose heartbeats stopped (a client that exited without closing)."""
        while not self._closing.wait(min(5.0, self.session_expires_s / 4)):
            cutoff = time.time() - self.session_expires_s
            for session in list(self.sessions.values()):
                if session.finished is None and session.last_heartbeat < cutoff:
                    self.finish(session.session_id, "expired")

    # ---- models --------------------------------------------------------------------------
    def create_model(
        self, request: types.CreateModelRequest, token_id: str | None = None
    ) -> tuple[str, str]:
        """Start loading a LoRA training client; (request id, model id). `token_id`: the API
        token the client sent (auth on), recorded on its job."""
        session = self.session(request.session_id)
        model_id = self._model_id(session, request.model_seq_id)
        lora = request.lora_config or types.LoraConfig(rank=32)

        def create() -> LocalTrainingClient:
            return self.engine.create_lora_training_client(
                request.base_model,
                rank=lora.rank,
                seed=lora.seed,
                train_mlp=lora.train_mlp,
                train_attn=lora.train_attn,
                train_unembed=lora.train_unembed,
            ).result()

        started = self._start_model(session, model_id, "CreateModel", create, token_id, {})
        return started, model_id

    def load_model(
        self, request: types.LoadWeightsRequest, token_id: str | None = None
    ) -> tuple[str, str | None]:
        """`load_weights`: with a session, a new training client from a saved state; with a
        model, that model's `load_state` in its request order. (request id, model id)."""
        optimizer = bool(request.optimizer)
        if request.model_id is not None:
            return self.submit(
                request.model_id,
                request.seq_id,
                "LoadWeights",
                lambda c: (c.load_state_with_optimizer if optimizer else c.load_state)(
                    request.path
                ),
                lambda value: {"type": "load_weights"},
            ), request.model_id
        if request.session_id is None:
            raise ConfigError("load_weights needs a session_id (a new model) or a model_id")
        session = self.session(request.session_id)
        model_id = self._model_id(session, request.model_seq_id)

        def load() -> LocalTrainingClient:
            from_state = (
                self.engine.create_training_client_from_state_with_optimizer
                if optimizer
                else self.engine.create_training_client_from_state
            )
            return from_state(request.path).result()

        origin = {"loaded_from": request.path}
        started = self._start_model(session, model_id, "LoadWeights", load, token_id, origin)
        return started, model_id

    def model(self, model_id: str) -> WireModel:
        found = self.models.get(model_id)
        if found is None:
            raise NotFoundError(f"no model {model_id!r} on this server (created before a restart?)")
        return found

    def get_info(self, model_id: str) -> types.GetInfoResponse:
        model = self.model(model_id)
        client = model.client
        if client is None:
            raise StoppedError(model.stopped or "the model was stopped")
        info = client.get_info()
        return info.model_copy(update={"model_id": model_id})

    def submit(
        self,
        model_id: str,
        seq_id: int | None,
        kind: str,
        start: Callable[[LocalTrainingClient], EngineFuture[Any]],
        to_wire: Callable[[Any], Result],
        record: Callable[[SdkRun, Any], None] | None = None,
    ) -> str:
        """Queue a model's request to start after those with lower `seq_id`; its request id.
        `record`: what its value adds to the model's run (metrics, a checkpoint)."""
        model = self.model(model_id)
        with model.lock:
            if seq_id is not None and seq_id in model.request_of_seq:
                return model.request_of_seq[seq_id]  # a retried submission
            request_id, out = self._new_request(kind)
            if model.stopped is not None:
                out.set_result(failure(StoppedError(model.stopped)))
                return request_id
            if seq_id is None:
                seq_id = max([model.next_seq - 1, *model.waiting]) + 1
            if seq_id < model.next_seq:
                raise ConfigError(
                    f"seq_id {seq_id} of {model_id} comes after {model.next_seq - 1}: requests "
                    "of a model are numbered 1, 2, 3..."
                )
            model.request_of_seq[seq_id] = request_id

            def begin() -> Future[Any]:
                client = model.client
                if client is None:
                    raise StoppedError(model.stopped or "the model was stopped")
                if kind == "ForwardBackward" and model.run is not None:
                    model.run.began()
                return start(client).future()

            def finished(value: Any) -> Result:
                if model.stopped is not None:  # stopped while it ran
                    raise StoppedError(model.stopped)
                if record is not None and model.run is not None:
                    _record(model.run, record, value)
                return to_wire(value)

            model.waiting[seq_id] = (begin, out, finished)
            while model.next_seq in model.waiting:
                begin, target, convert = model.waiting.pop(model.next_seq)
                model.next_seq += 1
                self._chain(begin, target, convert)
        return request_id

    def stop_model(self, model_id: str, reason: str) -> None:
        """Stop a model (its job was cancelled): its pending and later requests fail."""
        self._stop(self.model(model_id), reason)

    def _stop(self, model: WireModel, reason: str) -> None:
        """Its waiting and later requests fail; the training client is let go, so that its
        adapter, gradients and optimizer state are freed once its running call ends (the
        shared base frees an adapter when its client goes)."""
        with model.lock:
            if model.stopped is None:
                model.stopped = reason
            waiting = [out for _, out, _ in model.waiting.values()]
            model.waiting.clear()
            model.client = None
        for out in waiting:
            out.set_result(failure(StoppedError(model.stopped)))

    # ---- sampling ------------------------------------------------------------------------
    def create_sampling_session(self, request: types.CreateSamplingSessionRequest) -> str:
        session = self.session(request.session_id)
        sampler_id = f"{session.session_id}:sample:{request.sampling_session_seq_id}"
        client = self.engine.create_sampling_client(
            model_path=request.model_path, base_model=request.base_model
        ).result()
        self._add_sampler(session, sampler_id, client)
        return sampler_id

    def sampler_for_training(self, model_id: str, sampling_seq_id: int) -> Callable[[Any], Result]:
        """The result of `save_weights_for_sampler` with no name: the sampling client it
        made, registered as `"{session}:sample:{n}"`."""
        model = self.model(model_id)
        session = self.session(model.session_id)
        sampler_id = f"{session.session_id}:sample:{sampling_seq_id}"

        def to_wire(client: LocalSamplingClient) -> Result:
            self._add_sampler(session, sampler_id, client)
            return {"sampling_session_id": sampler_id, "type": "save_weights_for_sampler"}

        return to_wire

    def sampler(self, sampler_id: str) -> Sampler:
        found = self.samplers.get(sampler_id)
        if found is None:
            raise NotFoundError(f"no sampler {sampler_id!r} on this server")
        return found

    def sample(self, request: types.SampleRequest) -> tuple[str, list[str]]:
        """Start a sample; (request id, the id of each sequence it will return)."""
        if request.sampling_session_id is None:
            raise ConfigError("sample needs a sampling_session_id (create_sampling_session)")
        sampler = self.sampler(request.sampling_session_id)
        request_id, out = self._new_request("Sample")
        sequence_ids = [f"{request_id}:{i}" for i in range(request.num_samples)]

        def begin() -> Future[Any]:
            return sampler.client.sample(
                request.prompt,
                request.num_samples,
                request.sampling_params,
                include_prompt_logprobs=bool(request.prompt_logprobs),
                topk_prompt_logprobs=request.topk_prompt_logprobs or 0,
                topk_sample_logprobs=request.topk_sample_logprobs or 0,
                target_prompt_logprobs=_target_ids(request.target_prompt_logprobs),
                prompt_alt_tokens_k=request.prompt_alt_tokens_k or 0,
                prompt_logprobs_last_n=request.prompt_logprobs_last_n,
            ).future()

        self._chain(begin, out, sample_response_bytes)
        return request_id, sequence_ids

    # ---- futures -------------------------------------------------------------------------
    async def result(self, request_id: str, wait_s: float = POLL_WAIT_S) -> Result | None:
        """The request's result, waiting up to `wait_s` for it; None if it is not done yet."""
        pending = self._pending.get(request_id)
        if pending is None:
            raise ExpiredError(
                f"unknown request {request_id!r}: issued before this server restarted, or its "
                f"result expired ({KEEP_RESULTS_S:.0f} s after it finished)"
            )
        try:
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(pending.future)), wait_s
            )
        except TimeoutError:
            return None

    def _new_request(self, kind: str) -> tuple[str, Future[Result]]:
        self._prune()
        request_id = f"req-{self._instance}-{next(self._ids)}"
        future: Future[Result] = Future()
        pending = _Pending(kind, future)
        future.add_done_callback(lambda _: setattr(pending, "finished_at", time.time()))
        with self._lock:
            self._pending[request_id] = pending
        return request_id, future

    def _prune(self) -> None:
        cutoff = time.time() - KEEP_RESULTS_S
        with self._lock:
            for request_id, pending in list(self._pending.items()):
                if pending.finished_at is not None and pending.finished_at < cutoff:
                    del self._pending[request_id]

    def _chain(
        self,
        begin: Callable[[], Future[Any]],
        out: Future[Result],
        to_wire: Callable[[Any], Result],
    ) -> None:
        """Start the work; its value, turned into the wire's form, or its error, lands in
        `out` (as `{"error", "category"}`: a failed request is a result, not an exception)."""

        def land(work: Future[Any]) -> None:
            try:
                out.set_result(to_wire(work.result()))
            except Exception as e:  # noqa: BLE001 - every failure is the client's result
                out.set_result(failure(e))

        try:
            work = begin()
        except Exception as e:  # noqa: BLE001 - refused before it started
            out.set_result(failure(e))
            return
        work.add_done_callback(land)

    def _model_id(self, session: Session, model_seq_id: int) -> str:
        return f"{session.session_id}:train:{model_seq_id}"

    def _start_model(
        self,
        session: Session,
        model_id: str,
        kind: str,
        make: Callable[[], LocalTrainingClient],
        token_id: str | None,
        config: dict[str, Any],
    ) -> str:
        if session.ended is not None:
            raise ConfigError(
                f"session {session.session_id} has ended ({session.ended[1]}): create a new "
                "ServiceClient"
            )
        request_id, out = self._new_request(kind)

        def registered(client: LocalTrainingClient) -> Result:
            model = WireModel(model_id, session.session_id, client)
            if self.runs is not None:  # its job, before the client hears of the model
                model.run = self.runs.open(
                    client,
                    {
                        "session_id": session.session_id,
                        "model_id": model_id,
                        "user_metadata": session.user_metadata,
                        **config,
                    },
                    session.display_name or "tinker-sdk",
                    token_id,
                    stop=lambda reason: self._stop(model, reason),
                    last_seen=lambda: session.last_heartbeat,
                )
            with self._lock:
                self.models[model_id] = model
                session.model_ids.append(model_id)
                ended = session.ended is not None  # it finished while the model loaded
            if ended:
                self._end(model, session)
            if kind == "LoadWeights":
                return {"type": "load_weights"}
            return {"model_id": model_id, "type": "create_model"}

        self._chain(lambda: self._pool.submit(make), out, registered)
        return request_id

    def _add_sampler(self, session: Session, sampler_id: str, client: LocalSamplingClient) -> None:
        with self._lock:
            self.samplers[sampler_id] = Sampler(
                sampler_id, client, client.get_base_model(), client.model_path
            )
            session.sampler_ids.append(sampler_id)


def _record(run: SdkRun, record: Callable[[SdkRun, Any], None], value: Any) -> None:
    """Add a request's value to its run. A run directory that cannot be written (a full disk)
    is logged, and the client still gets the value it asked for: the work was done."""
    try:
        record(run, value)
    except Exception:  # noqa: BLE001 - the platform's record, not the client's result
        log.exception("job %s: recording a request of its Tinker SDK client failed", run.job_id)


def failure(e: BaseException) -> dict[str, Any]:
    """A failed request as the SDK reads it: its message, and whose fault it was (a stopped
    run's requests: the user's, not the server's)."""
    user = isinstance(
        e, ConfigError | DatasetError | NotFoundError | StoppedError | ValueError | TypeError
    )
    return {"error": f"{type(e).__name__}: {e}", "category": "user" if user else "server"}


# ---- protobuf ------------------------------------------------------------------------------
_NUMPY_OF = {pb.DTYPE_FLOAT32: np.float32, pb.DTYPE_INT64: np.int64, pb.DTYPE_INT32: np.int32}
_DTYPE_OF = {pb.DTYPE_FLOAT32: "float32", pb.DTYPE_INT64: "int64", pb.DTYPE_INT32: "int64"}


def forward_backward_request(body: bytes) -> tuple[pb.ForwardBackwardRequest, list[types.Datum]]:
    """The SDK's protobuf `forward_backward` request and its datums as the engine takes them.

    Raises:
        ConfigError: The body is not the message, or a datum holds what text models cannot
        take (images, audio), naming the datum.
    """
    message = pb.ForwardBackwardRequest()
    try:
        message.ParseFromString(body)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError
        raise ConfigError(
            f"forward_backward: the body is not a ForwardBackwardRequest ({e})"
        ) from e
    data = []
    for i, datum in enumerate(message.data):
        tokens: list[int] = []
        for chunk in datum.model_input:
            if chunk.WhichOneof("chunk") != "encoded_text":
                raise ConfigError(
                    f"forward_backward: datum {i} has a {chunk.WhichOneof('chunk')} chunk; "
                    "the local engine trains text models (encoded_text chunks) only"
                )
            tokens.extend(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist())
        inputs = {name: _tensor(name, i, t) for name, t in datum.loss_fn_inputs.items()}
        data.append(
            types.Datum(model_input=types.ModelInput.from_ints(tokens), loss_fn_inputs=inputs)
        )
    return message, data


def _tensor(name: str, datum: int, message: pb.Tensor) -> types.TensorData:
    if message.dtype not in _NUMPY_OF:
        raise ConfigError(
            f"forward_backward: datum {datum} input {name!r} has dtype {message.dtype}"
        )
    dtype = _NUMPY_OF[message.dtype]
    shape = list(message.shape)
    if message.HasField("sparse_csr"):
        csr = message.sparse_csr
        values = np.frombuffer(csr.values, dtype=dtype)
        crow = np.frombuffer(csr.crow_indices, dtype=np.int64)
        cols = np.frombuffer(csr.col_indices, dtype=np.int64)
        dense = np.zeros(shape, dtype=dtype)
        for row in range(len(crow) - 1):
            dense[row, cols[crow[row] : crow[row + 1]]] = values[crow[row] : crow[row + 1]]
        array = dense
    else:
        array = np.frombuffer(message.dense, dtype=dtype).reshape(shape or [-1])
    return types.TensorData(
        data=array.reshape(-1).tolist(),
        dtype=_DTYPE_OF[message.dtype],
        shape=list(array.shape),  # type: ignore[arg-type]
    )


def loss_config(message: pb.ForwardBackwardRequest) -> dict[str, float | str] | None:
    """The loss's settings: the v2 map (numbers and strings) where the SDK wrote it."""
    config: dict[str, float | str] = dict(message.loss_fn_config)
    for key, value in message.loss_fn_config_v2.items():
        config[key] = value.text if value.WhichOneof("value") == "text" else value.number
    return config or None


def forward_backward_bytes(output: types.ForwardBackwardOutput) -> bytes:
    """A ForwardBackwardOutput as the SDK reads it: one record per output field, every
    datum's values back to back, with byte offsets."""
    message = pb.ForwardBackwardOutput(loss_fn_output_type=output.loss_fn_output_type)
    record = message.loss_fn_outputs.add()
    record.num_datums = len(output.loss_fn_outputs)
    names = list(output.loss_fn_outputs[0]) if output.loss_fn_outputs else []
    for name in names:
        arrays = [np.asarray(o[name].data, dtype=np.float32) for o in output.loss_fn_outputs]
        field_ = record.fields[name]
        field_.dtype = pb.DTYPE_FLOAT32
        field_.data = b"".join(a.tobytes() for a in arrays)
        sizes = [a.nbytes for a in arrays]
        field_.offsets = np.cumsum([0, *sizes]).astype(np.int64).tobytes()
    for key, value in output.metrics.items():
        message.metrics[key] = float(value)
    return message.SerializeToString()


def sample_response_bytes(response: types.SampleResponse) -> bytes:
    """A SampleResponse as the SDK reads it (its response_conv.deserialize_sample_response):
    top-k as dense N x K matrices, the other prompt tensors as `Tensor` messages."""
    message = pb.SampleResponse()
    for sequence in response.sequences:
        out = message.sequences.add()
        out.stop_reason = (
            pb.STOP_REASON_LENGTH if sequence.stop_reason == "length" else pb.STOP_REASON_STOP
        )
        out.tokens = np.asarray(sequence.tokens, dtype=np.int32).tobytes()
        if sequence.logprobs is not None:
            out.logprobs = np.asarray(sequence.logprobs, dtype=np.float32).tobytes()
        if sequence.topk_logprobs_np is not None:
            _write_topk(out.topk_sampled_logprobs, sequence.topk_logprobs_np)
    if response.prompt_logprobs is not None:
        values = [np.nan if v is None else v for v in response.prompt_logprobs]
        message.prompt_logprobs = np.asarray(values, dtype=np.float32).tobytes()
    if response.topk_prompt_logprobs_np is not None:
        _write_topk(message.topk_prompt_logprobs, response.topk_prompt_logprobs_np)
    if response.target_prompt_logprobs is not None:
        _write_tensor(message.target_prompt_logprobs, response.target_prompt_logprobs)
    if response.prompt_alt_tokens is not None:
        _write_tensor(message.prompt_alt_tokens.tokens, response.prompt_alt_tokens.tokens)
        _write_tensor(message.prompt_alt_tokens.logprobs, response.prompt_alt_tokens.logprobs)
    return message.SerializeToString()


def _write_topk(message: pb.TopkLogprobs, topk: TopkLogprobs) -> None:
    message.length, message.k = topk.token_ids.shape
    message.token_ids = np.ascontiguousarray(topk.token_ids, dtype=np.int32).tobytes()
    message.logprobs = np.ascontiguousarray(topk.logprobs, dtype=np.float32).tobytes()


def _write_tensor(message: pb.Tensor, tensor: types.TensorData) -> None:
    """Dense, or sparse CSR with its indices, as the SDK's request_conv writes a tensor."""
    int64 = tensor.dtype == "int64"
    message.dtype = pb.DTYPE_INT64 if int64 else pb.DTYPE_FLOAT32
    message.shape.extend(tensor.shape or [])
    values = np.asarray(tensor.data, dtype=np.int64 if int64 else np.float32).tobytes()
    if tensor.sparse_crow_indices is None or tensor.sparse_col_indices is None:
        message.dense = values
        return
    message.sparse_csr.values = values
    message.sparse_csr.crow_indices = np.asarray(tensor.sparse_crow_indices, np.int64).tobytes()
    message.sparse_csr.col_indices = np.asarray(tensor.sparse_col_indices, np.int64).tobytes()


def _target_ids(model: TensorDataModel | None) -> types.TensorData | None:
    """The request's `target_prompt_logprobs` (JSON) as the engine takes it; one whose data
    does not fill its shape is refused, naming the field."""
    if model is None:
        return None
    try:
        return types.TensorData(
            data=model.data,
            dtype=model.dtype,
            shape=model.shape,
            sparse_crow_indices=model.sparse_crow_indices,
            sparse_col_indices=model.sparse_col_indices,
        )
    except ValueError as e:
        raise ConfigError(f"target_prompt_logprobs: {e}") from e
