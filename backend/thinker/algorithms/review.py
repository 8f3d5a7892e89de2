"""A reward model that asks: which preference pairs its checkpoints are least sure of.

A committee of the reward model's own checkpoints (the last few its job saved; the last is the
model under review) scores every pair of a preference dataset: p_k = P(the dataset's chosen
answer beats its rejected one) by checkpoint k. Query by committee, in one number:

- `uncertainty` is the binary entropy, in bits, of the committee's mean p. It is 1 when the
  mean is 1/2, whether every checkpoint says 1/2 (the model cannot tell the answers apart) or
  half say 0.9 and half 0.1 (its checkpoints disagree), and near 0 when they all agree and are
  sure. The queue is the `queue_size` pairs of highest uncertainty.
- `disagreement` (the standard deviation of the p_k) is shown beside it: which of those two
  reasons a pair is in the queue for.

The pairs are shown to a person blind: a seeded coin per pair puts the chosen answer first (A)
or second (B), and `label` says which the dataset chose. The person's answers become preference
rows of a new dataset version (services/reviews.py) to retrain the reward model on.

The last checkpoint's calibration on the labelled pairs (`significance.calibration`: its
confidence against how often the dataset agrees with it, in five bins) goes in the summary, the
reliability table of the reward model's page. On pairs the reward model trained on it says how
well it fits them, not how well it generalises: review a held-out set for that.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path
from typing import Any

from thinker.algorithms import significance
from thinker.algorithms.bradley_terry import BradleyTerryReward
from thinker.algorithms.common import RunResult
from thinker.algorithms.evaluation import names_weights
from thinker.algorithms.review_config import ReviewConfig
from thinker.algorithms.reward_model import JudgeReward, response_text
from thinker.data.preferences import PreferencePair, load_preference_pairs
from thinker.engine import ServiceClient
from thinker.engine.local import checkpoints
from thinker.errors import ConfigError, DatasetError
from thinker.files import write_json_atomically, write_jsonl_atomically
from thinker.renderers import renderer_for
from thinker.runs import MetricsLogger, RunLogger

PAIRS = "review.jsonl"  # every scored pair, least certain first
SUMMARY = "review_summary.json"
DEFAULT_MAX_LENGTH = 1024


def binary_entropy(p: float) -> float:
    """H(p) in bits: 1 at p = 1/2, 0 at 0 and 1."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def certainty(probabilities: list[float]) -> dict[str, float]:
    """The committee's mean P(first beats second), its uncertainty (the mean's binary entropy)
    and its disagreement (the standard deviation of the members' probabilities; 0 for one)."""
    mean = statistics.fmean(probabilities)
    spread = statistics.pstdev(probabilities) if len(probabilities) > 1 else 0.0
    return {"p_mean": mean, "uncertainty": binary_entropy(mean), "disagreement": spread}


def rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Least certain first: by uncertainty, then disagreement, then the dataset's order."""
    return sorted(rows, key=lambda r: (-r["uncertainty"], -r["disagreement"], r["index"]))


def pair_rows(
    pairs: list[PreferencePair], scores: list[list[float]], seed: int, lines: list[int]
) -> list[dict[str, Any]]:
    """A row per pair, shown in a seeded order: `scores[k][i]` is checkpoint k's P(chosen beats
    rejected) for pair i, read from line `lines[i]` of the dataset; the row's `p_a` are P(A
    beats B), A being the answer shown first."""
    coin = random.Random(seed)
    rows = []
    for i, pair in enumerate(pairs):
        chosen, rejected = (
            response_text(pair.chosen_messages),
            response_text(pair.rejected_messages),
        )
        chosen_first = coin.random() < 0.5
        p_chosen = [member[i] for member in scores]
        p_a = p_chosen if chosen_first else [1.0 - p for p in p_chosen]
        rows.append(
            {
                "index": i,
                "line": lines[i],
                "prompt": pair.prompt_messages,
                "a": chosen if chosen_first else rejected,
                "b": rejected if chosen_first else chosen,
                "label": "a" if chosen_first else "b",  # the dataset's chosen answer
                "p_a": p_a,
                **certainty(p_a),
                "current_agrees": p_chosen[-1] > 0.5,  # the model under review and the label
            }
        )
    return rows


def summarize(config: ReviewConfig, scores: list[list[float]]) -> dict[str, Any]:
    """The queue's size, the committee's agreement and the current checkpoint's calibration."""
    current = scores[-1]
    n = len(current)
    together = [sum((member[i] > 0.5) == (current[i] > 0.5) for member in scores) for i in range(n)]
    return {
        "pairs": n,
        "committee": len(scores),
        "queue_size": min(config.queue_size, n),
        "unanimous": sum(t == len(scores) for t in together) / n,
        "calibration": significance.calibration(current),
        "checkpoints": [
            {"weights": weights, "accuracy": sum(p > 0.5 for p in member) / n}
            for weights, member in zip(config.reward_models, scores, strict=True)
        ],
    }


def row_lines(path: Path) -> list[int]:
    """The numbers (from 1) of the file's lines that hold a row: its lines less blank ones, as
    load_preference_pairs reads them."""
    with open(path, "rb") as f:
        return [n for n, line in enumerate(f, start=1) if line.strip()]


async def main(
    config: ReviewConfig, logger: MetricsLogger | None = None, service: ServiceClient | None = None
) -> RunResult:
    """Score every pair with every checkpoint of the committee; write the ranked pairs."""
    run_dir = Path(config.log_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    logger = logger or RunLogger(run_dir)
    pairs = load_preference_pairs(config.dataset, config.max_pairs)
    if not pairs:
        raise DatasetError(f"{config.dataset}: no preference pairs to review")
    service = service or ServiceClient(backend=config.backend, storage_dir=run_dir / "engine")
    comparisons = [
        (p.prompt_messages, response_text(p.chosen_messages), response_text(p.rejected_messages))
        for p in pairs
    ]
    logger.log_event("plan", {"total_steps": len(config.reward_models), "start_step": 0})
    print(
        f"[thinker] review: {len(pairs)} pairs, a committee of {len(config.reward_models)} "
        "checkpoint(s)",
        flush=True,
    )
    scores: list[list[float]] = []
    for step, weights in enumerate(config.reward_models, start=1):
        judge = await _judge(service, config, weights)
        scores.append([p for p, _ in await judge.compare_async(comparisons)])
        accuracy = sum(p > 0.5 for p in scores[-1]) / len(pairs)
        logger.log_metrics({"review_accuracy": accuracy}, step=step)
        print(f"[thinker] review: checkpoint {step} agrees with {accuracy:.0%} of the labels")
    rows = rank(pair_rows(pairs, scores, config.seed, row_lines(config.dataset)))
    summary = summarize(config, scores)
    write_jsonl_atomically(run_dir / PAIRS, rows)
    write_json_atomically(run_dir / SUMMARY, summary)
    queue = rows[: summary["queue_size"]]
    print(
        f"[thinker] review: {len(queue)} pairs queued (uncertainty {queue[-1]['uncertainty']:.2f}"
        f" to {queue[0]['uncertainty']:.2f} bits); calibration error "
        f"{summary['calibration']['ece']:.3f}",
        flush=True,
    )
    return RunResult(
        steps=len(config.reward_models),
        final_metrics={
            "review_accuracy": summary["checkpoints"][-1]["accuracy"],
            "review_ece": summary["calibration"]["ece"],
            "review_unanimous": summary["unanimous"],
        },
    )


async def _judge(
    service: ServiceClient, config: ReviewConfig, weights: str
) -> JudgeReward | BradleyTerryReward:
    """The pairwise judge of one checkpoint of the committee."""
    if not names_weights(weights, config.backend):
        raise ConfigError(
            f"reward_models: {weights!r} names no reward model's weights (a checkpoint "
            "directory or tinker:// path)"
        )
    base = config.base_model
    if base is None and Path(weights).is_dir():
        recorded = checkpoints.read_meta(Path(weights)).get("base_model")
        base = recorded if isinstance(recorded, str) else None
    if base is None:
        raise ConfigError(
            f"reward_models: give `base_model` for {weights}: its base model is not "
            "recorded beside it"
        )
    sampler = await service.create_sampling_client(model_path=weights)
    renderer = renderer_for(None, base, sampler.get_tokenizer())
    length = config.max_length or DEFAULT_MAX_LENGTH
    if config.head == "bradley_terry":
        return BradleyTerryReward(sampler, renderer, length)
    return JudgeReward(sampler, renderer, length)
