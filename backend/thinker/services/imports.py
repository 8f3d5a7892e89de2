"""Hugging Face imports: the whole import (`import_dataset`), and imports in the background.

`import_dataset` reads the rows into a temporary JSONL in the datasets directory, proposes a
mapping, stores them with `DatasetService.store_file` and deletes the temporary file; `thinker
datasets import` runs it in the foreground. `Imports` runs it in the background for `POST
/api/datasets/import`, each import an asyncio task (the blocking reading in a thread), its
record kept in memory and sent to `emit` when the import starts, about every
`REPORT_INTERVAL_S` while it reads, and when it ends (the server sends these as Socket.IO
events). Import records live in the process's memory only: an import running when the server
stops is lost (nothing half-stored remains).

The token is an argument of the task's coroutine and nothing else: no record, event, log line
or database row holds it.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from thinker.dataprep.hf_import import HubRequest, Proposal, fetch_rows, propose_mapping, redact
from thinker.errors import ConflictError, NotFoundError, ThinkerError
from thinker.files import storage_guard
from thinker.services.datasets import DatasetService
from thinker.store import new_id

if TYPE_CHECKING:
    from thinker.store import Dataset

REPORT_INTERVAL_S = 0.25  # progress events at most this often per import
MAX_RUNNING = 2  # imports at once: each holds a thread and the network
KEPT_RECORDS = 200  # finished imports remembered for GET (oldest forgotten first)
NAME_CHARS = 200

ImportState = Literal["running", "succeeded", "failed"]


# ---- one import, start to end ------------------------------------------------------------


class ImportObserver(Protocol):
    """Told how an import goes; called from the reading thread (`progress`) and the loop."""

    def progress(self, done: int, total: int | None) -> None: ...

    def proposed(self, proposal: Proposal) -> None: ...


async def import_dataset(
    datasets: DatasetService,
    request: HubRequest,
    *,
    token: str | None,
    name: str | None,
    kind: str | None,
    mapping: dict[str, str] | None,
    observer: ImportObserver | None = None,
    stop: threading.Event | None = None,
) -> Dataset:
    """Read `request`'s rows and store them as a dataset, validated like an upload.

    Raises:
        HubImportError: The source, config or split is wrong, the hub refused or is out of
            reach (each a subclass, the message says what to do).
        DatasetError: A row does not fit the kind (`errors` / `error_count` list them).
    """
    settings = datasets.settings
    temp = settings.datasets_dir / f".import-{secrets.token_hex(8)}.jsonl"
    progress = observer.progress if observer is not None else None
    try:
        with storage_guard("the imported rows"):  # the temporary file fills the disk first
            fetched = await asyncio.to_thread(
                fetch_rows,
                request,
                temp,
                token=token,
                progress=progress,
                max_rows=settings.max_rows,
                stop=stop,
            )
        proposal = await asyncio.to_thread(propose_mapping, temp, kind, mapping)
        if observer is not None:
            observer.proposed(proposal)
        label = default_name(request)
        return await datasets.store_file(
            temp,
            filename=_filename(label),
            name=(name or "").strip()[:NAME_CHARS] or label,
            kind=proposal.kind,
            mapping=proposal.mapping,
            origin=fetched.origin(request),
        )
    finally:
        temp.unlink(missing_ok=True)


def default_name(request: HubRequest) -> str:
    """`org/name:config/split`, or the directory's name for a local source."""
    base = request.source if isinstance(request.source, str) else request.source.name
    config = f":{request.config}" if request.config else ""
    split = f"/{request.split}" if request.split else ""
    return f"{base}{config}{split}"[:NAME_CHARS]


def _filename(label: str) -> str:
    # A label for the dataset's `filename` column; `.jsonl` tells the store its format.
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.")[:200] + ".jsonl"


# ---- imports in the background -----------------------------------------------------------


@dataclass
class ImportRecord:
    """What `GET /api/datasets/imports/{id}` and the `dataset_import` events show."""

    import_id: str
    source: str
    state: ImportState = "running"
    stage: Literal["reading", "storing"] | None = "reading"  # None once it has ended
    rows_done: int = 0
    rows_total: int | None = None  # None while unknown (a streamed hub dataset)
    dataset_id: str | None = None
    error: str | None = None
    errors: list[dict[str, Any]] | None = None  # bad rows, as for an upload
    error_count: int | None = None
    kind: str | None = None  # once proposed (or given)
    mapping: dict[str, str] | None = None  # canonical field: source expression
    suggestions: list[str] = field(default_factory=list)  # detection's, for the user to check

    def progress(self, done: int, total: int | None) -> None:
        """Called from the reading thread: plain assignments, read by the event loop."""
        self.rows_done, self.rows_total = done, total

    def proposed(self, proposal: Proposal) -> None:
        self.stage = "storing"
        self.kind, self.mapping = proposal.kind, proposal.mapping
        self.suggestions = proposal.suggestions

    def public(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Imports:
    """The imports of one server process; `emit` sends a record to the clients watching."""

    datasets: DatasetService
    emit: Callable[[dict[str, Any]], Awaitable[None]]
    records: OrderedDict[str, ImportRecord] = field(default_factory=OrderedDict)
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(
        self,
        request: HubRequest,
        *,
        token: str | None,
        name: str | None,
        kind: str | None,
        mapping: dict[str, str] | None,
    ) -> ImportRecord:
        """Start an import in the background; its record (state `running`).

        Raises:
            ConflictError: `MAX_RUNNING` imports are running already.
        """
        if len(self._tasks) >= MAX_RUNNING:
            raise ConflictError(
                f"{MAX_RUNNING} imports are running already; wait for one to finish"
            )
        record = ImportRecord(new_id("imp"), request.label)
        self._remember(record)
        work = import_dataset(
            self.datasets,
            request,
            token=token,
            name=name,
            kind=kind,
            mapping=mapping,
            observer=record,
            stop=self._stop,
        )
        task = asyncio.create_task(self._run(record, work, token))
        self._tasks[record.import_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(record.import_id, None))
        return record

    def get(self, import_id: str) -> ImportRecord:
        record = self.records.get(import_id)
        if record is None:
            raise NotFoundError(
                f"no import {import_id[:40]!r} (imports are kept until the server restarts)"
            )
        return record

    async def stop(self) -> None:
        """Stop the running imports (at their next batch) and wait for them to end."""
        self._stop.set()
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=30)

    async def _run(
        self, record: ImportRecord, work: Coroutine[Any, Any, Dataset], token: str | None
    ) -> None:
        await self._emit(record)
        reporter = asyncio.create_task(self._report(record))
        try:
            dataset = await work
            record.state, record.dataset_id = "succeeded", dataset.id
        except ThinkerError as e:
            _fail(record, e, token)
        except asyncio.CancelledError:
            _fail(record, RuntimeError("the import was cancelled (server shutdown)"), None)
            raise
        except Exception as e:  # a bug or an unforeseen library error: still reported
            _fail(record, e, token, prefix=f"internal error: {type(e).__name__}: ")
        finally:
            record.stage = None
            reporter.cancel()
            with suppress(asyncio.CancelledError):
                await reporter
            await self._emit(record)

    async def _report(self, record: ImportRecord) -> None:
        """Emit the record while it changes, at most every `REPORT_INTERVAL_S`."""
        last = record.public()
        while True:
            await asyncio.sleep(REPORT_INTERVAL_S)
            now = record.public()
            if now != last:
                await self._emit(record)
                last = now

    async def _emit(self, record: ImportRecord) -> None:
        await self.emit(record.public())

    def _remember(self, record: ImportRecord) -> None:
        self.records[record.import_id] = record
        while len(self.records) > KEPT_RECORDS:
            oldest = next(iter(self.records))
            if oldest in self._tasks:  # never forget a running import
                break
            self.records.pop(oldest)


def _fail(record: ImportRecord, error: Exception, token: str | None, prefix: str = "") -> None:
    record.state = "failed"
    record.error = redact(prefix + str(error).split("\n")[0], token)
    errors = getattr(error, "errors", None)
    if isinstance(errors, list) and errors:
        record.errors = errors
        record.error_count = int(getattr(error, "error_count", len(errors)))
