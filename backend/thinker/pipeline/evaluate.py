"""The eval stage: held-out NLL and exact match of generated answers.

For each example (a conversation whose last message is the assistant's reference answer):

- NLL: the example is rendered exactly as SL trains on it (`build_supervised_example` with
  the run's `train_on_what`, truncated to `max_length`); `compute_logprobs` gives log p of
  every token given the ones before it; the example's NLL is -sum(w * log p) / sum(w).
  `eval_nll` is the mean per trained token over the whole set (total NLL / total weight),
  the same quantity as SL's `eval_mean_nll`.
- Exact match: the conversation up to the reference is rendered as a generation prompt, one
  answer is sampled (temperature 0 = greedy) up to the renderer's stop sequences, parsed
  with `parse_response`, and compared with the reference after stripping whitespace.

Evaluating a checkpoint needs its sampler path; without one the base model is evaluated,
which gives the before-training figure to compare against.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinker import types

from thinker.data import load_conversations, split_train_eval
from thinker.engine import ServiceClient
from thinker.errors import DatasetError
from thinker.pipeline.config import PipelineConfig
from thinker.renderers import Message, Renderer, TrainOnWhat, default_renderer_name, get_renderer


@dataclass(frozen=True)
class SampleResult:
    """One evaluated example: one line of the per-sample JSONL."""

    index: int
    prompt: str  # the last message before the reference (the question)
    reference: str
    prediction: str
    exact_match: bool
    nll: float  # mean per trained token of this example
    trained_tokens: float
    stop_reason: str

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = dict(self.__dict__)
        record["nll"] = self.nll if math.isfinite(self.nll) else None  # strict JSON
        return record


async def evaluate(
    conversations: list[list[Message]],
    sampling_client: Any,
    renderer: Renderer,
    *,
    train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    max_length: int | None = None,
    max_tokens: int = 64,
    temperature: float = 0.0,
    seed: int | None = 0,
    output: Path | None = None,
) -> dict[str, float]:
    """Score `conversations` with one sampling client (a checkpoint's or the base model's).

    Args:
        conversations: Each ends with the reference assistant message.
        sampling_client: Anything with the SDK's `sample` and `compute_logprobs`.
        renderer: The renderer training used.
        train_on_what: Which tokens the NLL is computed over (as in training).
        max_length: Truncate rendered examples as training did (None: no truncation).
        max_tokens: The most tokens generated per answer.
        temperature: 0 = greedy.
        seed: The sampling seed (matters only at temperature > 0).
        output: Where to write one JSON line per example (None: nowhere).

    Returns:
        `{"eval_nll", "exact_match", "num_samples"}`.

    Raises:
        DatasetError: No examples, or one that does not end with an assistant message.
    """
    if not conversations:
        raise DatasetError("the evaluation set is empty")
    params = types.SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        stop=renderer.get_stop_sequences(),
    )
    # Submit everything first: a remote backend works on all of it while we wait.
    pending = [
        _submit(i, messages, sampling_client, renderer, params, train_on_what, max_length)
        for i, messages in enumerate(conversations)
    ]
    results = [await _collect(p, renderer) for p in pending]
    if output is not None:
        _write_jsonl(output, [r.to_json() for r in results])
    return summarize(results)


def summarize(results: list[SampleResult]) -> dict[str, float]:
    """Token-weighted mean NLL, exact-match rate, and the number of examples."""
    weight = sum(r.trained_tokens for r in results)
    total_nll = sum(r.nll * r.trained_tokens for r in results if r.trained_tokens > 0)
    return {
        "eval_nll": total_nll / weight if weight > 0 else math.nan,
        "exact_match": sum(r.exact_match for r in results) / len(results) if results else math.nan,
        "num_samples": float(len(results)),
    }


def weighted_nll(logprobs: list[float | None], weights: list[float]) -> tuple[float, float]:
    """(sum of -w * log p, sum of w) over the positions that have a logprob (not position 0)."""
    nll = sum(-w * lp for lp, w in zip(logprobs, weights, strict=True) if lp is not None and w)
    weight = sum(w for lp, w in zip(logprobs, weights, strict=True) if lp is not None)
    return nll, weight


@dataclass
class _Pending:
    index: int
    messages: list[Message]
    weights: list[float]
    logprobs: Any  # future of list[float | None]
    sample: Any  # future of SampleResponse


def _submit(
    index: int,
    messages: list[Message],
    client: Any,
    renderer: Renderer,
    params: types.SamplingParams,
    train_on_what: TrainOnWhat,
    max_length: int | None,
) -> _Pending:
    if not messages or messages[-1]["role"] != "assistant":
        raise DatasetError(f"evaluation example {index} does not end with an assistant message")
    tokens, weights = renderer.build_supervised_example(messages, train_on_what)
    if max_length is not None:
        tokens, weights = tokens[:max_length], weights[:max_length]
    logprobs = client.compute_logprobs(types.ModelInput.from_ints(tokens))
    prompt = renderer.build_generation_prompt(messages[:-1])
    sample = client.sample(prompt=prompt, num_samples=1, sampling_params=params)
    return _Pending(index, messages, [float(w) for w in weights], logprobs, sample)


async def _collect(p: _Pending, renderer: Renderer) -> SampleResult:
    logprobs, response = await p.logprobs, await p.sample
    nll, weight = weighted_nll(logprobs, p.weights)
    message, reason = renderer.parse_response(list(response.sequences[0].tokens))
    prediction = message["content"].strip()
    reference = p.messages[-1]["content"].strip()
    return SampleResult(
        index=p.index,
        prompt=p.messages[-2]["content"] if len(p.messages) > 1 else "",
        reference=reference,
        prediction=prediction,
        exact_match=prediction == reference,
        nll=nll / weight if weight > 0 else math.nan,
        trained_tokens=weight,
        stop_reason=reason,
    )


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)


def eval_conversations(config: PipelineConfig) -> list[list[Message]]:
    """The evaluation set: `evaluation.dataset`, else `training.eval_dataset`, else the exact
    split that SL held out of `training.dataset` (same fraction, same seed)."""
    t, ev = config.training, config.evaluation
    if ev.dataset is not None:
        conversations = load_conversations(ev.dataset)
    elif t.eval_dataset is not None:
        conversations = load_conversations(t.eval_dataset)
    else:
        _, conversations = split_train_eval(load_conversations(t.dataset), t.eval_fraction, t.seed)
    return conversations[: ev.max_samples] if ev.max_samples else conversations


def run_evaluation(
    config: PipelineConfig, run_dir: Path, sampler_path: str | None, output: Path
) -> dict[str, float]:
    """Evaluate a checkpoint's sampler weights (None: the base model) on the evaluation set."""
    t, ev = config.training, config.evaluation
    conversations = eval_conversations(config)

    async def go() -> dict[str, float]:
        if t.backend == "local":
            service = ServiceClient("local", storage_dir=run_dir)
        else:
            service = ServiceClient("tinker")
        if sampler_path is not None:
            client = await service.create_sampling_client(model_path=sampler_path)
        else:
            client = await service.create_sampling_client(base_model=t.base_model)
        tokenizer = client.get_tokenizer()
        renderer = get_renderer(
            t.renderer or default_renderer_name(t.base_model, tokenizer), tokenizer
        )
        return await evaluate(
            conversations,
            client,
            renderer,
            train_on_what=t.train_on_what,
            max_length=t.max_length,
            max_tokens=ev.max_tokens,
            temperature=ev.temperature,
            seed=t.seed,
            output=output,
        )

    return asyncio.run(go())
