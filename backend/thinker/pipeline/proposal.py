"""Hyperparameters proposed for a job from its data and its base model.

The wizard, the advanced form and a job created without hyperparameters all get the same
proposal (POST /api/jobs/proposal; POST /api/jobs fills what the request leaves out). The
rules, and why:

- **A model with random weights** (the built-ins, `thinker/tiny`) knows nothing: it must
  learn the byte patterns of the task from the data alone. What it needs is many optimizer
  steps at a high learning rate, whatever the size of the set: on new character tasks of
  100-400 rows (upper-casing, shifting or doubling letters, reversing, sums) held-out exact
  match reached 0.7-1.0 only after 600-800 steps of 32 examples at 3e-3 to 5e-3 (TRAINING_GUIDE
  "The tiny model"); 300 steps left most at 0.
- **A pretrained model** already writes; a few epochs teach it the format. Learning rate
  from its size as the Tinker cookbook's `get_lr` has it for LoRA: 5e-5 * 10 *
  (2000 / hidden_size) ** e, e = 0.0775 for Qwen, 0.781 otherwise (Llama). Batch about an
  eighth of the set, 4 to 32; 3 epochs under 1,000 rows, 2 under 10,000, else 1; at least
  MIN_PRETRAINED_STEPS steps.
- **DPO** starts from the policy it refines (usually an SL model): the cookbook's 1e-5 for a
  pretrained model; on the tiny one 1e-3 from random weights, 3e-5 from an SL model (at 1e-3
  DPO erased the sums SL had taught: configs/sl_then_dpo.yaml); one epoch-equivalent of
  pairs, at least 40 steps.
- **RL** needs a model that already answers in the expected format: with random weights and
  no starting model there is nothing for a reward to prefer, so the proposal says so.
  Group 8, 16 prompts a step (the cookbook's small-run settings), learning rate a tenth of
  SL's, `max_tokens` from the longest reference answer.
- Evaluation about ten times per run, a checkpoint about five times.

Every value the request gives is kept; only what it leaves out is proposed, and steps are
recomputed from a given batch size or epoch count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from thinker.engine.local.hub import ModelFacts

MIN_PRETRAINED_STEPS = 20
FEW_ROWS_SCRATCH = 300  # below this a from-scratch model memorises more than it learns
SCRATCH_SL_STEPS = 800  # optimizer steps a from-scratch model needs on a small character task
SCRATCH_SL_LR = 3e-3
SCRATCH_BATCH = 32
SCRATCH_DPO_LR = 1e-3
SCRATCH_DPO_FROM_SL_LR = 3e-5
PRETRAINED_DPO_LR = 1e-5
MIN_DPO_STEPS = 40
RL_STEPS_SCRATCH_START = 15  # RL from a tiny SL model: the rl.yaml preset's figures
QWEN_EXPONENT, LLAMA_EXPONENT = 0.0775, 0.781


@dataclass(frozen=True)
class DataFacts:
    """What the proposal reads of a dataset."""

    id: str
    rows: int
    longest_answer_chars: int = 0  # RL problems: the longest reference `answer`


@dataclass
class StageProposal:
    stage: str  # sl | dpo | rm | rl
    rows: int
    train_rows: int
    steps: int
    config: dict[str, Any]
    why: list[str] = field(default_factory=list)


@dataclass
class Proposal:
    stages: list[StageProposal]
    warnings: list[str]
    rlhf: bool = False

    @property
    def total_steps(self) -> int:
        return sum(s.steps for s in self.stages)

    @property
    def train_rows(self) -> int:
        return self.stages[0].train_rows if self.stages else 0

    def request_config(self) -> dict[str, Any]:
        """The `config` of a job request (rlhf: one mapping per stage)."""
        if self.rlhf:
            return {s.stage: s.config for s in self.stages}
        return dict(self.stages[0].config)


def cookbook_lr(model: ModelFacts) -> float:
    """The Tinker cookbook's LoRA learning rate for a pretrained model of this size."""
    exponent = QWEN_EXPONENT if model.model_type.startswith("qwen") else LLAMA_EXPONENT
    hidden = model.hidden_size or 2000
    return round_sig(5e-5 * 10 * (2000 / hidden) ** exponent)


def propose(
    algorithm: str,
    model: ModelFacts,
    data: dict[str, DataFacts],
    given: dict[str, Any],
    continues: bool = False,
) -> Proposal:
    """The proposal for a job.

    Args:
        algorithm: sl, dpo, rl or rlhf.
        model: The base model (for a job continuing from a library model, that model's base).
        data: The datasets by role: "main", and for rlhf "rm" and "rl".
        given: The request's config; its values are kept (rlhf: one mapping per stage).
        continues: The job starts from a library model (already trained), not a new adapter.
    """
    warnings: list[str] = []
    if algorithm == "rlhf":
        stages = [
            _supervised("sl", data["main"], model, _part(given, "sl"), continues),
            _supervised("rm", data["rm"], model, _part(given, "rm"), False),
            _reinforcement(data["rl"], model, _part(given, "rl"), True, judge=True),
        ]
        return Proposal(stages, warnings, rlhf=True)
    if algorithm == "rl":
        if model.from_scratch and not continues:
            warnings.append(
                f"{model.name} has random weights and cannot answer yet, so RL has nothing to "
                "reward: train it with SL on examples of the answers first (for the shipped "
                "rl-train problems, the rl-warmup set), then start RL from that model (Train "
                "further on its page, or base_model: <its mdl_ id>)"
            )
        stage = _reinforcement(data["main"], model, given, continues, judge=False)
    else:
        stage = _supervised(algorithm, data["main"], model, given, continues)
        if model.from_scratch and algorithm == "sl" and stage.train_rows < FEW_ROWS_SCRATCH:
            warnings.append(
                f"{stage.train_rows} rows to train on: {model.name} (random weights) tends to "
                f"memorise fewer than {FEW_ROWS_SCRATCH} rows rather than learn the task, so "
                "held-out answers may stay wrong; add rows if you can (dropping the first "
                "letter of words: held-out exact match 0.0 from 180 rows, 0.82 from 400)"
            )
    return Proposal([stage], warnings)


def _part(given: dict[str, Any], stage: str) -> dict[str, Any]:
    part = given.get(stage)
    return dict(part) if isinstance(part, dict) else {}


def _supervised(
    stage: str, data: DataFacts, model: ModelFacts, given: dict[str, Any], continues: bool
) -> StageProposal:
    train = train_rows(data.rows, given.get("eval_fraction", 0.1), given)
    unit = "examples" if stage == "sl" else "pairs"
    why = [f"{data.rows} {unit}, {train} to train on after the held-out share"]
    config: dict[str, Any] = {}
    if model.from_scratch:
        batch = _given_int(given, "batch_size") or _fits(
            min(SCRATCH_BATCH, _pow2_floor(train)), train
        )
        lr = SCRATCH_SL_LR
        if stage == "dpo":  # from SL weights, 1e-3 unlearns what SL taught (sl_then_dpo.yaml)
            lr = SCRATCH_DPO_FROM_SL_LR if continues else SCRATCH_DPO_LR
        steps = MIN_DPO_STEPS if stage == "dpo" else SCRATCH_SL_STEPS
        if stage == "rm":
            steps = max(80, math.ceil(2 * train / batch))
        why.append(
            f"{model.name} starts from random weights: it needs many steps at a high learning "
            f"rate whatever the data's size ({steps} steps of {batch} at {lr:g})"
            if stage != "dpo"
            else f"DPO on the tiny model: {steps} steps of {batch} pairs at {lr:g}"
        )
        config.update(batch_size=batch, learning_rate=lr)
    else:
        batch = _given_int(given, "batch_size") or _fits(
            min(32, max(4, _pow2_floor(train // 8))), train
        )
        epochs = 3 if data.rows < 1000 else 2 if data.rows < 10_000 else 1
        per_epoch = max(1, train // batch)
        steps = max(epochs * per_epoch, MIN_PRETRAINED_STEPS)
        if stage == "dpo":
            lr, lr_why = PRETRAINED_DPO_LR, "the cookbook's DPO rate"
            steps = max(per_epoch, MIN_DPO_STEPS)
        else:
            lr = cookbook_lr(model)
            lr_why = f"the cookbook's LoRA rate for hidden size {model.hidden_size}"
        why.append(f"batch {batch}: about an eighth of the data, 4 to 32")
        why.append(f"about {epochs} epoch(s) of {per_epoch} steps -> {steps} steps")
        why.append(f"learning rate {lr:g}: {lr_why}")
        config.update(batch_size=batch, learning_rate=lr)
    if continues and stage in ("sl", "dpo"):
        why.append("continues from a library model: its adapter, optimizer state fresh")
    config["max_steps"] = steps
    config.update(_cadence(steps))
    return _with_given(stage, data, train, config, given, why)


def _reinforcement(
    data: DataFacts, model: ModelFacts, given: dict[str, Any], continues: bool, judge: bool
) -> StageProposal:
    train = train_rows(data.rows, given.get("eval_fraction", 0.1), given)
    group = 4 if judge else 8  # a judge compares every pair of a group: n(n-1) calls
    groups = _given_int(given, "groups_per_batch") or min(16, max(1, _pow2_floor(train // 2)))
    if model.from_scratch:
        lr = 1e-3 if judge else 3e-4
        steps = 20 if judge else RL_STEPS_SCRATCH_START
    else:
        lr = round_sig(cookbook_lr(model) / 10)
        steps = max(MIN_PRETRAINED_STEPS, math.ceil(2 * train / groups))
    answer_tokens = (
        data.longest_answer_chars if model.from_scratch else data.longest_answer_chars // 3
    )
    max_tokens = 32 if judge else min(1024, max(16, 2 * answer_tokens + 8))
    config: dict[str, Any] = {
        "group_size": group,
        "groups_per_batch": groups,
        "max_steps": steps,
        "learning_rate": lr,
        "max_tokens": max_tokens,
        "eval_every": max(1, round(steps / 4)),
        "save_every": max(1, round(steps / 4)),
    }
    why = [
        f"{data.rows} prompts, {train} to train on after the held-out share",
        f"{groups} prompts per step x {group} completions = {groups * group} samples per step",
        f"{steps} steps at learning rate {lr:g}"
        + (" (a tenth of SL's: RL moves a trained policy)" if not model.from_scratch else ""),
        f"max_tokens {max_tokens}: about twice the longest reference answer",
    ]
    if continues:
        why.append("starts from a library model that already answers")
    return _with_given("rl", data, train, config, given, why)


def _with_given(
    stage: str,
    data: DataFacts,
    train: int,
    config: dict[str, Any],
    given: dict[str, Any],
    why: list[str],
) -> StageProposal:
    """Keep every value the request gave; recompute steps from a given batch or epochs."""
    values = dict(given)  # dataset ids too: the request config carries them on
    # A given value that is not a positive integer counts as not given here: the config's
    # validation refuses it, with every other problem of the request.
    epochs, given_steps = _given_int(values, "num_epochs"), _given_int(values, "max_steps")
    if stage != "rl" and "max_steps" not in values and epochs is not None:
        config.pop("max_steps")  # the given epochs decide
        batch = _given_int(values, "batch_size") or config["batch_size"]
        steps = epochs * max(1, train // batch)
        config.update(_cadence(steps))
        why.append(f"{epochs} epoch(s) as given -> {steps} steps")
    else:
        steps = given_steps or config["max_steps"]
    if given_steps is not None and stage != "rl":
        config.update(_cadence(steps))
    merged = {**config, **values}
    return StageProposal(stage, data.rows, train, steps, merged, why)


def train_rows(rows: int, eval_fraction: object, given: dict[str, Any]) -> int:
    """Rows left to train on after the held-out share (as `split_train_eval` cuts it)."""
    if "eval_dataset_id" in given:
        return rows
    fraction = eval_fraction if isinstance(eval_fraction, int | float) else 0.1
    if rows < 2 or not 0 < fraction < 1:  # 0, or out of range (validation refuses it)
        return rows
    held = min(rows - 1, max(1, round(rows * fraction)))
    return rows - held


def _cadence(steps: int) -> dict[str, int]:
    return {"eval_every": max(1, round(steps / 10)), "save_every": max(1, round(steps / 5))}


def _given_int(given: dict[str, Any], key: str) -> int | None:
    value = given.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _fits(batch: int, train: int) -> int:
    """A proposed batch no larger than the rows to train on (a larger one is refused)."""
    return max(1, min(batch, train))


def _pow2_floor(n: int) -> int:
    return 2 ** int(math.log2(max(1, n)))


def round_sig(x: float, digits: int = 2) -> float:
    """`x` to `digits` significant figures (learning rates read 5.3e-4, not 5.2732e-4)."""
    return float(f"{x:.{digits}g}")
