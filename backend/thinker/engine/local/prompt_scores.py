"""What a sample call reports on its prompt besides each token's logprob, from one forward.

The SDK's `topk_prompt_logprobs`, `target_prompt_logprobs`, `prompt_alt_tokens_k` and
`prompt_logprobs_last_n` (tinker 0.38's `SamplingClient.sample`), laid out as its
`SampleResponse` lays them out. Row r of the model's output scores prompt position r + 1
(position 0 has no context): the top-k matrix has a row per prompt position, row 0 empty;
the targets and the alternatives have `len(prompt) - 1` rows, row r for position r + 1.
All are the model's own logprobs (temperature 1, no top-k/top-p), as the sampled tokens'
are. Only the rows asked for go through the output layer (forward.vocab_logprobs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from tinker import types
from tinker.types.topk_logprobs import MASK_LOGPROB, TopkLogprobs
from torch import nn

from thinker.engine.local.forward import vocab_logprobs
from thinker.errors import ConfigError

ALT_SEED_SALT = 0x5EED_A17  # the alternatives' generator: not the decode's stream


@dataclass(frozen=True, eq=False)
class PromptOptions:
    """One call's prompt-side options, checked against its prompt (`check_prompt_options`)."""

    logprobs: bool = False  # include_prompt_logprobs
    topk: int = 0  # topk_prompt_logprobs
    targets: types.TensorData | None = None  # target_prompt_logprobs, as the caller sent it
    target_ids_RK: np.ndarray | None = None  # ... dense, -1 where nothing is asked
    alt_k: int = 0  # prompt_alt_tokens_k
    last_n: int | None = None  # prompt_logprobs_last_n

    @property
    def needs_vocab(self) -> bool:
        """Whether anything but the plain prompt logprobs is asked (the path of one forward
        with the whole vocabulary's logprobs; plain logprobs batch with compute_logprobs)."""
        return bool(self.topk or self.targets is not None or self.alt_k or self.last_n)


@dataclass(frozen=True)
class PromptScores:
    """The SampleResponse fields a call's prompt options fill."""

    logprobs_P: np.ndarray | None
    topk: TopkLogprobs | None
    targets: types.TensorData | None
    alternatives: types.PromptAltTokens | None

    def into(self, response: types.SampleResponse) -> types.SampleResponse:
        return dataclasses.replace(
            response,
            prompt_logprobs_np=self.logprobs_P,
            topk_prompt_logprobs_np=self.topk,
            target_prompt_logprobs=self.targets,
            prompt_alt_tokens=self.alternatives,
        )


def topk_problem(name: str, k: int, vocab: int) -> str | None:
    """Why `k` cannot be a top-k width for this vocabulary, or None."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= vocab:
        return f"{name} must be an integer from 0 to the vocabulary's {vocab} tokens, got {k!r}"
    return None


def check_prompt_options(
    prompt_len: int,
    vocab: int,
    include_prompt_logprobs: bool,
    topk: int,
    targets: types.TensorData | None,
    alt_k: int,
    last_n: int | None,
) -> PromptOptions:
    """The options as one value, or a ConfigError naming every field that is wrong.

    The rules are the SDK's docstrings': `prompt_logprobs_last_n` needs
    `include_prompt_logprobs` and lies in [1, len(prompt) - 1]; `target_prompt_logprobs` is
    an int64 [len(prompt) - 1, K] tensor of ids or -1 that names at least one id.
    """
    problems = [topk_problem("topk_prompt_logprobs", topk, vocab)]
    if isinstance(alt_k, bool) or not isinstance(alt_k, int) or alt_k < 0:
        problems.append(f"prompt_alt_tokens_k must be an integer, 0 or more, got {alt_k!r}")
    if last_n is not None:
        if not include_prompt_logprobs:
            problems.append(
                "prompt_logprobs_last_n applies to prompt logprobs: set include_prompt_logprobs"
            )
        if not 1 <= last_n <= prompt_len - 1:
            problems.append(
                f"prompt_logprobs_last_n must be from 1 to len(prompt) - 1 = {prompt_len - 1}, "
                f"got {last_n}"
            )
    ids_RK = None
    if targets is not None:
        ids_RK, problem = _target_ids(targets, prompt_len, vocab)
        problems.append(problem)
    found = [p for p in problems if p is not None]
    if found:
        raise ConfigError("; ".join(found))
    return PromptOptions(include_prompt_logprobs, topk, targets, ids_RK, alt_k, last_n)


def _target_ids(
    targets: types.TensorData, prompt_len: int, vocab: int
) -> tuple[np.ndarray | None, str | None]:
    """The requested ids as a dense int64 [len(prompt) - 1, K] array (-1: none), or why not."""
    name, rows = "target_prompt_logprobs", prompt_len - 1
    if targets.dtype != "int64":
        return None, f"{name} must be an int64 tensor of token ids, got {targets.dtype}"
    shape = list(targets.shape) if targets.shape is not None else None
    if shape is None or len(shape) != 2:
        return None, f"{name} must be 2-D, [len(prompt) - 1, K], got shape {shape}"
    if shape[0] != rows:
        return None, (
            f"{name} has {shape[0]} rows; a prompt of {prompt_len} tokens needs "
            f"len(prompt) - 1 = {rows}"
        )
    try:
        ids_RK = np.asarray(targets.to_numpy(pad_value=-1), dtype=np.int64).reshape(shape)
    except (RuntimeError, ValueError, AssertionError) as e:  # torch's CSR checks, a bad reshape
        return None, f"{name} is not a valid tensor of shape {shape} ({e})"
    bad = ids_RK[(ids_RK < -1) | (ids_RK >= vocab)]
    if bad.size:
        return None, (
            f"{name} holds ids outside the vocabulary's {vocab} tokens (-1 asks for nothing): "
            f"{bad[:5].tolist()}"
        )
    if not (ids_RK >= 0).any():
        return None, f"{name} names no token id (every cell is -1)"
    return ids_RK, None


@torch.no_grad()  # not inference_mode: on a sharded model that would taint FSDP's buffers
def score_prompt(
    model: nn.Module,
    prompt: list[int],
    options: PromptOptions,
    alt_temperature: float | None,
    seed: int,
    device: torch.device,
) -> PromptScores:
    """What `options` ask about `prompt`, from one forward over it.

    `alt_temperature`: the temperature the alternatives are drawn at (None: greedy, every
    draw the likeliest token). They come from a generator of their own seeded from `seed`,
    so asking for them leaves the sampled tokens as they were.
    """
    rows = len(prompt) - 1
    scored_from = rows - options.last_n if options.last_n is not None else 0
    starts = []
    if options.logprobs or options.topk:
        starts.append(scored_from)
    if options.target_ids_RK is not None:
        starts.append(int(np.flatnonzero((options.target_ids_RK >= 0).any(axis=1))[0]))
    if options.alt_k:
        starts.append(0)
    out = _Rows(rows, options, device)
    if rows == 0:  # a one-token prompt: nothing to score
        return out.scores(options, scored_from=0)
    next_R = torch.tensor(prompt[1:], dtype=torch.long, device=device)
    generator = torch.Generator(device).manual_seed(seed ^ ALT_SEED_SALT)
    first = min(starts, default=rows)
    for start, logprobs_CV in vocab_logprobs(model, prompt[:-1], device, first):
        end = start + logprobs_CV.shape[0]
        out.logprobs_R[start:end] = logprobs_CV.gather(-1, next_R[start:end, None])[:, 0]
        if options.topk:
            top = logprobs_CV.topk(options.topk, dim=-1)
            out.topk_values_RK[start:end], out.topk_ids_RK[start:end] = top.values, top.indices
        if out.target_ids_RK is not None:
            ids_CK = out.target_ids_RK[start:end]
            picked_CK = logprobs_CV.gather(-1, ids_CK.clamp(min=0))
            out.target_values_RK[start:end] = picked_CK.masked_fill(ids_CK < 0, 0.0)
        if options.alt_k:
            drawn_CK = _draw(logprobs_CV, options.alt_k, alt_temperature, generator)
            out.alt_ids_RK[start:end] = drawn_CK
            out.alt_values_RK[start:end] = logprobs_CV.gather(-1, drawn_CK)
    return out.scores(options, scored_from)


def _draw(
    logprobs_CV: torch.Tensor, k: int, temperature: float | None, generator: torch.Generator
) -> torch.Tensor:
    """k draws per row, with replacement, at `temperature` (None: the argmax k times)."""
    if temperature is None:
        return logprobs_CV.argmax(dim=-1, keepdim=True).expand(-1, k)
    probs_CV = torch.softmax(logprobs_CV / temperature, dim=-1)
    return torch.multinomial(probs_CV, k, replacement=True, generator=generator)


class _Rows:
    """The per-row results on the device, filled chunk by chunk, read back once."""

    def __init__(self, rows: int, options: PromptOptions, device: torch.device) -> None:
        k, alt_k = options.topk, options.alt_k
        self.logprobs_R = torch.full((rows,), float("nan"), device=device)
        self.topk_values_RK = torch.full((rows, k), MASK_LOGPROB, device=device)
        self.topk_ids_RK = torch.zeros((rows, k), dtype=torch.long, device=device)
        self.target_ids_RK: torch.Tensor | None = None
        self.target_values_RK = torch.zeros((rows, 0), device=device)
        if options.target_ids_RK is not None:
            self.target_ids_RK = torch.from_numpy(options.target_ids_RK).to(device)
            self.target_values_RK = torch.zeros(self.target_ids_RK.shape, device=device)
        self.alt_ids_RK = torch.zeros((rows, alt_k), dtype=torch.long, device=device)
        self.alt_values_RK = torch.zeros((rows, alt_k), device=device)

    def scores(self, options: PromptOptions, scored_from: int) -> PromptScores:
        # Rows before the last n are not scored (NaN, or the SDK's empty top-k row).
        self.logprobs_R[:scored_from] = float("nan")
        self.topk_values_RK[:scored_from] = MASK_LOGPROB
        self.topk_ids_RK[:scored_from] = 0
        logprobs_P = None
        if options.logprobs:
            logprobs_P = np.concatenate([[np.nan], self.logprobs_R.cpu().numpy()])
        topk = None
        if options.topk:  # one row per prompt position; position 0 is empty
            width = options.topk
            ids = np.zeros((1, width), dtype=np.int32)
            values = np.full((1, width), MASK_LOGPROB, dtype=np.float32)
            topk = TopkLogprobs(
                token_ids=np.concatenate([ids, self.topk_ids_RK.cpu().numpy().astype(np.int32)]),
                logprobs=np.concatenate([values, self.topk_values_RK.cpu().numpy()]),
            )
        targets = None
        if options.targets is not None:
            targets = _like(options.targets, self.target_values_RK.cpu().numpy())
        alternatives = None
        if options.alt_k:
            alternatives = types.PromptAltTokens(
                tokens=types.TensorData.from_numpy(self.alt_ids_RK.cpu().numpy()),
                logprobs=types.TensorData.from_numpy(self.alt_values_RK.cpu().numpy()),
            )
        return PromptScores(
            logprobs_P.astype(np.float32) if logprobs_P is not None else None,
            topk,
            targets,
            alternatives,
        )


def _like(request: types.TensorData, values_RK: np.ndarray) -> types.TensorData:
    """`values_RK` in the request's layout: dense, or the same sparse CSR cells."""
    values_RK = values_RK.astype(np.float32)
    if request.sparse_crow_indices is None or request.sparse_col_indices is None:
        return types.TensorData.from_numpy(values_RK)
    crow = np.asarray(request.sparse_crow_indices, dtype=np.int64)
    cols = np.asarray(request.sparse_col_indices, dtype=np.int64)
    rows = np.repeat(np.arange(len(crow) - 1), np.diff(crow))
    return types.TensorData(
        data=values_RK[rows, cols],
        dtype="float32",
        shape=list(values_RK.shape),
        sparse_crow_indices=crow.tolist(),
        sparse_col_indices=cols.tolist(),
    )
