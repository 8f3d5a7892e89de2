"""Evaluation: several models answer one eval set; each answer is scored; every pair of models is
compared with its significance; a Bradley-Terry leaderboard ranks them all.

What it computes:
- Each row of the eval set is a prompt and, where the row has one, a reference answer (a chat
  row's last assistant message, a prompt-completion row's completion, a problem row's
  `answer`). Problem rows may carry `tests` for the code scorer.
- Each model (a base model, or sampler weights on their base model) answers every prompt
  `samples` times at `temperature` (0: greedy), up to its renderer's stop sequences; each
  answer is scored by the scorer (the same reward functions RL uses: exact_match, regex, code
  in the sandbox, a python function) or by a trained reward model (`reward_model`: a pairwise
  judge's P(the answer beats the row's reference), an empty answer 0; or a Bradley-Terry
  model's score of the answer) or by a model as judge (`llm_judge`: a grade from 1 to 10, a
  model Thinker serves or an OpenAI-compatible endpoint; llm_judge.py), and the model's score
  on a prompt is the mean of its answers'. With scorer `nll` no answer is generated: the
  score is minus the model's mean NLL per token of the reference answer.
- With `nll` on, every model's NLL of the reference answers is computed as well (the eval
  stage's `eval_nll`: rendered as SL trains on the last assistant message, the mean per
  trained token, token-weighted over the set).
- Per model: the mean score and its bootstrap 95% interval over the prompts.
- Per pair (A the earlier model in `models`, B the later): each prompt's outcome is who scored
  higher (equal scores tie), and significance.compare gives wins / ties / losses, B's win
  rate with its interval, the sign test's p-value and the verdict line.
- With three or more models (two too), the Bradley-Terry leaderboard of those pairwise results.

Files in the run directory:
- `answers/<k>.jsonl`: model k's answers, written whole once it has answered everything; a
  resumed run reuses the models already answered;
- `samples.jsonl`: one row per prompt: its prompt, reference and every model's answers and
  scores, and whether the models' scores disagree;
- `evaluation.json`: the models' figures, the comparisons and the leaderboard.
metrics.jsonl gets one step per model answered (its score and NLL).
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinker import types

from thinker.algorithms import significance
from thinker.algorithms.bradley_terry import BradleyTerryReward
from thinker.algorithms.common import RunResult
from thinker.algorithms.evaluation_config import EvalConfig, EvalModel
from thinker.algorithms.llm_judge import ModelJudge, endpoint_judge, served_judge
from thinker.algorithms.reward_model import JudgeReward
from thinker.data.problems import check_problem_row, row_problem
from thinker.data.validation import RowError, scan_rows
from thinker.engine import ServiceClient
from thinker.engine.local import checkpoints
from thinker.engine.protocols import SamplingClient, together
from thinker.errors import ConfigError, DatasetError
from thinker.files import read_jsonl, write_json_atomically, write_jsonl_atomically
from thinker.renderers import Message, Renderer, TrainOnWhat, renderer_for
from thinker.rewards import Completion, Problem, build_reward
from thinker.rewards.base import RewardFn
from thinker.runs import MetricsLogger, RunLogger

ANSWERS_DIR = "answers"
SAMPLES = "samples.jsonl"
SUMMARY = "evaluation.json"


@dataclass(frozen=True)
class Example:
    """One prompt of the eval set."""

    index: int  # its row, from 0
    problem: Problem  # the conversation to answer; `answer` is the reference, if any
    reference: str | None


# ---- the eval set ---------------------------------------------------------------------------
def load_examples(path: Path, max_examples: int | None = None) -> list[Example]:
    """Every row of `path` as an Example; all bad rows reported at once with their lines.

    Raises:
        DatasetError: a row that is none of a chat ending with the assistant's reference, a
            prompt-completion pair or a problem row (each problem with its line and field).
    """
    examples: list[Example] = []

    def check(line: int, row: dict[str, object]) -> list[RowError]:
        row = _as_problem_row(row)
        if "completion" in row:
            return [RowError(line, "completion", "expected a string", "wrong_type")]
        if row.get("messages") == []:  # a chat of the reference alone
            return [RowError(line, "messages", "no message before the reference to answer")]
        errors = check_problem_row(line, row)
        if errors:
            return errors
        problem = row_problem(row)
        examples.append(Example(len(examples), problem, problem.answer))
        return []

    result = scan_rows(Path(path), check, max_examples)
    if not result.ok:
        raise DatasetError(result.summary())
    return examples


def _as_problem_row(row: dict[str, object]) -> dict[str, object]:
    """A chat row (its last assistant message the reference) or a prompt-completion row as a
    problem row with that reference as its `answer`; a problem row as it is."""
    messages = row.get("messages")
    if "answer" in row or "tests" in row:
        return row
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        if last.get("role") == "assistant" and isinstance(last.get("content"), str):
            return {**row, "messages": messages[:-1], "answer": last["content"]}
    if isinstance(row.get("prompt"), str) and isinstance(row.get("completion"), str):
        rest = {k: v for k, v in row.items() if k != "completion"}
        return {**rest, "answer": row["completion"]}
    return row


# ---- one model's answers --------------------------------------------------------------------
async def answer_all(
    client: SamplingClient,
    renderer: Renderer,
    examples: list[Example],
    config: EvalConfig,
    reward: RewardFn | None,
) -> list[dict[str, Any]]:
    """One model's record per example: its answers, their scores, the example's score and
    the NLL of the reference (None where there is none, or `nll` is off)."""
    params = types.SamplingParams(
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        seed=config.seed,
        stop=renderer.get_stop_sequences(),
    )
    by_nll = config.scorer.type == "nll"
    with together(client):  # one batch, whatever the timing
        sampled = [
            None
            if by_nll
            else client.sample(
                renderer.build_generation_prompt(e.problem.messages), config.samples, params
            )
            for e in examples
        ]
        scored = [
            _reference_logprobs(client, renderer, e) if (config.nll or by_nll) else None
            for e in examples
        ]
    records = []
    for example, sample, logprobs in zip(examples, sampled, scored, strict=True):
        nll, tokens = (None, 0.0) if logprobs is None else await logprobs
        record: dict[str, Any] = {"index": example.index, "nll": nll, "nll_tokens": tokens}
        if sample is not None:
            completions = []
            for sequence in (await sample).sequences:
                message, reason = renderer.parse_response(list(sequence.tokens))
                completions.append(Completion(message["content"], reason != "length"))
            assert reward is not None
            if isinstance(reward, ModelJudge):  # its replies are kept beside its grades
                scores, replies = await asyncio.to_thread(
                    reward.judge, example.problem, completions
                )
                record["judge_replies"] = replies
            else:
                scores = await asyncio.to_thread(reward, example.problem, completions)
            record.update(
                answers=[c.text for c in completions],
                terminated=[c.terminated for c in completions],
                scores=[float(x) for x in scores],
                score=statistics.fmean(scores),
            )
        else:
            record["score"] = None if nll is None else -nll
        records.append(record)
    return records


def _reference_logprobs(
    client: SamplingClient, renderer: Renderer, example: Example
) -> Coroutine[Any, Any, tuple[float | None, float]] | None:
    """The reference answer's mean NLL per token and its token count, as the eval stage
    computes `eval_nll`; None without a reference."""
    if example.reference is None:
        return None
    messages: list[Message] = [
        *example.problem.messages,
        {"role": "assistant", "content": example.reference},
    ]
    tokens, weights = renderer.build_supervised_example(
        messages, TrainOnWhat.LAST_ASSISTANT_MESSAGE
    )
    future = client.compute_logprobs(types.ModelInput.from_ints(tokens))

    async def nll() -> tuple[float | None, float]:
        total, weight = weighted_nll(await future, [float(w) for w in weights])
        return (total / weight if weight > 0 else None), weight

    return nll()


def weighted_nll(logprobs: list[float | None], weights: list[float]) -> tuple[float, float]:
    """(sum of -w * log p, sum of w) over the positions that have a logprob (not position 0)."""
    nll = sum(-w * lp for lp, w in zip(logprobs, weights, strict=True) if lp is not None and w)
    weight = sum(w for lp, w in zip(logprobs, weights, strict=True) if lp is not None)
    return nll, weight


# ---- the run --------------------------------------------------------------------------------
async def main(
    config: EvalConfig, logger: MetricsLogger | None = None, service: ServiceClient | None = None
) -> RunResult:
    """Evaluate every model of `config` not yet answered; write the comparisons."""
    run_dir = Path(config.log_path)
    (run_dir / ANSWERS_DIR).mkdir(parents=True, exist_ok=True)
    logger = logger or RunLogger(run_dir)
    examples = load_examples(config.dataset, config.max_examples)
    scorer = config.scorer
    by_nll = scorer.type == "nll"
    against_reference = by_nll or (scorer.type == "reward_model" and scorer.head == "judge")
    if against_reference and any(e.reference is None for e in examples):
        missing = next(e.index for e in examples if e.reference is None)
        raise DatasetError(
            f"{config.dataset}: scorer {scorer.type} needs a reference answer in every row; "
            f"row {missing + 1} has none"
        )
    if service is None:
        storage = run_dir / "engine"
        service = ServiceClient(backend=config.backend, storage_dir=storage)
    reward: RewardFn | None = None
    if scorer.type == "reward_model":
        reward = await _reward_model(service, config)
    elif scorer.type == "llm_judge":
        reward = await _llm_judge(service, config)
    elif not by_nll:
        reward = build_reward(scorer)
    logger.log_event("plan", {"total_steps": len(config.models), "start_step": 0})
    print(
        f"[thinker] eval: {len(config.models)} model(s) on {len(examples)} prompts, scored by "
        f"{config.scorer.type}",
        flush=True,
    )
    answers = []
    for k, model in enumerate(config.models):
        path = run_dir / ANSWERS_DIR / f"{k}.jsonl"
        records = read_jsonl(path)
        if len(records) != len(examples):  # not answered yet (a file is written whole)
            client = await _sampling_client(service, model, config.backend)
            renderer = renderer_for(config.renderer, _base_model(model), client.get_tokenizer())
            records = await answer_all(client, renderer, examples, config, reward)
            write_jsonl_atomically(path, records)
        answers.append(records)
        figures = model_figures(records, config)
        logger.log_metrics(
            {"score_mean": figures["score_mean"], "nll_mean": figures["nll_mean"]}, step=k + 1
        )
        print(f"[thinker] eval: {model.label}: score {figures['score_mean']:.4f}", flush=True)
    if isinstance(reward, ModelJudge) and reward.unparsed:
        print(
            f"[thinker] eval: the judge gave no grade from 1 to 10 in {reward.unparsed} of "
            f"{reward.replies} replies (each scored 0)",
            flush=True,
        )
    summary = summarize(config, examples, answers)
    write_jsonl_atomically(run_dir / SAMPLES, sample_rows(config, examples, answers))
    write_json_atomically(run_dir / SUMMARY, summary)
    for comparison in summary["comparisons"]:
        print(f"[thinker] eval: {comparison['verdict']}", flush=True)
    final = {f"score_mean/{m['name']}": m["score_mean"] for m in summary["models"]}
    return RunResult(steps=len(config.models), final_metrics=_finite(final))


class AgainstReference:
    """A pairwise judge as a scorer: each answer's P(it beats the row's reference answer), an
    empty answer 0 (the judge's rule: it never saw one)."""

    def __init__(self, judge: JudgeReward) -> None:
        self.judge = judge

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        assert problem.answer is not None, "checked before any model answered"
        asked = [(problem.messages, c.text, problem.answer) for c in completions]
        return [p for p, _ in self.judge.compare(asked)]


async def _reward_model(service: ServiceClient, config: EvalConfig) -> RewardFn:
    """The scorer's reward model, on a sampling client of its weights."""
    scorer = config.scorer
    assert scorer.reward_model is not None  # the config checks it
    weights = EvalModel(model=scorer.reward_model, base_model=scorer.reward_model_base)
    if not names_weights(weights.model, config.backend):
        raise ConfigError(
            f"scorer.reward_model: {weights.model!r} names no reward model's weights (a "
            "checkpoint directory or tinker:// path)"
        )
    sampler, renderer = await _scoring_model(service, config, weights, "reward_model")
    if scorer.head == "bradley_terry":
        return BradleyTerryReward(sampler, renderer, scorer.max_length)
    return AgainstReference(JudgeReward(sampler, renderer, scorer.max_length))


async def _llm_judge(service: ServiceClient, config: EvalConfig) -> ModelJudge:
    """The scorer's judge: an endpoint's model, or a model this run's engine serves."""
    scorer = config.scorer
    assert scorer.judge_model is not None  # the config checks it
    if scorer.judge_url is not None:
        return ModelJudge(endpoint_judge(scorer.judge_url, scorer.judge_model), scorer.rubric)
    judge = EvalModel(model=scorer.judge_model, base_model=scorer.judge_base)
    sampler, renderer = await _scoring_model(service, config, judge, "judge_model")
    return ModelJudge(served_judge(sampler, renderer), scorer.rubric)


async def _scoring_model(
    service: ServiceClient, config: EvalConfig, model: EvalModel, field: str
) -> tuple[SamplingClient, Renderer]:
    """A sampling client of the scorer's own model (`scorer.<field>`) and the renderer of its
    base model."""
    base_field = {"reward_model": "reward_model_base", "judge_model": "judge_base"}[field]
    try:
        base = _base_model(model)
    except ConfigError:
        raise ConfigError(
            f"scorer.{field}: give `{base_field}` for {model.model}: its base model is not "
            "recorded beside it"
        ) from None
    sampler = await _sampling_client(service, model, config.backend)
    return sampler, renderer_for(None, base, sampler.get_tokenizer())


async def _sampling_client(
    service: ServiceClient, model: EvalModel, backend: str
) -> SamplingClient:
    if names_weights(model.model, backend):
        return await service.create_sampling_client(model_path=model.model)
    return await service.create_sampling_client(base_model=model.model)


def names_weights(model: str, backend: str = "local") -> bool:
    """Whether `model` names sampler weights (tinker://, or a checkpoint directory here)."""
    if checkpoints.is_path(model):
        return True
    return backend == "local" and (Path(model) / checkpoints.STATE_FILE).is_file()


def _base_model(model: EvalModel) -> str:
    """The base model whose default renderer `model` answers with."""
    if model.base_model is not None:
        return model.base_model
    if not names_weights(model.model):
        return model.model  # a base model itself
    if Path(model.model).is_dir():
        base = checkpoints.read_meta(Path(model.model)).get("base_model")
        if isinstance(base, str):
            return base
    raise ConfigError(
        f"models: {model.label}: give `base_model` for sampler weights whose base model is not "
        "recorded beside them"
    )


# ---- figures --------------------------------------------------------------------------------
def model_figures(records: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    """One model's mean score (with its bootstrap interval) and token-weighted NLL."""
    scores = [r["score"] for r in records if r["score"] is not None]
    weight = sum(r["nll_tokens"] for r in records if r["nll"] is not None)
    nll = sum(r["nll"] * r["nll_tokens"] for r in records if r["nll"] is not None)
    finished = [t for r in records for t in r.get("terminated", [])]
    return {
        "score_mean": statistics.fmean(scores) if scores else math.nan,
        "score_interval": list(
            significance.bootstrap_interval(scores, resamples=config.resamples, seed=config.seed)
        )
        if scores
        else None,
        "nll_mean": nll / weight if weight > 0 else math.nan,
        "prompts": len(records),
        "terminated_rate": statistics.fmean(finished) if finished else None,
    }


def summarize(
    config: EvalConfig, examples: list[Example], answers: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """evaluation.json: each model's figures, each pair's comparison, the leaderboard."""
    labels = [m.label for m in config.models]
    models = [
        {"name": label, "model": m.model, "id": m.id, **model_figures(records, config)}
        for label, m, records in zip(labels, config.models, answers, strict=True)
    ]
    comparisons = []
    pairings = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            outcomes = [
                significance.outcome(a["score"], b["score"])
                for a, b in zip(answers[i], answers[j], strict=True)
            ]
            result = significance.compare(
                outcomes,
                labels[i],
                labels[j],
                alpha=config.alpha,
                resamples=config.resamples,
                seed=config.seed,
            )
            comparisons.append(result.to_json())
            pairings.append(
                significance.Pairing(labels[i], labels[j], result.losses, result.wins, result.ties)
            )
    leaderboard = (
        [rating.__dict__ for rating in significance.bradley_terry(pairings)] if pairings else []
    )
    summary: dict[str, Any] = _finite(
        {
            "dataset": str(config.dataset),
            "prompts": len(examples),
            "scorer": config.scorer.type,
            "samples": config.samples,
            "temperature": config.temperature,
            "alpha": config.alpha,
            "models": models,
            "comparisons": comparisons,
            "leaderboard": leaderboard,
        }
    )
    return summary


def sample_rows(
    config: EvalConfig, examples: list[Example], answers: list[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """samples.jsonl: per prompt, its text, reference and each model's answers and score."""
    rows = []
    for n, example in enumerate(examples):
        per_model = [
            {"model": m.label, **{k: v for k, v in records[n].items() if k != "index"}}
            for m, records in zip(config.models, answers, strict=True)
        ]
        scores = {r["score"] for r in per_model}
        rows.append(
            _finite(
                {
                    "index": example.index,
                    "prompt": _prompt_text(example.problem.messages),
                    "reference": example.reference,
                    "answers": per_model,
                    "disagree": len(scores) > 1,
                }
            )
        )
    return rows


def _prompt_text(messages: list[Message]) -> str:
    """The last user message (the question), else the last message."""
    for message in reversed(messages):
        if message["role"] == "user":
            return message["content"]
    return messages[-1]["content"] if messages else ""


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as None (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
