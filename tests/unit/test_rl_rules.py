"""RL's rules that need no training: the temperature it accepts, and which tokens its
sampler-vs-learner metric covers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from tinker import types

from thinker.algorithms.rl import RLConfig, Rollout, _datum, _sampler_learner_gaps
from thinker.rewards import Completion


@pytest.mark.parametrize("temperature", [0.7, 1.3])
def test_a_temperature_other_than_one_is_refused_with_why(temperature: float) -> None:
    with pytest.raises(ValidationError) as caught:
        RLConfig(dataset=Path("problems.jsonl"), temperature=temperature)
    (error,) = caught.value.errors()
    assert error["loc"] == ("temperature",)
    assert f"{temperature:g} is refused" in error["msg"]
    assert "temperature-1 logprobs" in error["msg"] and "off-policy" in error["msg"]
    assert RLConfig(dataset=Path("problems.jsonl"), temperature=1.0).temperature == 1.0


def test_the_gap_covers_every_sampled_token_whatever_its_advantage() -> None:
    """Two rollouts of one group with equal rewards (advantage 0, so the loss ignores them)
    still count: the gap is a property of the sampler and the learner, not of the loss."""
    rollouts = [
        Rollout([1, 2, 3], [4, 5], [-0.5, -0.25], None, Completion("a", True)),
        Rollout([1, 2, 3], [6], [-1.0], None, Completion("b", True)),
    ]
    datums = [_datum(r, "importance_sampling") for r in rollouts]
    assert all(not d.loss_fn_inputs["advantages"].to_torch().any() for d in datums)
    # The learner's logprobs: 0.125 below the sampler's on every sampled token, and
    # something else on the prompt's positions (which are not sampled, so never counted).
    learner = [np.array([9.0, 9.0, -0.625, -0.375]), np.array([9.0, 9.0, -1.125])]
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="target_logprobs",
        loss_fn_outputs=[{"logprobs": types.TensorData.from_numpy(x)} for x in learner],
        metrics={},
    )
    starts = [len(r.prompt_tokens) - 1 for r in rollouts]
    assert _sampler_learner_gaps(datums, out, starts) == pytest.approx([0.125] * 3)
