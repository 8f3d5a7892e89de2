"""What every training loop shares: run-directory set-up, start or resume, the batch plan,
the steps kept in flight, schedule, checkpoints.

The loops themselves (sl.py, dpo.py, reward_model.py, bradley_terry.py, rl.py) read top to
bottom; they call these few helpers for the parts that must behave identically in all of them,
and the four supervised ones share one loop, `SupervisedLoop`.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from tinker import types

from thinker.algorithms.dpo_config import DPOConfig
from thinker.algorithms.loop_config import LoopConfig
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.engine import ServiceClient
from thinker.engine.protocols import APIFuture, MemoryBudget, TrainingClient
from thinker.errors import DivergedError
from thinker.files import records_here
from thinker.runs import CheckpointRecord, MetricsLogger, RunDir, RunLogger

T = TypeVar("T")
# The configs of the supervised loops: LoopConfig's fields, and batch_size, micro_batch_size,
# num_epochs and max_steps (None: num_epochs epochs).
SupervisedConfig = SLConfig | DPOConfig | RewardModelConfig


@dataclass
class RunResult:
    """How a run ended: steps done, the last metrics, the last checkpoint's paths."""

    steps: int
    final_metrics: dict[str, float] = field(default_factory=dict)
    state_path: str | None = None
    sampler_path: str | None = None

    def finished(self, steps: int, final_metrics: dict[str, float]) -> RunResult:
        """The result of a run that ended after `steps` with `final_metrics` logged last."""
        self.steps, self.final_metrics = steps, final_metrics
        return self


@dataclass
class Start:
    """A training client ready to go, and where it starts."""

    client: TrainingClient
    step: int  # optimizer steps already done (0 unless resumed)
    result: RunResult  # what to return if no step is left to run
    micro_batch_size: int | None = None  # resumed: the split its checkpoint recorded


def prepare_run(
    config: LoopConfig, service: ServiceClient | None, logger: MetricsLogger | None
) -> tuple[RunDir, ServiceClient, MetricsLogger]:
    """Create the run directory, write config.yaml, and default the service and logger."""
    run = RunDir(config.log_path)
    run.path.mkdir(parents=True, exist_ok=True)
    if records_here():  # rank 0 of a data-parallel worker, or the only process
        run.config.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    return (
        run,
        service or make_service(config, run.path),
        logger or RunLogger(run.path, echo=True),
    )


def make_service(config: LoopConfig, run_dir: Path) -> ServiceClient:
    if config.backend == "tinker":
        return ServiceClient(backend="tinker")
    return ServiceClient(backend="local", storage_dir=run_dir, quantization=config.quantization)


async def start_or_resume(
    config: LoopConfig, service: ServiceClient, run: RunDir, logger: MetricsLogger
) -> Start:
    """Resume from the last line of checkpoints.jsonl; else start from `init_from` or fresh.

    Either way, metrics an earlier attempt logged after the point this one starts from are
    superseded (the steps are trained again; see `RunLogger.rewind`), and the log says so."""
    last = run.last_checkpoint()
    step = last.step if last is not None else 0
    rewind: Callable[[int, str | None], int] | None = getattr(logger, "rewind", None)
    dropped = rewind(step, getattr(logger, "stage", None)) if rewind is not None else 0
    if dropped:
        where = f"the checkpoint at step {step}" if last else "step 0 (no checkpoint was saved)"
        print(
            f"[thinker] resuming from {where}: {dropped} metrics row(s) of the earlier attempt "
            "after it are superseded (kept in metrics.jsonl, left out of the curves) and those "
            "steps train again (save_every sets how often checkpoints are written)",
            flush=True,
        )
    if last is not None and last.state_path is not None:  # last_checkpoint's always has one
        path = last.state_path
        client = await service.create_training_client_from_state_with_optimizer(path)
        logger.log_event("resumed", {"step": step, "state_path": path})
        done = RunResult(step, {}, path, last.sampler_path)
        return Start(client, step, done, last.micro_batch_size)
    if config.init_from is not None:
        client = await service.create_training_client_from_state(config.init_from)
        logger.log_event("initialised", {"from": config.init_from})
    else:
        client = await service.create_lora_training_client(
            config.base_model, rank=config.lora_rank, seed=config.seed
        )
    return Start(client, 0, RunResult(0))


@dataclass(frozen=True)
class BatchPlan:
    """How each optimizer step's examples are split into forward_backward passes."""

    batch_size: int  # examples (or pairs) per optimizer step
    micro_batch_size: int  # examples (or pairs) per forward_backward pass
    grad_accumulation: int  # passes per step: ceil(batch_size / micro_batch_size)
    explanation: str  # the figures behind the choice, for the job log

    def passes(self, batch: Sequence[T]) -> list[list[T]]:
        """A step's examples in passes of `micro_batch_size`; the last may be smaller."""
        size = self.micro_batch_size
        return [list(batch[i : i + size]) for i in range(0, len(batch), size)]


def pair_tokens(first: types.Datum, second: types.Datum) -> int:
    """Tokens a pair of sequences takes in a pass: both, each padded to the longer."""
    return 2 * max(first.model_input.length, second.model_input.length)


def plan_batch(
    client: TrainingClient,
    lengths: Sequence[int],
    batch_size: int,
    micro_batch_size: int | None,
    unit: str = "examples",
    resumed_micro_batch_size: int | None = None,
) -> BatchPlan:
    """Choose the examples per optimizer step and per forward_backward pass.

    The rule: `batch_size` is a learning hyperparameter, so it is the config's value (16 by
    default) whatever the device; memory only decides how a step is split. `micro_batch_size`
    is the config's value when set; otherwise, on a client with `memory_budget()` (the local
    engine), as many examples as fit in the budget's tokens if each took as many as the
    longest (a pass is padded to its longest sequence), at least 1, with the gradient
    checkpointing the longest needs (the budget's explanation says which); on a client without it
    (Tinker manages its own memory), the whole step in one pass. A step then takes
    ceil(batch_size / micro_batch_size) passes whose gradients add up before the optimizer
    step: the losses are sums over tokens (or a mean rescaled per pass), so the accumulated
    gradient is the one-pass gradient.

    Args:
        client: The training client.
        lengths: The tokens each training example takes in a pass (for a preference pair,
            both of its sequences, each padded to the longer).
        batch_size: The config's batch_size.
        micro_batch_size: The config's micro_batch_size; None = as many as fit.
        unit: What an example is called in the explanation ("examples", "pairs").
        resumed_micro_batch_size: The split a resumed run's checkpoint recorded. It is
            reused, so that each step sums its gradients in the same passes, in the same
            order, as the run before the interruption (free memory differs from moment to
            moment, and a different split changes the float sums).
    """
    batch = batch_size
    if micro_batch_size is None and resumed_micro_batch_size is not None:
        micro = min(batch, resumed_micro_batch_size)
        resumed = (
            f"micro_batch_size {micro} as the checkpoint recorded (a resumed run splits its "
            f"steps as before); batch_size {batch} -> {math.ceil(batch / micro)} pass(es)"
        )
        return BatchPlan(batch, micro, math.ceil(batch / micro), resumed)
    get_budget: Callable[[int], MemoryBudget] | None = getattr(client, "memory_budget", None)
    longest = max(lengths, default=1)
    budget = get_budget(longest) if get_budget is not None else None
    fits = max(1, budget.tokens // longest) if budget is not None else None
    micro = min(batch, micro_batch_size or fits or batch)
    passes = math.ceil(batch / micro)
    why = [budget.explanation] if budget is not None else ["the backend manages its own memory"]
    if fits is not None:
        why.append(f"the longest of the {unit} takes {longest:,} tokens -> {fits:,} per pass")
    if micro_batch_size is not None:
        why.append(f"micro_batch_size {micro_batch_size} (as set)")
        if fits is not None and micro_batch_size > fits:
            why[-1] += f": WARNING, above the {fits:,} that fit; the pass may run out of memory"
    why.append(f"batch_size {batch} -> {passes} pass(es) of up to {micro} {unit}")
    return BatchPlan(batch, micro, passes, "; ".join(why))


def log_plan(logger: MetricsLogger, plan: BatchPlan, total_steps: int, start_step: int) -> None:
    """Explain the batch plan in the job's log and record the `plan` event.

    The explanation is printed: the worker writes its stdout to the job's worker.log (and a
    `log` event per line), as the CLI shows it on the terminal.
    """
    print(f"[thinker] batch plan: {plan.explanation}", flush=True)
    logger.log_event(
        "plan",
        {
            "total_steps": total_steps,
            "start_step": start_step,
            "batch_size": plan.batch_size,
            "micro_batch_size": plan.micro_batch_size,
            "grad_accumulation": plan.grad_accumulation,
        },
    )


def epoch_batch(
    data: Sequence[T], step: int, steps_per_epoch: int, batch_size: int, seed: int
) -> list[T]:
    """The examples of `step`: a fixed shuffle per epoch, so a resumed run sees the same ones."""
    epoch, index = divmod(step, steps_per_epoch)
    order = list(range(len(data)))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return [data[i] for i in order[index * batch_size : (index + 1) * batch_size]]


@dataclass
class Step(Generic[T]):
    """One optimizer step submitted to the engine, its results not awaited yet."""

    number: int  # the steps done before it: it is logged as step `number + 1`
    batch: list[T]
    # each pass's forward_backward future and its examples
    passes: list[tuple[APIFuture[types.ForwardBackwardOutput], list[T]]]
    optim: APIFuture[types.OptimStepResponse]
    learning_rate: float
    grad_clip_norm: float  # the engine's cap on the gradient's norm (0: none)
    started: float = field(default_factory=time.monotonic)

    async def outputs(self) -> list[tuple[types.ForwardBackwardOutput, int]]:
        """Each pass's output and how many examples it held."""
        return [(await future, len(part)) for future, part in self.passes]


def submit_step(
    client: TrainingClient,
    plan: BatchPlan,
    batch: list[T],
    number: int,
    adam: types.AdamParams,
    forward_backward: SubmitPass[T],
) -> Step[T]:
    """Submit step `number`: `forward_backward` of each pass of `batch` with the pass's share
    of it, then the optimizer step. Nothing is awaited: the engine runs a client's calls in
    submission order."""
    passes = [(forward_backward(part, len(part) / len(batch)), part) for part in plan.passes(batch)]
    optim = client.optim_step(adam)
    return Step(number, batch, passes, optim, adam.learning_rate, adam.grad_clip_norm)


# Submits one pass of a step: its examples, and their share of the step's (a loss that is a
# mean over the step weighs each pass by it; a sum over tokens adds up without it).
SubmitPass = Callable[[list[T], float], APIFuture[types.ForwardBackwardOutput]]
FinishStep = Callable[[Step[T], dict[str, float]], Awaitable[dict[str, float]]]
Evaluate = Callable[[], Awaitable[dict[str, float]]]  # held-out metrics of the current weights


class StartupClock:
    """How long a run's setup phases took, up to its first step, for its log: a first step
    that comes minutes after the start says where the minutes went."""

    def __init__(self) -> None:
        self._began = self._last = time.monotonic()
        self.phases: dict[str, float] = {}  # phase -> seconds, in order
        self._details: dict[str, str] = {}
        self._reported = False

    def mark(self, phase: str, detail: str = "") -> None:
        """`phase` ended now (it began where the previous one ended)."""
        now = time.monotonic()
        self.phases[phase] = now - self._last
        self._details[phase] = detail
        self._last = now

    def first_step_done(self, logger: MetricsLogger) -> None:
        """Log the phases once, when the first step's results are in."""
        if self._reported:
            return
        self._reported = True
        self.mark("first step")
        total = self._last - self._began
        parts = ", ".join(
            f"{phase} {seconds:.1f} s"
            + (f" ({self._details[phase]})" if self._details[phase] else "")
            for phase, seconds in self.phases.items()
        )
        print(
            f"[thinker] first step done {total:.1f} s after the start: {parts}. On a GPU the "
            "first step compiles the model's layers; later jobs on the same model shape read "
            "them from the compile cache.",
            flush=True,
        )
        payload = {phase.replace(" ", "_") + "_s": round(s, 2) for phase, s in self.phases.items()}
        logger.log_event("startup", payload | {"total_s": round(total, 2)})


class InFlight(Generic[T]):
    """Keeps one step in flight: a step's results are awaited only once the next step is
    submitted, or when an evaluation or a checkpoint needs them (`settle`). The engine then
    never waits for the loop between two steps.

    `finish(step, evals)` awaits a step's outputs, logs its metrics (and `evals`, the
    held-out figures measured right after it) and returns them.
    """

    def __init__(
        self,
        finish: FinishStep[T],
        startup: StartupClock | None = None,
        logger: MetricsLogger | None = None,
    ) -> None:
        """With `startup` (and the run's `logger`), the first finished step logs how long
        the run took to reach it."""
        self._finish = finish
        self._startup, self._logger = startup, logger
        self._pending: Step[T] | None = None
        self.metrics: dict[str, float] = {}  # the last finished step's

    async def submit(self, step: Step[T]) -> None:
        """Hold `step` in flight, after finishing the one before it."""
        await self.settle()
        self._pending = step

    async def settle(self, evals: dict[str, float] | None = None) -> dict[str, float]:
        """Finish the step in flight, if any (with `evals`); the last finished step's metrics."""
        if self._pending is not None:
            step, self._pending = self._pending, None
            self.metrics = await self._finish(step, evals or {})
            if self._startup is not None and self._logger is not None:
                self._startup.first_step_done(self._logger)
        return self.metrics


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


def adam_params(
    config: LoopConfig, step: int, total_steps: int, loss_units: float = 1.0
) -> types.AdamParams:
    """The optimizer settings of `step`, its learning rate following the schedule.

    The engine's losses are sums (TINKER_API.md), so their gradients grow with the batch;
    `grad_clip_norm` bounds the gradient of the loss as a mean instead, as TRL's
    `max_grad_norm` does: the step's loss divided by `loss_units`, the number of terms it
    sums (trained tokens for SL and RL, judged datums for the reward model, 1 for DPO's
    loss, already a mean over pairs). The engine's cap is then grad_clip_norm * loss_units.
    """
    lr = config.learning_rate * lr_multiplier(
        step, total_steps, config.lr_schedule, config.warmup_steps
    )
    return types.AdamParams(
        learning_rate=lr,
        beta1=config.beta1,
        beta2=config.beta2,
        eps=config.eps,
        weight_decay=config.weight_decay,
        grad_clip_norm=config.grad_clip_norm * max(loss_units, 1.0),
    )


async def log_step(
    step: Step[Any],
    metrics: dict[str, float],
    evals: dict[str, float],
    logger: MetricsLogger,
    config: LoopConfig,
    loss_key: str,
) -> dict[str, float]:
    """The end of a supervised step's `_finish` (SL, DPO, both reward heads): `metrics`, the
    algorithm's own, with the step's learning rate, wall time, optimizer metrics and `evals`,
    logged as step `number + 1`; then stop if `loss_key` or a norm diverged."""
    metrics |= {"learning_rate": step.learning_rate, "step_time_s": time.monotonic() - step.started}
    metrics |= optimizer_metrics(await step.optim, step.grad_clip_norm)
    metrics |= evals
    logger.log_metrics(metrics, step=step.number + 1)
    stop_if_diverged(metrics, step.number + 1, loss_key, config)
    return metrics


@dataclass(frozen=True)
class SupervisedLoop(Generic[T]):
    """The loop of SL, DPO and both reward heads: `data` in a fixed shuffle per epoch,
    `plan.batch_size` examples a step in `plan`'s passes, one step in flight, for
    `total_steps` steps. `planned` plans it and logs the plan; `run` trains the steps left.

    What differs between them is `run`'s arguments: the pass each step submits, how a step's
    metrics are read, the held-out evaluation. SL needs the plan's total steps to choose its
    held-out examples, hence two calls rather than one.
    """

    config: SupervisedConfig
    run_dir: RunDir
    logger: MetricsLogger
    start: Start
    data: Sequence[T]
    plan: BatchPlan
    steps_per_epoch: int
    total_steps: int

    @classmethod
    def planned(
        cls,
        config: SupervisedConfig,
        run_dir: RunDir,
        start: Start,
        logger: MetricsLogger,
        data: Sequence[T],
        lengths: Sequence[int],
        unit: str = "examples",
    ) -> SupervisedLoop[T]:
        """Plan the batches of `data` (`lengths`: see `plan_batch`), count the steps (the
        config's max_steps, else num_epochs epochs) and log the plan."""
        plan = plan_batch(
            start.client,
            lengths,
            config.batch_size,
            config.micro_batch_size,
            unit,
            resumed_micro_batch_size=start.micro_batch_size,
        )
        steps_per_epoch = max(1, len(data) // plan.batch_size)
        total_steps = config.max_steps or config.num_epochs * steps_per_epoch
        log_plan(logger, plan, total_steps, start.step)
        return cls(config, run_dir, logger, start, data, plan, steps_per_epoch, total_steps)

    async def run(
        self,
        forward_backward: SubmitPass[T],
        finish: FinishStep[T],
        evaluate: Evaluate,
        *,
        evaluate_at_start: bool = True,
        loss_units: Callable[[list[T]], float] | None = None,
        reference_path: str | None = None,
        startup: StartupClock | None = None,
    ) -> RunResult:
        """Train from the start's step to the last, and return the last checkpoint's result.

        Args:
            forward_backward: Submits one pass of a step (see `SubmitPass`).
            finish: Reads a step's outputs and logs its metrics (see `InFlight`).
            evaluate: The held-out metrics, logged with the step after which they are
                measured, every `eval_every` steps and at the end.
            evaluate_at_start: A fresh run also logs them as step 0 (when there are any).
            loss_units: The terms a step's loss sums (see `adam_params`); None = 1.
            reference_path: What each checkpoint records as the run's reference (DPO).
            startup: The run's clock: the first finished step logs the startup phases.
        """
        client, config, plan, total = self.start.client, self.config, self.plan, self.total_steps
        if evaluate_at_start and self.start.step == 0 and (evals := await evaluate()):
            self.logger.log_metrics(evals, step=0)  # the starting point, for comparison

        # Submit step s, then finish step s-1 (one step in flight).
        steps: InFlight[T] = InFlight(finish, startup, self.logger)
        result = self.start.result
        for number in range(self.start.step, total):
            batch = epoch_batch(
                self.data, number, self.steps_per_epoch, plan.batch_size, config.seed
            )
            units = loss_units(batch) if loss_units is not None else 1.0
            adam = adam_params(config, number, total, units)
            await steps.submit(submit_step(client, plan, batch, number, adam, forward_backward))
            done = number + 1
            if is_due(done, config.eval_every, total):
                await steps.settle(await evaluate())
            if is_due(done, config.save_every, total):
                await steps.settle()
                result = await save_checkpoint(
                    client,
                    self.run_dir,
                    done,
                    self.logger,
                    micro_batch_size=plan.micro_batch_size,
                    reference_path=reference_path,
                )
        return result.finished(total, await steps.settle())


def optimizer_metrics(output: types.OptimStepResponse, clip: float) -> dict[str, float]:
    """An optimizer step's grad_norm (before clipping) and param_norm (the adapter's norm
    after the step), where the backend reports them (the local engine does), and then
    `grad_clipped`: 1 if the step's gradient was scaled down to the engine's cap `clip`
    (0: no clipping), else 0; its mean over steps is the clip rate."""
    metrics = {k: float(v) for k, v in (output.metrics or {}).items() if k in _OPTIMIZER_METRICS}
    if "grad_norm" in metrics:
        metrics["grad_clipped"] = float(0 < clip < metrics["grad_norm"])
    return metrics


_OPTIMIZER_METRICS = ("grad_norm", "param_norm")


def stop_if_diverged(
    metrics: dict[str, float], step: int, loss_key: str, config: LoopConfig
) -> None:
    """Stop a run whose loss or gradient norm at `step` is NaN or infinite: every later step
    would train on NaN weights (and a NaN run must never end "succeeded").

    Raises:
        DivergedError: What became what at which step, the likely cause and what to change.
    """
    checked = (
        (loss_key, "the loss"),
        ("grad_norm", "the gradient norm"),
        ("param_norm", "the adapter's weights"),
    )
    for key, what in checked:
        value = metrics.get(key)
        if value is None or math.isfinite(value):
            continue
        shown = "NaN" if math.isnan(value) else "infinite"
        raise DivergedError(f"{what} ({key}) became {shown} at step {step}: {_causes(config)}")


def _causes(config: LoopConfig) -> str:
    """The settings that likely made a run diverge, and what to change."""
    causes = (
        f"the learning rate {config.learning_rate:g} is likely too high for this model; lower it"
    )
    if config.grad_clip_norm == 0:
        causes += ", and turn gradient clipping on (grad_clip_norm 1.0; 0 is off)"
    if config.beta2 < 0.9 or config.eps < 1e-12:
        causes += (
            f"; Adam's beta2 {config.beta2:g} and eps {config.eps:g} let one step grow without "
            "bound (the defaults are 0.95 and 1e-8)"
        )
    return causes


def is_due(done: int, every: int, total: int) -> bool:
    """Whether an every-N action (eval, save) runs after `done` steps; always at the end."""
    return done == total or (every > 0 and done % every == 0)


async def save_checkpoint(
    client: TrainingClient,
    run: RunDir,
    step: int,
    logger: MetricsLogger,
    *,
    micro_batch_size: int | None = None,
    reference_path: str | None = None,
) -> RunResult:
    """Save state and sampler weights, then append their line to checkpoints.jsonl (with the
    record's optional fields, where the algorithm has them)."""
    name = f"{step:06d}"
    state, sampler = client.save_state(name), client.save_weights_for_sampler(name)
    # Both writes end before an error of either is raised: a worker that exits on the first
    # while the second is still writing would leave its temporary directory behind.
    saved_state, saved_sampler = await asyncio.gather(state, sampler, return_exceptions=True)
    if isinstance(saved_state, BaseException):
        raise saved_state
    if isinstance(saved_sampler, BaseException):
        raise saved_sampler
    state_path, sampler_path = saved_state.path, saved_sampler.path
    record = CheckpointRecord(
        name=name,
        step=step,
        state_path=state_path,
        sampler_path=sampler_path,
        time=time.time(),
        micro_batch_size=micro_batch_size,
        reference_path=reference_path,
    )
    run.add_checkpoint(record)
    logger.log_event("checkpoint", record.model_dump(exclude_none=True))
    return RunResult(steps=step, state_path=state_path, sampler_path=sampler_path)


def weighted_sum(datum: types.Datum, key: str = "weights") -> float:
    return float(datum.loss_fn_inputs[key].to_torch().sum())
