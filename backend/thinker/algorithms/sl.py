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

import random
import time
from typing import Any

from tinker import types

from thinker.algorithms.common import (
    RunResult,
    adam_params,
    is_due,
    log_plan,
    lr_multiplier,
    optimizer_metrics,
    plan_batch,
    prepare_run,
    save_checkpoint,
    start_or_resume,
    stop_if_diverged,
    weighted_sum,
)
from thinker.algorithms.sl_config import SLConfig
from thinker.data import load_conversations, split_train_eval
from thinker.engine import EngineFuture, ServiceClient
from thinker.renderers import datum_from_tokens_weights, renderer_for
from thinker.runs import MetricsLogger

__all__ = ["SLConfig", "SLResult", "lr_multiplier", "main"]

SLResult = RunResult
# (step, batch, forward_backward futures of its passes, optim_step future, lr, submit time)
_Pending = tuple[int, list[types.Datum], list[Any], Any, float, float]


async def main(
    config: SLConfig, service: ServiceClient | None = None, logger: MetricsLogger | None = None
) -> SLResult:
    run_dir, service, logger = prepare_run(config, service, logger)

    # Set up: the client (fresh, from `init_from`, or resumed) and the rendered data.
    start = await start_or_resume(config, service, run_dir, logger)
    client = start.client
    train_data, eval_data = _datasets(config, client.get_tokenizer())
    lengths = [d.model_input.length for d in train_data]
    plan = plan_batch(
        client,
        lengths,
        config.batch_size,
        config.micro_batch_size,
        resumed_micro_batch_size=start.micro_batch_size,
    )
    steps_per_epoch = max(1, len(train_data) // plan.batch_size)
    total_steps = config.max_steps or config.num_epochs * steps_per_epoch
    log_plan(logger, plan, total_steps, start.step)

    # Loop: submit step s, then wait for step s-1 (one step in flight).
    pending: _Pending | None = None
    metrics: dict[str, float] = {}
    result = start.result
    for step in range(start.step, total_steps):
        batch = _batch(train_data, step, steps_per_epoch, plan.batch_size, config.seed)
        adam = adam_params(config, step, total_steps)
        fbs = [client.forward_backward(part, "cross_entropy") for part in plan.passes(batch)]
        opt = client.optim_step(adam)
        if pending is not None:
            metrics = await _finish_step(pending, logger, config)
        pending = (step, batch, fbs, opt, adam.learning_rate, time.monotonic())
        done = step + 1
        if is_due(done, config.eval_every, total_steps):
            eval_nll = await _eval_nll(client, eval_data, plan.micro_batch_size)
            metrics = await _finish_step(pending, logger, config, eval_nll=eval_nll)
            pending = None
        if is_due(done, config.save_every, total_steps):
            if pending is not None:
                metrics = await _finish_step(pending, logger, config)
                pending = None
            result = await save_checkpoint(
                client, run_dir, done, logger, micro_batch_size=plan.micro_batch_size
            )
    if pending is not None:
        metrics = await _finish_step(pending, logger, config)
    result.steps = total_steps
    result.final_metrics = metrics
    return result


def _datasets(config: SLConfig, tokenizer: Any) -> tuple[list[types.Datum], list[types.Datum]]:
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    conversations = load_conversations(config.dataset)
    if config.eval_dataset is not None:
        train, held_out = conversations, load_conversations(config.eval_dataset)
    else:
        train, held_out = split_train_eval(conversations, config.eval_fraction, config.seed)

    def render(messages: list[Any]) -> types.Datum:
        tokens, weights = renderer.build_supervised_example(messages, config.train_on_what)
        return datum_from_tokens_weights(tokens, weights, config.max_length)

    return [render(m) for m in train], [render(m) for m in held_out]


def _batch(
    data: list[types.Datum], step: int, steps_per_epoch: int, batch_size: int, seed: int
) -> list[types.Datum]:
    """The examples of `step`: a fixed shuffle per epoch, so a resumed run sees the same ones."""
    epoch, index = divmod(step, steps_per_epoch)
    order = list(range(len(data)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return [data[i] for i in order[index * batch_size : (index + 1) * batch_size]]


def _trained_tokens(batch: list[types.Datum]) -> float:
    return sum(weighted_sum(d) for d in batch)


async def _finish_step(
    pending: _Pending,
    logger: MetricsLogger,
    config: SLConfig,
    eval_nll: float | None = None,
) -> dict[str, float]:
    step, batch, fbs, opt, lr, started = pending
    loss_sum = sum([(await fb).metrics["loss:sum"] for fb in fbs])
    opt_out = await opt
    n_tokens = _trained_tokens(batch)
    metrics = {
        "train_mean_nll": loss_sum / max(n_tokens, 1.0),
        "learning_rate": lr,
        "num_tokens": n_tokens,
        "num_sequences": float(len(batch)),
        "step_time_s": time.monotonic() - started,
    }
    metrics |= optimizer_metrics(opt_out)
    if eval_nll is not None:
        metrics["eval_mean_nll"] = eval_nll
    logger.log_metrics(metrics, step=step + 1)
    stop_if_diverged(metrics, step + 1, "train_mean_nll", config)
    return metrics


async def _eval_nll(client: Any, data: list[types.Datum], batch_size: int) -> float:
    """Mean NLL per trained token of the held-out examples, under the current weights."""
    if not data:
        return float("nan")
    futures: list[EngineFuture[Any]] = [
        client.forward(data[i : i + batch_size], "cross_entropy")
        for i in range(0, len(data), batch_size)
    ]
    total = sum([(await f).metrics["loss:sum"] for f in futures])
    return total / max(_trained_tokens(data), 1.0)
