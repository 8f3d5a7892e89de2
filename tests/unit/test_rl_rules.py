"""RL's rules that need no training: the temperature it accepts, which tokens its
sampler-vs-learner metric covers, and when that metric warns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from tinker import types

from thinker.algorithms.rl import (
    RLConfig,
    Rollout,
    _datum,
    _sampler_learner_gaps,
    gap_warning,
)
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
    gaps, learner_lp = _sampler_learner_gaps(rollouts, out)
    assert gaps == pytest.approx([0.125] * 3)
    assert learner_lp == [[-0.625, -0.375], [-1.125]]


def test_an_episode_trains_and_measures_only_the_policys_own_tokens() -> None:
    """A hand-built two-turn episode: prompt [1, 2], the policy's [3, 4], the environment's
    reply [5, 6] (mask 0), the policy's [7]. The datum's targets are the row shifted by one;
    advantages (and the gap) cover the policy's three tokens only, at their positions."""
    r = Rollout(
        [1, 2], [3, 4, 5, 6, 7], [-0.5, -0.25, 0.0, 0.0, -1.0], None, Completion("b", True),
        advantage=2.0, mask=[1.0, 1.0, 0.0, 0.0, 1.0],
    )  # fmt: skip
    datum = _datum(r, "importance_sampling")
    assert datum.model_input.to_ints() == [1, 2, 3, 4, 5, 6]
    assert datum.loss_fn_inputs["target_tokens"].to_torch().tolist() == [2, 3, 4, 5, 6, 7]
    assert datum.loss_fn_inputs["advantages"].to_torch().tolist() == [0, 2, 2, 0, 0, 2]
    assert datum.loss_fn_inputs["logprobs"].to_torch().tolist() == [0, -0.5, -0.25, 0, 0, -1.0]
    learner = np.array([9.0, -0.5, -0.5, 7.0, 7.0, -1.5])
    out = types.ForwardBackwardOutput(
        loss_fn_output_type="target_logprobs",
        loss_fn_outputs=[{"logprobs": types.TensorData.from_numpy(learner)}],
        metrics={},
    )
    gaps, _ = _sampler_learner_gaps([r], out)
    assert gaps == pytest.approx([0.0, 0.25, 0.5])


def test_the_gap_warns_outside_its_healthy_range() -> None:
    """Synchronous with one substep the sampler and the learner score the same weights: a gap
    above 0.01 is a mismatch. Sampling k steps ahead the learner has moved on: only above 0.3
    (too stale for the learning rate). With several substeps the later ones are off-policy by
    design: no bound."""
    sync = RLConfig(dataset=Path("p.jsonl"))
    ahead = RLConfig(dataset=Path("p.jsonl"), max_steps_off_policy=2)
    substeps = RLConfig(dataset=Path("p.jsonl"), num_substeps=2)
    assert gap_warning({"kl_sample_train": 3e-8}, sync) is None
    assert "disagree" in (gap_warning({"kl_sample_train": -0.02}, sync) or "")
    assert gap_warning({"kl_sample_train": 0.11}, ahead) is None
    assert "too stale" in (gap_warning({"kl_sample_train": 0.4}, ahead) or "")
    assert gap_warning({"kl_sample_train": 0.2}, substeps) is None
    with pytest.raises(ValidationError, match="max_steps_off_policy"):
        RLConfig(dataset=Path("p.jsonl"), max_steps_off_policy=-1)
