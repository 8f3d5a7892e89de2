"""The training loops' shared steps: the learning-rate schedule, the batches of each epoch,
the one step kept in flight and the held-out examples an evaluation scores, on hand-computed
values."""

import asyncio
import json
import math
import re
from pathlib import Path

import pytest
from tinker import types

from thinker.algorithms.common import InFlight, StartupClock, Step, epoch_batch
from thinker.algorithms.sl import SLConfig, _eval_subset, lr_multiplier
from thinker.runs import RunLogger


def test_linear_schedule_decays_to_zero_at_the_end() -> None:
    """10 steps: 1.0, 0.9, ..., 0.1 (the factor of the last step is 1/10, never 0)."""
    assert [lr_multiplier(s, 10, "linear") for s in range(10)] == pytest.approx(
        [1.0 - s / 10 for s in range(10)]
    )


def test_cosine_schedule_after_warmup() -> None:
    """warmup 2: 0.5, 1.0; then 0.5 (1 + cos(pi * (s - 2) / 8))."""
    got = [lr_multiplier(s, 10, "cosine", warmup_steps=2) for s in range(10)]
    want = [0.5, 1.0] + [0.5 * (1 + math.cos(math.pi * (s - 2) / 8)) for s in range(2, 10)]
    assert got == pytest.approx(want)
    assert got[2] == 1.0 and got[6] == pytest.approx(0.5)


def test_constant_schedule_and_unknown_name() -> None:
    assert lr_multiplier(7, 10, "constant") == 1.0
    with pytest.raises(ValueError, match="unknown lr_schedule"):
        lr_multiplier(0, 10, "exponential")


def test_batches_cover_each_epoch_once_and_repeat_for_the_same_step() -> None:
    data = list(range(10))
    epoch0 = [epoch_batch(data, s, 3, 3, seed=0) for s in range(3)]
    assert sorted(x for b in epoch0 for x in b) == sorted(set(x for b in epoch0 for x in b))
    assert all(len(b) == 3 for b in epoch0)
    assert epoch_batch(data, 4, 3, 3, seed=0) == epoch_batch(data, 4, 3, 3, seed=0)
    assert epoch_batch(data, 3, 3, 3, seed=0) != epoch0[0]  # a new shuffle each epoch


def test_one_step_stays_in_flight_and_settle_finishes_it_with_the_evals() -> None:
    """InFlight finishes step s-1 only once step s is submitted (the engine never waits for
    the loop), and `settle` finishes the pending step at once, with held-out figures."""
    order: list[str] = []

    async def finish(step: Step[int], evals: dict[str, float]) -> dict[str, float]:
        order.append(f"finish {step.number}{' +evals' if evals else ''}")
        return {"step": float(step.number), **evals}

    def submitted(number: int) -> Step[int]:
        order.append(f"submit {number}")
        return Step(number, [number], [], None, 0.1, 0.0)

    async def loop() -> dict[str, float]:
        steps: InFlight[int] = InFlight(finish)
        for number in range(3):
            await steps.submit(submitted(number))
            if number == 1:
                await steps.settle({"eval": 0.5})
        return await steps.settle()

    metrics = asyncio.run(loop())
    assert order == [
        "submit 0",
        "submit 1",
        "finish 0",
        "finish 1 +evals",
        "submit 2",
        "finish 2",
    ]
    assert metrics == {"step": 2.0}


def _datums(lengths: list[int]) -> list[types.Datum]:
    return [
        types.Datum(
            model_input=types.ModelInput.from_ints([1] * n),
            loss_fn_inputs={"target_tokens": [1] * n, "weights": [1.0] * n},
        )
        for n in lengths
    ]


def test_held_out_evaluation_scores_a_tenth_of_the_trained_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2,700 training rows of 750 tokens, batch 16: 168 steps, 2,016,000 tokens. Evaluating
    every 10 steps is 17 evaluations; a tenth of the trained tokens over 17 is 11,858 tokens,
    15 of the 300 held-out rows of 750. At the end only: 268 of them. eval_examples decides
    when set."""
    held_out = _datums([750] * 300)
    config = SLConfig(dataset=tmp_path / "d.jsonl", batch_size=16, eval_every=10)
    subset = _eval_subset(held_out, [750] * 2700, config, 168)
    assert subset == held_out[:15]
    assert "15 of the 300 held-out examples each time" in capsys.readouterr().out
    at_the_end = config.model_copy(update={"eval_every": 0})
    assert _eval_subset(held_out, [750] * 2700, at_the_end, 168) == held_out[:268]
    chosen = config.model_copy(update={"eval_examples": 100})
    assert _eval_subset(held_out, [750] * 2700, chosen, 168) == held_out[:100]


def test_the_first_finished_step_logs_where_the_startup_time_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once, after the first step finishes: each setup phase, the first step, the total."""
    clock = StartupClock()
    clock.mark("model")
    clock.mark("data", "3 examples rendered")

    async def finish(step: Step[int], evals: dict[str, float]) -> dict[str, float]:
        return {"step": float(step.number)}

    async def loop() -> None:
        steps: InFlight[int] = InFlight(finish, clock, RunLogger(tmp_path, echo=True))
        for number in range(3):
            await steps.submit(Step(number, [number], [], None, 0.1, 0.0))
        await steps.settle()

    asyncio.run(loop())
    out = capsys.readouterr().out
    assert out.count("first step done") == 1 and out.count("[thinker] startup:") == 1
    assert re.search(
        r"model [\d.]+ s, data [\d.]+ s \(3 examples rendered\), first step [\d.]+ s", out
    )
    event = json.loads(out.split("[thinker] startup: ")[1].splitlines()[0])
    assert list(event) == ["model_s", "data_s", "first_step_s", "total_s"]
    assert event["total_s"] >= 0 and event["total_s"] == pytest.approx(
        event["model_s"] + event["data_s"] + event["first_step_s"], abs=0.02
    )
