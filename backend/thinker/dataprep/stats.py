"""What training will see of a dataset: rows rendered to tokens and weights, and their statistics.

Every row is rendered by the calls the training loops make, with the renderer they would pick:

- chat, prompt_completion (sl.py): `build_supervised_example(messages, train_on_what)`, then
  `datum_from_tokens_weights(tokens, weights, max_length)`.
- preferences (dpo.py): prompt + chosen and prompt + rejected, each with
  `TrainOnWhat.CUSTOMIZED` marking the completion's assistant turns, then the datum;
  `train_on_what` does not apply.
- problems (rl.py): `build_generation_prompt(messages)`, the prompt the policy continues;
  nothing in it is trained, and RL never truncates it.

A token counts as trained when the datum's weight on it is above 0: the first token is never
a target, and tokens past `max_length` are cut off. A row's `num_tokens` is its longest
sequence (before truncation), its `num_trained_tokens` the sum over its sequences; a row with
a sequence that trains no token at all (the mask covers every label, or truncation removed
every trained token) is an error, as training would learn nothing from it.

Statistics stream: memory holds one row, a count per distinct length (for the exact median,
p95 and the histogram) and the first `MAX_EXAMPLE_LINES` line numbers of each finding.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from thinker.algorithms.dpo import render_pair
from thinker.algorithms.sl_config import SLConfig
from thinker.data.kinds import DatasetKind
from thinker.data.loading import row_messages
from thinker.data.preferences import row_pair
from thinker.data.problems import row_problem
from thinker.data.validation import iter_rows
from thinker.errors import ConfigError, DatasetError
from thinker.renderers import (
    Message,
    Renderer,
    TrainOnWhat,
    datum_from_tokens_weights,
    renderer_for,
)
from thinker.renderers.turns import decode

if TYPE_CHECKING:
    from thinker.renderers.turns import Tokenizer

MAX_EXAMPLE_LINES = 20  # line numbers kept per finding; the counts go on past it
MAX_ERRORS = 20  # error messages kept in full
STATS_VERSION = 1  # part of the cache key: bump when the numbers or their shape change
_BOUNDARY_SLACK = 4  # tokens a segment boundary may move so it never splits a character

_SL_FIELDS = SLConfig.model_fields
DEFAULT_BASE_MODEL: str = _SL_FIELDS["base_model"].default
DEFAULT_TRAIN_ON_WHAT: TrainOnWhat = _SL_FIELDS["train_on_what"].default
DEFAULT_MAX_LENGTH: int = _SL_FIELDS["max_length"].default


class RenderOptions(BaseModel):
    """How rows are rendered: as an SL, DPO or RL config with these fields would render them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_model: str = DEFAULT_BASE_MODEL
    renderer: str | None = None  # None = the base model's default renderer
    train_on_what: TrainOnWhat = DEFAULT_TRAIN_ON_WHAT  # SL kinds only
    max_length: int = Field(DEFAULT_MAX_LENGTH, gt=1)  # tokens; longer sequences are truncated

    def cache_key(self, kind: str) -> str:
        """A short digest of everything the statistics depend on besides the rows."""
        data = json.dumps([STATS_VERSION, kind, self.model_dump(mode="json")], sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Rendering:
    """A tokenizer, the renderer over it, and the options they were chosen by."""

    tokenizer: Tokenizer
    renderer: Renderer
    options: RenderOptions


def load_rendering(options: RenderOptions) -> Rendering:
    """The tokenizer of `options.base_model` and the renderer training would use with it.

    Blocking (a tokenizer may load from disk): call it on a worker thread in a server.

    Raises:
        ConfigError: The renderer is unknown or does not fit the tokenizer.
        BackendError: The tokenizer cannot be loaded.
    """
    tokenizer = _tokenizer(options.base_model)
    renderer = renderer_for(options.renderer, options.base_model, tokenizer)
    return Rendering(tokenizer, renderer, options)


@lru_cache(maxsize=4)
def _tokenizer(base_model: str) -> Tokenizer:
    # Deferred: the engine pulls in peft and bitsandbytes, which take seconds.
    from thinker.engine.local.models import load_tokenizer

    return load_tokenizer(base_model)


# ---- rendering one row -------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedSequence:
    """One token sequence of a row, with what the loss sees of it."""

    name: str  # "example" (SL), "chosen" / "rejected" (DPO), "prompt" (RL)
    tokens: list[int]  # the whole rendering, before truncation
    trained: list[bool]  # per token: a target with weight > 0 inside max_length
    cut: int  # tokens from here on are truncated away (len(tokens) when none are)
    trains: bool  # whether training learns from this sequence at all (False: an RL prompt)
    lost_trained: int  # tokens with weight > 0 past the cut

    @property
    def num_trained(self) -> int:
        return sum(self.trained)

    @property
    def truncated(self) -> bool:
        return self.cut < len(self.tokens)


@dataclass(frozen=True)
class RenderedRow:
    """A row as training sees it."""

    line: int
    sequences: list[RenderedSequence]
    roles: list[str]  # of every message rendered, in order
    turns: int  # messages in the conversation (a pair's prompt plus its chosen side)
    has_answer: bool = False  # problems only
    has_tests: bool = False  # problems only

    @property
    def num_tokens(self) -> int:
        return max(len(s.tokens) for s in self.sequences)

    @property
    def num_trained_tokens(self) -> int:
        return sum(s.num_trained for s in self.sequences)

    @property
    def truncated(self) -> bool:
        return any(s.truncated for s in self.sequences)

    @property
    def zero_trained(self) -> bool:
        return any(s.trains and s.num_trained == 0 for s in self.sequences)


def render_row(line: int, row: dict[str, object], kind: str, rendering: Rendering) -> RenderedRow:
    """Render one checked row of `kind` exactly as its training loop would.

    Raises:
        DatasetError: The renderer refuses the row (e.g. `customized` without `trainable`
            flags), or it renders to fewer than 2 tokens.
        ConfigError: `kind` is not a DatasetKind.
    """
    render = _RENDER.get(kind)
    if render is None:
        raise ConfigError(
            f"unknown dataset kind {kind!r}; expected one of {', '.join(DatasetKind)}"
        )
    return render(line, row, rendering)


def _render_supervised(line: int, row: dict[str, object], rendering: Rendering) -> RenderedRow:
    # As sl.py's `_datasets`: the loader's messages, the renderer, then the datum.
    messages = row_messages(row)
    options = rendering.options
    tokens, weights = rendering.renderer.build_supervised_example(messages, options.train_on_what)
    sequence = _trained_sequence("example", tokens, weights, options.max_length)
    return RenderedRow(line, [sequence], [m["role"] for m in messages], len(messages))


def _render_pair(line: int, row: dict[str, object], rendering: Rendering) -> RenderedRow:
    # As DPO renders a pair (dpo.render_pair), then each side's datum.
    pair = row_pair(row)
    chosen, rejected = render_pair(rendering.renderer, pair)
    max_length = rendering.options.max_length
    sequences = [
        _trained_sequence("chosen", *chosen, max_length),
        _trained_sequence("rejected", *rejected, max_length),
    ]
    messages = pair.prompt_messages + pair.chosen_messages + pair.rejected_messages
    turns = len(pair.prompt_messages) + len(pair.chosen_messages)
    return RenderedRow(line, sequences, [m["role"] for m in messages], turns)


def _render_problem(line: int, row: dict[str, object], rendering: Rendering) -> RenderedRow:
    # As rl.py's `_sample_groups`: the generation prompt; RL never truncates it.
    problem = row_problem(row)
    tokens = rendering.renderer.build_generation_prompt(problem.messages).to_ints()
    prompt = RenderedSequence("prompt", tokens, [False] * len(tokens), len(tokens), False, 0)
    roles = [m["role"] for m in problem.messages]
    return RenderedRow(
        line,
        [prompt],
        roles,
        len(roles),
        has_answer=problem.answer is not None,
        has_tests=bool(problem.tests),
    )


_RENDER: dict[str, Callable[[int, dict[str, object], Rendering], RenderedRow]] = {
    "chat": _render_supervised,
    "prompt_completion": _render_supervised,
    "preferences": _render_pair,
    "problems": _render_problem,
}


def _flagged(message: Message, trainable: bool) -> Message:
    return Message(role=message["role"], content=message["content"], trainable=trainable)


def _trained_sequence(
    name: str, tokens: list[int], weights: list[float], max_length: int
) -> RenderedSequence:
    """The sequence with the datum's own view of which tokens train (no second truncation)."""
    datum = datum_from_tokens_weights(tokens, weights, max_length)
    # The datum's weight j is that of target token j + 1; token 0 is never a target.
    target_weights = datum.loss_fn_inputs["weights"].data
    kept = len(target_weights) + 1
    trained = [False, *(w > 0 for w in target_weights)] + [False] * (len(tokens) - kept)
    lost = sum(1 for w in weights[kept:] if w > 0)
    return RenderedSequence(name, list(tokens), trained, kept, True, lost)


# ---- statistics --------------------------------------------------------------------------


class LineCount(BaseModel):
    """How many rows have a finding, and the line numbers of the first of them."""

    count: int = 0
    lines: list[int] = Field(default_factory=list)  # the first MAX_EXAMPLE_LINES

    def add(self, line: int) -> None:
        self.count += 1
        if len(self.lines) < MAX_EXAMPLE_LINES:
            self.lines.append(line)


class RowProblem(BaseModel):
    line: int
    message: str


class Summary(BaseModel):
    """Min, mean, median, 95th percentile (nearest rank), max and total of a count per row."""

    min: int = 0
    mean: float = 0.0
    median: float = 0.0
    p95: int = 0
    max: int = 0
    total: int = 0


class HistogramBin(BaseModel):
    lo: int  # inclusive
    hi: int  # exclusive
    count: int


class DatasetStats(BaseModel):
    """Token statistics of a dataset rendered for training."""

    kind: str
    base_model: str
    renderer: str  # the renderer's name (the default resolved)
    train_on_what: TrainOnWhat
    max_length: int
    rows: int  # rows read, rendered or not
    tokens: Summary  # per row: its longest sequence, before truncation
    trained_tokens: Summary  # per rendered row: trained tokens summed over its sequences
    histogram: list[HistogramBin]  # of `tokens`, power-of-two bins; sums to the rendered rows
    truncated: LineCount  # rows longer than max_length
    truncated_losing_trained: LineCount  # ... whose cut-off part held trained tokens
    zero_trained: LineCount  # rows that train no token: errors
    unrenderable: LineCount  # rows the renderer refused: errors
    errors: list[RowProblem]  # the first MAX_ERRORS of both, in full
    error_count: int
    roles: dict[str, int]  # messages per role
    turns: dict[str, int]  # rows per number of messages
    identical_pairs: LineCount | None = None  # preferences: chosen renders as rejected
    empty_sides: LineCount | None = None  # preferences: a side that trains no token
    with_answer: int | None = None  # problems
    with_tests: int | None = None  # problems
    trainable: bool  # some rows, and no errors


@dataclass
class StatsAccumulator:
    """Statistics built one rendered row at a time."""

    kind: str
    rendering: Rendering
    rows: int = 0
    lengths: Counter[int] = field(default_factory=Counter)
    trained: Counter[int] = field(default_factory=Counter)
    findings: dict[str, LineCount] = field(default_factory=dict)
    errors: list[RowProblem] = field(default_factory=list)
    roles: Counter[str] = field(default_factory=Counter)
    turns: Counter[int] = field(default_factory=Counter)
    with_answer: int = 0
    with_tests: int = 0

    def add(self, rendered: RenderedRow) -> None:
        """Count one rendered row."""
        self.rows += 1
        self.lengths[rendered.num_tokens] += 1
        self.trained[rendered.num_trained_tokens] += 1
        self.roles.update(rendered.roles)
        self.turns[rendered.turns] += 1
        self.with_answer += rendered.has_answer
        self.with_tests += rendered.has_tests
        line = rendered.line
        if rendered.truncated:
            self._find("truncated", line)
        if any(s.lost_trained for s in rendered.sequences):
            self._find("truncated_losing_trained", line)
        if rendered.zero_trained:
            self._find("zero_trained", line)
            self._error(line, _zero_trained_message(rendered, self.rendering.options))
        if self.kind == "preferences":
            self._pair_findings(rendered)

    def add_error(self, line: int, message: str) -> None:
        """Count a row the renderer refused."""
        self.rows += 1
        self._find("unrenderable", line)
        self._error(line, message)

    def result(self) -> DatasetStats:
        options = self.rendering.options
        pairs = self.kind == "preferences"
        problems = self.kind == "problems"
        return DatasetStats(
            kind=self.kind,
            base_model=options.base_model,
            renderer=self.rendering.renderer.name,
            train_on_what=options.train_on_what,
            max_length=options.max_length,
            rows=self.rows,
            tokens=summarize(self.lengths),
            trained_tokens=summarize(self.trained),
            histogram=histogram(self.lengths),
            truncated=self._found("truncated"),
            truncated_losing_trained=self._found("truncated_losing_trained"),
            zero_trained=self._found("zero_trained"),
            unrenderable=self._found("unrenderable"),
            errors=self.errors,
            error_count=self._found("zero_trained").count + self._found("unrenderable").count,
            roles=dict(self.roles.most_common()),
            turns={str(n): c for n, c in sorted(self.turns.items())},
            identical_pairs=self._found("identical_pairs") if pairs else None,
            empty_sides=self._found("empty_sides") if pairs else None,
            with_answer=self.with_answer if problems else None,
            with_tests=self.with_tests if problems else None,
            trainable=self._trainable(),
        )

    def _pair_findings(self, rendered: RenderedRow) -> None:
        chosen, rejected = rendered.sequences
        if chosen.tokens == rejected.tokens:
            self._find("identical_pairs", rendered.line)
        if chosen.num_trained == 0 or rejected.num_trained == 0:
            self._find("empty_sides", rendered.line)

    def _trainable(self) -> bool:
        errors = self._found("zero_trained").count + self._found("unrenderable").count
        return sum(self.lengths.values()) > 0 and errors == 0

    def _find(self, name: str, line: int) -> None:
        self.findings.setdefault(name, LineCount()).add(line)

    def _found(self, name: str) -> LineCount:
        return self.findings.get(name, LineCount())

    def _error(self, line: int, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(RowProblem(line=line, message=message))


def _zero_trained_message(rendered: RenderedRow, options: RenderOptions) -> str:
    names = [s.name for s in rendered.sequences if s.trains and s.num_trained == 0]
    what = "the row" if names == ["example"] else " and ".join(names)
    if any(s.lost_trained for s in rendered.sequences if s.name in names):
        return f"{what} trains no token: max_length={options.max_length} cuts off all it trains"
    if names == ["example"]:
        mask = f"train_on_what={options.train_on_what.value}"
        return f"{what} trains no token: {mask} (or the trainable flags) masks every label"
    return f"{what} trains no token: no assistant turn in the completion"


def compute_stats(
    rows: Iterable[tuple[int, dict[str, object]]], kind: str, rendering: Rendering
) -> DatasetStats:
    """Statistics of `(line, row)` pairs of checked rows of `kind`, rendered for training.

    Rows the renderer refuses are counted as errors with their line; nothing is raised for
    them. Memory stays constant apart from one count per distinct length.
    """
    accumulator = StatsAccumulator(kind, rendering)
    for line, row in rows:
        try:
            accumulator.add(render_row(line, row, kind, rendering))
        except DatasetError as e:
            accumulator.add_error(line, str(e))
    return accumulator.result()


def summarize(counts: Counter[int]) -> Summary:
    """The summary of values given as {value: how many rows have it}."""
    n = sum(counts.values())
    if n == 0:
        return Summary()
    ordered = sorted(counts.items())
    total = sum(value * c for value, c in ordered)
    median = (_nth(ordered, (n - 1) // 2) + _nth(ordered, n // 2)) / 2
    return Summary(
        min=ordered[0][0],
        mean=total / n,
        median=median,
        p95=_nth(ordered, math.ceil(0.95 * n) - 1),
        max=ordered[-1][0],
        total=total,
    )


def _nth(ordered: list[tuple[int, int]], k: int) -> int:
    """The k-th smallest value (0-based) of sorted (value, count) pairs."""
    seen = 0
    for value, count in ordered:
        seen += count
        if k < seen:
            return value
    raise IndexError(k)


def histogram(counts: Counter[int]) -> list[HistogramBin]:
    """Rows per power-of-two bin [2^i, 2^(i+1)) ([0, 1) for 0), from the lowest to the highest
    bin that holds a row, empty bins included so the shape reads right."""
    if not counts:
        return []
    binned: Counter[int] = Counter()
    for value, count in counts.items():
        binned[_bin_lo(value)] += count
    bins, lo = [], min(binned)
    while lo <= max(binned):
        hi = max(1, lo * 2)
        bins.append(HistogramBin(lo=lo, hi=hi, count=binned[lo]))
        lo = hi
    return bins


def _bin_lo(value: int) -> int:
    return 0 if value <= 0 else 1 << (value.bit_length() - 1)


# ---- preview -----------------------------------------------------------------------------


class Segment(BaseModel):
    """A run of rendered text whose tokens all train, or all do not."""

    text: str
    trained: bool
    truncated: bool = False  # past max_length: training never sees it


class PreviewSequence(BaseModel):
    name: str
    segments: list[Segment]
    num_tokens: int
    num_trained_tokens: int
    truncated: bool


class PreviewRow(BaseModel):
    """A row rendered for training; `error` says why the renderer refused it instead."""

    line: int
    sequences: list[PreviewSequence] = Field(default_factory=list)
    num_tokens: int = 0  # its longest sequence, before truncation
    num_trained_tokens: int = 0  # summed over its sequences
    truncated: bool = False
    error: str | None = None


def preview(
    rows: Iterable[tuple[int, dict[str, object]]], kind: str, rendering: Rendering, limit: int
) -> list[PreviewRow]:
    """The first `limit` rows rendered, their text split where training starts or stops."""
    out: list[PreviewRow] = []
    for line, row in rows:
        if len(out) >= limit:
            break
        out.append(preview_row(line, row, kind, rendering))
    return out


def preview_row(line: int, row: dict[str, object], kind: str, rendering: Rendering) -> PreviewRow:
    try:
        rendered = render_row(line, row, kind, rendering)
    except DatasetError as e:
        return PreviewRow(line=line, error=str(e))
    return PreviewRow(
        line=line,
        sequences=[_preview_sequence(s, rendering.tokenizer) for s in rendered.sequences],
        num_tokens=rendered.num_tokens,
        num_trained_tokens=rendered.num_trained_tokens,
        truncated=rendered.truncated,
    )


def _preview_sequence(sequence: RenderedSequence, tokenizer: Tokenizer) -> PreviewSequence:
    return PreviewSequence(
        name=sequence.name,
        segments=segments(tokenizer, sequence.tokens, sequence.trained, sequence.cut),
        num_tokens=len(sequence.tokens),
        num_trained_tokens=sequence.num_trained,
        truncated=sequence.truncated,
    )


def segments(
    tokenizer: Tokenizer, tokens: list[int], trained: list[bool], cut: int
) -> list[Segment]:
    """The decoded text of `tokens` in runs of equal marks, concatenating to the whole text.

    Each run's text is a slice of the whole sequence's decoding, cut where a prefix of the
    tokens decodes to a prefix of it: a byte-level tokenizer may split a character between
    two runs, and decoding the runs apart would garble it (the boundary moves past it).
    """
    full = decode(tokenizer, tokens)
    out: list[Segment] = []
    start_char = 0
    for end, is_trained, is_cut in _runs(trained, cut):
        stop = len(full) if end >= len(tokens) else _char_offset(tokenizer, tokens, end, full)
        stop = max(stop, start_char)
        if stop > start_char:
            out.append(Segment(text=full[start_char:stop], trained=is_trained, truncated=is_cut))
        start_char = stop
    return out


def _runs(trained: list[bool], cut: int) -> Iterator[tuple[int, bool, bool]]:
    """(end, trained, truncated) of each maximal run of tokens with the same marks."""
    marks = [(t, i >= cut) for i, t in enumerate(trained)]
    for i, mark in enumerate(marks):
        if i + 1 == len(marks) or marks[i + 1] != mark:
            yield i + 1, mark[0], mark[1]


def _char_offset(tokenizer: Tokenizer, tokens: list[int], end: int, full: str) -> int:
    """Where in `full` the text of tokens[:end] ends, at the first clean character boundary."""
    for boundary in range(end, min(end + _BOUNDARY_SLACK, len(tokens)) + 1):
        prefix = decode(tokenizer, tokens[:boundary])
        if full.startswith(prefix):
            return len(prefix)
    return min(len(decode(tokenizer, tokens[:end])), len(full))


# ---- stored datasets ---------------------------------------------------------------------


def stored_rows(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """(line, row) of a stored, already checked JSONL dataset."""
    for line, row in iter_rows(path):
        if isinstance(row, dict):
            yield line, row


def cached_stats(path: Path, kind: str, options: RenderOptions) -> DatasetStats:
    """The statistics of the stored dataset at `path`, computed once per options.

    A stored dataset never changes, so the result is kept beside it as
    `<id>.stats.<key>.json` and read back on later calls. Blocking: run it on a thread.
    """
    cache = path.with_name(f"{path.stem}.stats.{options.cache_key(kind)}.json")
    if cache.is_file():
        return DatasetStats.model_validate_json(cache.read_bytes())
    stats = compute_stats(stored_rows(path), kind, load_rendering(options))
    temp = path.with_name(f".tmp-{secrets.token_hex(8)}")
    try:
        temp.write_text(stats.model_dump_json())
        temp.replace(cache)  # atomic: a concurrent reader sees no file or the whole of it
    except OSError as e:  # a full disk: the statistics are right, only not kept
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
    finally:
        temp.unlink(missing_ok=True)
    return stats
