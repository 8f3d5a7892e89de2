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

After DPO or RL the held-out figures that matter (preference accuracy and margin, mean
reward) are computed by training itself on its held-out split and logged to metrics.jsonl;
`held_out_metrics` reads the first and last of them back, so the eval stage records them without
recomputing anything. Generation eval then runs only where `evaluation.dataset` names a set
of chat rows.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinker import types

from thinker.algorithms.evaluation import weighted_nll
from thinker.data import load_conversations, split_train_eval
from thinker.engine import ServiceClient
from thinker.engine.protocols import APIFuture, SamplingClient
from thinker.errors import DatasetError
from thinker.files import write_jsonl_atomically
from thinker.pipeline.config import (
    RLHF_STAGES,
    PipelineConfig,
    RLHFTraining,
    RLTraining,
    SLTraining,
    TrainingSection,
)
from thinker.renderers import Message, Renderer, TrainOnWhat, renderer_for
from thinker.runs import RunDir, read_metrics


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
    sampling_client: SamplingClient,
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
        sampling_client: A sampling client of either backend.
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
    results = await score(
        conversations,
        sampling_client,
        renderer,
        train_on_what=train_on_what,
        max_length=max_length,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
    )
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomically(output, [r.to_json() for r in results])
    return summarize(results)


async def score(
    conversations: list[list[Message]],
    sampling_client: SamplingClient,
    renderer: Renderer,
    *,
    train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    max_length: int | None = None,
    max_tokens: int = 64,
    temperature: float = 0.0,
    seed: int | None = 0,
) -> list[SampleResult]:
    """`evaluate`'s per-example results (same arguments, no output file)."""
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
    return [await _collect(p, renderer) for p in pending]


def summarize(results: list[SampleResult]) -> dict[str, float]:
    """Token-weighted mean NLL, exact-match rate, and the number of examples."""
    weight = sum(r.trained_tokens for r in results)
    total_nll = sum(r.nll * r.trained_tokens for r in results if r.trained_tokens > 0)
    return {
        "eval_nll": total_nll / weight if weight > 0 else math.nan,
        "exact_match": sum(r.exact_match for r in results) / len(results) if results else math.nan,
        "num_samples": float(len(results)),
    }


@dataclass
class _Pending:
    index: int
    messages: list[Message]
    weights: list[float]
    logprobs: APIFuture[list[float | None]]
    sample: APIFuture[types.SampleResponse]


def _submit(
    index: int,
    messages: list[Message],
    client: SamplingClient,
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


def eval_conversations(config: PipelineConfig) -> list[list[Message]]:
    """The evaluation set: `evaluation.dataset`; else, after SL, `eval_dataset` or the exact
    split that SL held out of `dataset` (same fraction, same seed)."""
    final, ev = config.final, config.evaluation
    if ev.dataset is not None:
        conversations = load_conversations(ev.dataset)
    elif not isinstance(final, SLTraining):
        raise DatasetError(
            f"no evaluation.dataset: after {final.algorithm} the eval stage generates answers "
            "only on a set of chat rows named there"
        )
    else:
        conversations = sl_held_out(final)
    return conversations[: ev.max_samples] if ev.max_samples else conversations


def sl_held_out(section: SLTraining) -> list[list[Message]]:
    """The examples SL held out: `eval_dataset`, else the exact split of `dataset` (same
    fraction, same seed; empty when `eval_fraction` is 0)."""
    if section.eval_dataset is not None:
        return load_conversations(section.eval_dataset)
    conversations = load_conversations(section.dataset)
    return split_train_eval(conversations, section.eval_fraction, section.seed)[1]


def generates(config: PipelineConfig) -> bool:
    """Whether the eval stage generates answers: always after SL, else only on a named set."""
    return isinstance(config.final, SLTraining) or config.evaluation.dataset is not None


def held_out_metrics(
    config: PipelineConfig, run_dir: Path
) -> tuple[dict[str, float], dict[str, float]]:
    """The first and the last held-out figures the final section's training logged to its
    metrics.jsonl: the `eval_*` values of the first and last lines that have any (RLHF: also
    its reward model's `rm_eval_*`). Empty where training held nothing out."""
    final_dir = config.section_dir(run_dir, config.final)
    dirs = [final_dir]
    if isinstance(config.final, RLHFTraining):
        dirs = [final_dir / name for name in RLHF_STAGES[1:]]  # the judge's, then the policy's
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for directory in dirs:
        held_out = [
            {k: v for k, v in record.items() if k.startswith(("eval_", "rm_eval_"))}
            for record in read_metrics(RunDir(directory).metrics)
        ]
        held_out = [h for h in held_out if h]
        if held_out:
            first.update(held_out[0])
            last.update(held_out[-1])
    return first, last


def run_evaluation(
    config: PipelineConfig, storage_dir: Path, sampler_path: str | None, output: Path
) -> dict[str, float]:
    """Generate and score answers on the evaluation set with a checkpoint's sampler weights
    (None: the base model). `storage_dir` is where the run's tinker:// paths live."""
    final, ev = config.final, config.evaluation
    conversations = eval_conversations(config)
    train_on_what, max_length = eval_rendering(final)

    async def go() -> dict[str, float]:
        if final.backend == "local":
            service = ServiceClient(backend="local", storage_dir=storage_dir)
        else:
            service = ServiceClient(backend="tinker")
        if sampler_path is not None:
            client = await service.create_sampling_client(model_path=sampler_path)
        else:
            client = await service.create_sampling_client(base_model=final.base_model)
        tokenizer = client.get_tokenizer()
        renderer = renderer_for(final.renderer, final.base_model, tokenizer)
        return await evaluate(
            conversations,
            client,
            renderer,
            train_on_what=train_on_what,
            max_length=max_length,
            max_tokens=ev.max_tokens,
            temperature=ev.temperature,
            seed=final.seed,
            output=output,
        )

    return asyncio.run(go())


def eval_rendering(section: TrainingSection) -> tuple[TrainOnWhat, int | None]:
    """Which tokens the NLL covers and where examples are cut: as SL trained, else the last
    assistant message, cut where the algorithm cuts its sequences (RL does not)."""
    if isinstance(section, SLTraining):
        return section.train_on_what, section.max_length
    if isinstance(section, RLTraining | RLHFTraining):  # the policy's last stage is RL
        return TrainOnWhat.LAST_ASSISTANT_MESSAGE, None
    return TrainOnWhat.LAST_ASSISTANT_MESSAGE, section.max_length
