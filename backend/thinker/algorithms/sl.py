"""Supervised learning: LoRA fine-tuning by next-token cross-entropy on chat examples.

What it computes: each example is rendered to tokens with per-token weights (1 on the
tokens `train_on_what` selects, 0 elsewhere); each step runs `forward_backward` with the
`cross_entropy` loss, -sum(w * log p), over one batch of `batch_size` examples and then one
AdamW `optim_step` whose learning rate follows the schedule. The batch goes through in
passes of `micro_batch_size` examples (as many as fit in free memory unless set; see
`plan_batch`) whose gradients add up before the step: the loss is a sum, so that equals one
pass over the whole batch. `train_mean_nll` is the step's sum divided by its number of
trained tokens. The loop is pipelined: step s+1 is submitted before step s's results are
awaited. Checkpoints go to an append-only `checkpoints.jsonl`; a run started again in the same
directory resumes from its last line and, on the CPU, ends with the same weights bit for bit
as a run that was never interrupted.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from tinker import types

from thinker.algorithms.common import (
    RunResult,
    StartupClock,
    Step,
    SupervisedLoop,
    log_step,
    lr_multiplier,
    prepare_run,
    start_or_resume,
    weighted_sum,
)
from thinker.algorithms.sl_config import SLConfig
from thinker.data import load_conversations, split_train_eval
from thinker.engine import ServiceClient
from thinker.engine.protocols import APIFuture, TrainingClient
from thinker.renderers import Message, datum_from_tokens_weights, renderer_for
from thinker.runs import MetricsLogger

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["SLConfig", "SLResult", "lr_multiplier", "main"]

SLResult = RunResult


async def main(
    config: SLConfig, service: ServiceClient | None = None, logger: MetricsLogger | None = None
) -> SLResult:
    startup = StartupClock()
    run, service, logger = prepare_run(config, service, logger)

    # Set up: the client (fresh, from `init_from`, or resumed) and the rendered data.
    start = await start_or_resume(config, service, run, logger)
    client = start.client
    startup.mark("model")
    train_data, eval_data = _datasets(config, client.get_tokenizer())
    startup.mark("data", f"{len(train_data) + len(eval_data):,} examples rendered")
    lengths = [d.model_input.length for d in train_data]
    loop = SupervisedLoop.planned(config, run, start, logger, train_data, lengths)
    eval_data = _eval_subset(eval_data, lengths, config, loop.total_steps)
    return await loop.run(
        partial(_forward_backward, client),
        partial(_finish, logger=logger, config=config),
        partial(_evaluate, client, eval_data, loop.plan.micro_batch_size),
        evaluate_at_start=False,
        loss_units=_trained_tokens,
        startup=startup,
    )


def _datasets(
    config: SLConfig, tokenizer: PreTrainedTokenizerBase
) -> tuple[list[types.Datum], list[types.Datum]]:
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    conversations = load_conversations(config.dataset)
    if config.eval_dataset is not None:
        train, held_out = conversations, load_conversations(config.eval_dataset)
    else:
        train, held_out = split_train_eval(conversations, config.eval_fraction, config.seed)

    def render(messages: list[Message]) -> types.Datum:
        tokens, weights = renderer.build_supervised_example(messages, config.train_on_what)
        return datum_from_tokens_weights(tokens, weights, config.max_length)

    return [render(m) for m in train], [render(m) for m in held_out]


# Held-out tokens scored over a run, as a share of the tokens trained. On an H100 a held-out
# token cost 0.8 of a trained one (Qwen3-0.6B shape, a default job: evaluation waits for the
# step in flight and is not pipelined), so a tenth keeps evaluation under a tenth of the
# training time whatever eval_every is (docs/benchmarks.md).
EVAL_TOKEN_SHARE = 0.1


def _eval_subset(
    held_out: list[types.Datum], lengths: list[int], config: SLConfig, total_steps: int
) -> list[types.Datum]:
    """The held-out examples every evaluation scores: `eval_examples` of them if set, else
    as many as keep all of a run's evaluations within EVAL_TOKEN_SHARE of its training
    tokens (the whole held-out set when that allows). Always the same ones (the split is
    shuffled already), so the curve compares like with like, and a resumed run picks them
    again."""
    if not held_out:
        return held_out
    if config.eval_examples is not None:
        return held_out[: config.eval_examples]
    every = config.eval_every
    evaluations = total_steps // every + (total_steps % every > 0) if every > 0 else 1
    mean_train = sum(lengths) / max(1, len(lengths))
    mean_eval = sum(d.model_input.length for d in held_out) / len(held_out)
    trained = total_steps * config.batch_size * mean_train
    count = max(1, int(EVAL_TOKEN_SHARE * trained / evaluations / mean_eval))
    if count < len(held_out):
        print(
            f"[thinker] held-out evaluation: {count} of the {len(held_out)} held-out examples "
            f"each time, so that {evaluations} evaluation(s) score about a tenth as many tokens "
            "as training does (set eval_examples to choose)",
            flush=True,
        )
    return held_out[:count]


def _trained_tokens(batch: list[types.Datum]) -> float:
    return sum(weighted_sum(d) for d in batch)


def _forward_backward(
    client: TrainingClient, examples: list[types.Datum], share: float
) -> APIFuture[types.ForwardBackwardOutput]:
    """Submit one pass: the cross-entropy of `examples`, a sum, so the passes add up as they
    are, whatever their `share` of the step."""
    return client.forward_backward(examples, "cross_entropy")


async def _finish(
    step: Step[types.Datum], evals: dict[str, float], logger: MetricsLogger, config: SLConfig
) -> dict[str, float]:
    loss_sum = sum(output.metrics["loss:sum"] for output, _ in await step.outputs())
    n_tokens = _trained_tokens(step.batch)
    metrics = {
        "train_mean_nll": loss_sum / max(n_tokens, 1.0),
        "num_tokens": n_tokens,
        "num_sequences": float(len(step.batch)),
    }
    return await log_step(step, metrics, evals, logger, config, "train_mean_nll")


async def _evaluate(
    client: TrainingClient, data: list[types.Datum], batch_size: int
) -> dict[str, float]:
    return {"eval_mean_nll": await _eval_nll(client, data, batch_size)}


async def _eval_nll(client: TrainingClient, data: list[types.Datum], batch_size: int) -> float:
    """Mean NLL per trained token of the held-out examples, under the current weights."""
    if not data:
        return float("nan")
    futures = [
        client.forward(data[i : i + batch_size], "cross_entropy")
        for i in range(0, len(data), batch_size)
    ]
    total = sum([(await f).metrics["loss:sum"] for f in futures])
    return total / max(_trained_tokens(data), 1.0)
