"""Supervised learning: LoRA fine-tuning by next-token cross-entropy on chat examples.

What it computes: each example is rendered to tokens with per-token weights (1 on the
tokens `train_on_what` selects, 0 elsewhere); each step runs `forward_backward` with the
`cross_entropy` loss, -sum(w * log p), over one batch and then one AdamW `optim_step`
whose learning rate follows the schedule. `train_mean_nll` is that sum divided by the
number of trained tokens. The loop is pipelined: step s+1 is submitted before step s's
results are awaited. Checkpoints go to an append-only `checkpoints.jsonl`; a run started
again in the same directory resumes from its last line and, on the CPU, ends with the same
weights bit for bit as a run that was never interrupted.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from tinker import types

from thinker.algorithms.sl_config import SLConfig
from thinker.data import load_conversations, split_train_eval
from thinker.engine import EngineFuture, ServiceClient
from thinker.renderers import datum_from_tokens_weights, default_renderer_name, get_renderer
from thinker.runs import CHECKPOINTS_FILE, MetricsLogger, RunLogger, append_jsonl, read_jsonl

__all__ = ["SLConfig", "SLResult", "lr_multiplier", "main"]


# (step, batch, forward_backward future, optim_step future, learning rate, submit time)
_Pending = tuple[int, list[types.Datum], Any, Any, float, float]


@dataclass
class SLResult:
    steps: int
    final_metrics: dict[str, float] = field(default_factory=dict)
    state_path: str | None = None
    sampler_path: str | None = None


def lr_multiplier(step: int, total_steps: int, schedule: str, warmup_steps: int = 0) -> float:
    """Factor on the base learning rate at `step` (0-based): linear warmup, then the schedule."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown lr_schedule {schedule!r}")


async def main(
    config: SLConfig, service: ServiceClient | None = None, logger: MetricsLogger | None = None
) -> SLResult:
    run_dir = Path(config.log_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
    logger = logger or RunLogger(run_dir, echo=True)
    service = service or _service(config, run_dir)

    # Set up: the client (fresh, or resumed from the last checkpoint) and the rendered data.
    resume = (read_jsonl(run_dir / CHECKPOINTS_FILE) or [None])[-1]
    if resume is not None:
        client = await service.create_training_client_from_state_with_optimizer(
            resume["state_path"]
        )
        logger.log_event("resumed", {"step": resume["step"], "state_path": resume["state_path"]})
    else:
        client = await service.create_lora_training_client(
            config.base_model, rank=config.lora_rank, seed=config.seed
        )
    train_data, eval_data = _datasets(config, client.get_tokenizer())
    steps_per_epoch = max(1, len(train_data) // config.batch_size)
    total_steps = config.max_steps or config.num_epochs * steps_per_epoch
    start_step = resume["step"] if resume is not None else 0

    # Loop: submit step s, then wait for step s-1 (one step in flight).
    pending: _Pending | None = None
    metrics: dict[str, float] = {}
    result = SLResult(steps=start_step)
    if resume is not None:  # a finished run started again returns its last checkpoint
        result = SLResult(start_step, {}, resume["state_path"], resume["sampler_path"])
    for step in range(start_step, total_steps):
        batch = _batch(train_data, step, steps_per_epoch, config.batch_size, config.seed)
        lr = config.learning_rate * lr_multiplier(
            step, total_steps, config.lr_schedule, config.warmup_steps
        )
        fb = client.forward_backward(batch, "cross_entropy")
        opt = client.optim_step(_adam(config, lr))
        if pending is not None:
            metrics = await _finish_step(pending, logger)
        pending = (step, batch, fb, opt, lr, time.monotonic())
        done = step + 1
        if done == total_steps or (config.eval_every and done % config.eval_every == 0):
            metrics = await _finish_step(
                pending, logger, eval_nll=await _eval_nll(client, eval_data, config.batch_size)
            )
            pending = None
        if done == total_steps or (config.save_every and done % config.save_every == 0):
            if pending is not None:
                metrics = await _finish_step(pending, logger)
                pending = None
            result = await _checkpoint(client, run_dir, done, logger)
    if pending is not None:
        metrics = await _finish_step(pending, logger)
    result.steps = total_steps
    result.final_metrics = metrics
    return result


def _service(config: SLConfig, run_dir: Path) -> ServiceClient:
    if config.backend == "tinker":
        return ServiceClient("tinker")
    return ServiceClient("local", storage_dir=run_dir, quantization=config.quantization)


def _datasets(config: SLConfig, tokenizer: Any) -> tuple[list[types.Datum], list[types.Datum]]:
    renderer = get_renderer(
        config.renderer or default_renderer_name(config.base_model, tokenizer), tokenizer
    )
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


def _adam(config: SLConfig, lr: float) -> types.AdamParams:
    return types.AdamParams(
        learning_rate=lr,
        beta1=config.beta1,
        beta2=config.beta2,
        eps=config.eps,
        weight_decay=config.weight_decay,
        grad_clip_norm=config.grad_clip_norm,
    )


def _trained_tokens(batch: list[types.Datum]) -> float:
    return float(sum(d.loss_fn_inputs["weights"].to_torch().sum() for d in batch))


async def _finish_step(
    pending: _Pending,
    logger: MetricsLogger,
    eval_nll: float | None = None,
) -> dict[str, float]:
    step, batch, fb, opt, lr, started = pending
    fb_out, opt_out = await fb, await opt
    n_tokens = _trained_tokens(batch)
    metrics = {
        "train_mean_nll": fb_out.metrics["loss:sum"] / max(n_tokens, 1.0),
        "learning_rate": lr,
        "num_tokens": n_tokens,
        "num_sequences": float(len(batch)),
        "step_time_s": time.monotonic() - started,
    }
    if opt_out.metrics and "grad_norm" in opt_out.metrics:
        metrics["grad_norm"] = opt_out.metrics["grad_norm"]
    if eval_nll is not None:
        metrics["eval_mean_nll"] = eval_nll
    logger.log_metrics(metrics, step=step + 1)
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


async def _checkpoint(client: Any, run_dir: Path, step: int, logger: MetricsLogger) -> SLResult:
    name = f"{step:06d}"
    state, sampler = client.save_state(name), client.save_weights_for_sampler(name)
    state_path, sampler_path = (await state).path, (await sampler).path
    record = {
        "name": name,
        "step": step,
        "state_path": state_path,
        "sampler_path": sampler_path,
        "time": time.time(),
    }
    append_jsonl(run_dir / CHECKPOINTS_FILE, record)
    logger.log_event("checkpoint", record)
    return SLResult(steps=step, state_path=state_path, sampler_path=sampler_path)
