"""Import a Hugging Face dataset: from the hub by id, or from a directory in one of the hub's
on-disk layouts, as rows in a temporary JSONL file that the caller stores as a Thinker dataset.

Layouts read:
- a `save_to_disk` directory, of one `Dataset` (`state.json`) or a `DatasetDict`
  (`dataset_dict.json`): memory-mapped Arrow, read in batches;
- a directory laid out like a hub repository: Parquet / JSONL / CSV shards, usually with a
  README.md dataset card whose YAML `configs:` name each config's data files per split.
  This is the hub's own path: `datasets.load_dataset(source, config, streaming=True)`, given a
  directory instead of an id.

Nothing is loaded whole: rows stream in batches of `CHUNK_ROWS`, are appended to the target
file as JSON lines, and `progress(rows_done, rows_total)` is called after each batch (the total
is None when the hub does not know it). Columns of binary data (images, audio) are left out:
a Thinker dataset is text.

The token is handed to the hub library only. It is never written anywhere, and every message
built from a library error has it blanked out.

`thinker datasets import` (thinker.cli.datasets) and the server both store the rows through
`thinker.services.imports`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from thinker.dataprep.detect import detect_file
from thinker.errors import DatasetError

if TYPE_CHECKING:
    from datasets import Features

CHUNK_ROWS = 1000  # rows read, written and reported at a time
# A hub id: `name` or `org/name`; letters, digits, `-`, `_`, `.`; no `--` or `..` (hub rules).
HUB_ID = re.compile(
    r"(?:[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?/)?[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?",
    re.ASCII,
)
NAME_PART = re.compile(r"[A-Za-z0-9._-]{1,100}", re.ASCII)  # a config, split or revision
BINARY_FEATURES = {"Image", "Audio", "Video", "Pdf", "Nifti"}
HUB_HINT = "HF_TOKEN for the CLI, `token` in the API request"

Progress = Callable[[int, int | None], None]


# ---- errors ------------------------------------------------------------------------------


class HubImportError(DatasetError):
    """An import failed before any row was stored; the message says what to do."""


class HubSourceError(HubImportError):
    """The source is neither a hub id nor an allowed directory."""


class HubDatasetNotFound(HubImportError, LookupError):
    """No such dataset (or revision) on the hub, or it is private and no token was given."""


class HubAuthRequired(HubImportError, PermissionError):
    """The dataset is gated or private: a token with access is needed."""


class HubUnreachable(HubImportError, ConnectionError):
    """Offline mode is on, or the hub cannot be reached."""


class UnknownConfig(HubImportError, LookupError):
    """The config (subset) does not exist, or one must be picked; `available` lists them."""

    def __init__(self, message: str, available: list[str]) -> None:
        super().__init__(message)
        self.available = available


class UnknownSplit(HubImportError, LookupError):
    """The split does not exist; `available` lists those that do."""

    def __init__(self, message: str, available: list[str]) -> None:
        super().__init__(message)
        self.available = available


class TooManyRows(HubImportError):
    """More rows than the platform stores in one dataset, and no limit was given."""


class ImportCancelled(HubImportError):
    """The import was stopped (the server is shutting down)."""


# ---- what to import ----------------------------------------------------------------------


@dataclass(frozen=True)
class HubRequest:
    """What to import. `source` is a hub id (str) or a local directory (Path)."""

    source: str | Path
    config: str | None = None
    split: str | None = None  # None: every split, in the dataset's order, into one dataset
    revision: str | None = None  # a branch, tag or commit on the hub
    limit: int | None = None  # at most this many rows in all
    display: str | None = None  # how to name the source (as the user spelled it)

    @property
    def label(self) -> str:
        """How messages, names and the origin show the source."""
        return self.display or str(self.source)


@dataclass(frozen=True)
class Fetched:
    """What `fetch_rows` wrote."""

    rows: int
    splits: dict[str, int]  # rows read from each split, in the order written
    config: str | None  # the config read (None for a save_to_disk directory)
    dropped_columns: list[str] = field(default_factory=list)  # binary columns left out

    def origin(self, request: HubRequest) -> dict[str, object]:
        """The dataset's `origin` column: where the rows came from (never the token)."""
        key = "repo" if isinstance(request.source, str) else "path"
        hf: dict[str, object] = {
            key: request.label,
            "config": self.config,
            "split": request.split,
            "splits": self.splits,
            "revision": request.revision,
            "limit": request.limit,
        }
        if self.dropped_columns:
            hf["dropped_columns"] = self.dropped_columns
        return {"hf": hf}


def is_hub_id(source: str) -> bool:
    return bool(HUB_ID.fullmatch(source)) and "--" not in source and ".." not in source


def check_name_part(what: str, value: str | None) -> str | None:
    """A config, split or revision as given, refused if it could be anything but a name."""
    if value is not None and not NAME_PART.fullmatch(value):
        raise HubSourceError(
            f"{what} must be 1 to 100 letters, digits, '.', '_' or '-', got {value[:40]!r}"
        )
    return value


def resolve_cli_source(source: str) -> str | Path:
    """For the CLI: an existing directory is read locally, anything else must be a hub id."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise HubSourceError(f"{source} is a file: give the dataset's directory, or a hub id")
    if not is_hub_id(source):
        raise HubSourceError(f"{source!r} is neither a directory nor a hub id (org/name)")
    return source


def resolve_server_source(source: str, imports_dir: Path) -> str | Path:
    """For the server: a hub id, or a directory inside `imports_dir` (never outside it).

    A path is absolute, starts with `./`, or names an existing entry of `imports_dir`;
    anything else must be a hub id. Symbolic links are followed before the check.
    """
    root = imports_dir.resolve()
    path = Path(source)
    local = path.is_absolute() or source.startswith("./") or ".." in path.parts
    if not local and is_hub_id(source) and not (root / source).exists():
        return source
    target = (root / path).resolve()  # an absolute `path` replaces `root` here
    if not target.is_relative_to(root) or target == root:
        raise HubSourceError(
            f"{source[:200]!r} is not a hub id (org/name) nor a directory inside the server's "
            f"import directory ({root}); copy the dataset there and give its name"
        )
    if not target.is_dir():
        raise HubSourceError(f"no dataset directory {source[:200]!r} in {root}")
    return target


# ---- reading -----------------------------------------------------------------------------


def fetch_rows(
    request: HubRequest,
    target: Path,
    *,
    token: str | None = None,
    progress: Progress | None = None,
    max_rows: int | None = None,
    stop: threading.Event | None = None,
) -> Fetched:
    """Stream the requested rows into `target` (JSONL), reporting progress after each batch.

    Raises:
        HubImportError: One of its subclasses, with what to do in the message.
    """
    # Deferred: `datasets` imports pyarrow and pandas, seconds that only an import needs.
    from datasets import disable_progress_bars

    disable_progress_bars()  # ours is the one bar (CLI) or the Socket.IO events (server)
    with translated_errors(request.label, token):
        config, splits = _open_splits(request, token)
        dropped = _drop_binary(splits)
        total = _known_total(splits, request.limit)
        counts = _write_rows(splits, target, request.limit, max_rows, progress, total, stop)
    return Fetched(sum(counts.values()), counts, config, dropped)


def _open_splits(request: HubRequest, token: str | None) -> tuple[str | None, dict[str, object]]:
    source = request.source
    if isinstance(source, Path) and request.revision is not None:
        raise HubSourceError("a revision applies to hub ids only, not to a local directory")
    if isinstance(source, Path) and _is_saved(source):
        return None, _saved_splits(source, request)
    config = _pick_config(request, token)
    # Deferred (see fetch_rows): `datasets` loads only when an import runs.
    from datasets import load_dataset

    opened = load_dataset(
        str(source), config, revision=request.revision, token=token, streaming=True
    )
    return config, _select_split(dict(opened), request)


def _is_saved(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def _saved_splits(path: Path, request: HubRequest) -> dict[str, object]:
    """A `save_to_disk` directory's splits (a single Dataset is the split `train`)."""
    # Deferred (see fetch_rows): `datasets` loads only when an import runs.
    from datasets import Dataset, load_from_disk

    if request.config not in (None, "default"):
        raise UnknownConfig(
            f"{path} is a save_to_disk directory, which has no configs: leave config out",
            ["default"],
        )
    saved = load_from_disk(str(path))
    splits = {"train": saved} if isinstance(saved, Dataset) else dict(saved)
    return _select_split(splits, request)


def _pick_config(request: HubRequest, token: str | None) -> str | None:
    """The config to read: the one asked for, else the only or the default one."""
    # Deferred (see fetch_rows): `datasets` loads only when an import runs.
    from datasets import get_dataset_config_names

    names = list(
        get_dataset_config_names(str(request.source), revision=request.revision, token=token)
    )
    if request.config is not None:
        if names and request.config not in names:
            raise UnknownConfig(
                f"{request.label} has no config {request.config!r}; available: {', '.join(names)}",
                names,
            )
        return request.config
    if len(names) > 1 and "default" not in names:
        raise UnknownConfig(
            f"{request.label} has several configs: pick one of {', '.join(names)}", names
        )
    return "default" if "default" in names else (names[0] if names else None)


def _select_split(splits: dict[str, object], request: HubRequest) -> dict[str, object]:
    if request.split is None:
        return splits
    if request.split not in splits:
        names = list(splits)
        raise UnknownSplit(
            f"{request.label} has no split {request.split!r}; available: {', '.join(names)} "
            "(or import them all)",
            names,
        )
    return {request.split: splits[request.split]}


def _drop_binary(splits: dict[str, object]) -> list[str]:
    """Leave out image/audio/binary columns (in place); their names, sorted."""
    dropped: set[str] = set()
    for name, split in splits.items():
        columns = _binary_columns(getattr(split, "features", None))
        if columns:
            splits[name] = split.remove_columns(columns)  # type: ignore[attr-defined]
            dropped.update(columns)
    return sorted(dropped)


def _binary_columns(features: Features | None) -> list[str]:
    # Deferred (see fetch_rows): `datasets` loads only when an import runs.
    from datasets import Value

    if features is None:  # a streamed JSON file: the types are only known row by row
        return []
    return [
        name
        for name, feature in features.items()
        if type(feature).__name__ in BINARY_FEATURES
        or (isinstance(feature, Value) and feature.dtype in ("binary", "large_binary"))
    ]


def _known_total(splits: dict[str, object], limit: int | None) -> int | None:
    """Rows to expect, when every split knows its size (always on disk, often on the hub)."""
    sizes = [_split_size(name, split) for name, split in splits.items()]
    if any(size is None for size in sizes):
        return limit
    total = sum(size for size in sizes if size is not None)
    return total if limit is None else min(total, limit)


def _split_size(name: str, split: object) -> int | None:
    if hasattr(split, "__len__"):
        return len(split)
    info = getattr(split, "info", None)
    known = getattr(info, "splits", None) or {}
    entry = known.get(name) if hasattr(known, "get") else None
    return getattr(entry, "num_examples", None) or None


def _write_rows(
    splits: dict[str, object],
    target: Path,
    limit: int | None,
    max_rows: int | None,
    progress: Progress | None,
    total: int | None,
    stop: threading.Event | None,
) -> dict[str, int]:
    """Write the splits' rows, in order, until `limit`; refuse more than `max_rows`."""
    cap = limit if limit is not None else (max_rows + 1 if max_rows is not None else None)
    counts: dict[str, int] = {}
    done = 0
    with open(target, "w", encoding="utf-8") as out:
        for name, split in splits.items():
            counts[name] = 0
            for rows in _batches(split):
                rows = rows if cap is None else rows[: cap - done]
                out.write("".join(json_line(row) for row in rows))
                counts[name] += len(rows)
                done += len(rows)
                _check_stop(stop)
                if progress is not None:
                    progress(done, total)
                if cap is not None and done >= cap:
                    break
            if cap is not None and done >= cap:
                break
    if progress is not None and total is None:
        progress(done, done)  # the total is known now that every row has been read
    if limit is None and max_rows is not None and done > max_rows:
        raise TooManyRows(
            f"the dataset has more than {max_rows} rows, the most one Thinker dataset holds "
            "(THINKER_MAX_ROWS): import a part of it with a limit, or one split"
        )
    return counts


def _batches(split: object) -> Iterator[list[dict[str, object]]]:
    """A split's rows, `CHUNK_ROWS` at a time, read column-wise as the library serves them."""
    for batch in split.iter(batch_size=CHUNK_ROWS):  # type: ignore[attr-defined]
        columns = list(batch)
        yield [
            dict(zip(columns, values, strict=True)) for values in zip(*batch.values(), strict=True)
        ]


def _check_stop(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise ImportCancelled("the import was stopped before it finished (server shutdown)")


def json_line(row: dict[str, object]) -> str:
    """One row as a JSON line; dates as ISO text, decimals as text."""
    return json.dumps(row, ensure_ascii=False, default=_plain) + "\n"


def _plain(value: object) -> object:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "tolist"):  # a numpy scalar or array
        return value.tolist()
    raise HubImportError(
        f"a column holds {type(value).__name__} values, which a text dataset cannot store; "
        "map only the text columns (mapping / --map)"
    )


@dataclass(frozen=True)
class Proposal:
    """The kind and mapping to store the rows with, and what the user should check."""

    kind: str | None
    mapping: dict[str, str] | None
    suggestions: list[str] = field(default_factory=list)


def propose_mapping(path: Path, kind: str | None, mapping: dict[str, str] | None) -> Proposal:
    """The mapping given, else what detection proposes from the rows in `path` (as for an
    upload), with its suggestions."""
    if mapping is not None:
        return Proposal(kind, mapping)
    detection = detect_file(path)
    if kind is not None and kind != detection.kind:
        return Proposal(kind, None)  # the kind given wins; its fields must be there as named
    return Proposal(detection.kind, detection.mapping or None, detection.suggestions)


# ---- errors from the hub library ---------------------------------------------------------


@contextmanager
def translated_errors(label: str, token: str | None) -> Iterator[None]:
    """Turn the hub library's errors into ours, with the token blanked out of every message."""
    try:
        yield
    except HubImportError:
        raise
    except Exception as e:  # the libraries raise many types (httpx, fsspec, aiohttp, ...)
        raise translate_error(e, label, token) from None  # the cause could quote the token


def translate_error(error: Exception, label: str, token: str | None) -> HubImportError:
    """Our error for one raised by `datasets` / `huggingface_hub` while importing `label`."""
    # Deferred: `datasets` (pyarrow, pandas) loads only when an import runs.
    import httpx
    from datasets.exceptions import DataFilesNotFoundError, DatasetNotFoundError
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    text = redact(str(error), token)
    if isinstance(error, GatedRepoError) or "is a gated dataset" in text:
        return HubAuthRequired(
            f"{label} is gated on the Hugging Face hub: accept its conditions on "
            f"https://huggingface.co/datasets/{label} while logged in, then pass a token of "
            f"that account ({HUB_HINT})"
        )
    if isinstance(error, RevisionNotFoundError) or text.startswith("Revision"):
        return HubDatasetNotFound(f"{label} has no such revision: {text}")
    if isinstance(error, DataFilesNotFoundError):
        return HubDatasetNotFound(f"{label} holds no data files the library can read: {text}")
    if isinstance(error, DatasetNotFoundError | RepositoryNotFoundError):
        return HubDatasetNotFound(
            f"{label} was not found on the Hugging Face hub: check the id (org/name); if it is "
            f"private, pass a token with access ({HUB_HINT})"
        )
    if isinstance(error, OfflineModeIsEnabled) or "OfflineModeIsEnabled" in text:
        return HubUnreachable(offline_message(label))
    if isinstance(error, HfHubHTTPError) and _status(error) in (401, 403):
        return HubAuthRequired(f"the hub refused access to {label}: {text} ({HUB_HINT})")
    network = (ConnectionError, TimeoutError, httpx.TransportError)
    if isinstance(error, network) or "Couldn't reach" in text:
        return HubUnreachable(
            f"cannot reach the Hugging Face hub for {label} ({text}): check the network or "
            "HTTPS_PROXY, or import a local copy of the dataset"
        )
    return HubImportError(f"importing {label} failed: {type(error).__name__}: {text}")


def offline_message(label: str) -> str:
    return (
        f"offline mode is on (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE), so {label} cannot be "
        "fetched from the Hugging Face hub: unset those variables, or import a local copy "
        "(a save_to_disk directory or a copy of the repository)"
    )


def _status(error: Exception) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def redact(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text
