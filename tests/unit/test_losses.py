"""The built-in losses on fixed logprobs, against values computed by hand.

Shared case (2 tokens): log p = [ln 0.5, ln 0.25], log q = [ln 0.25, ln 0.25], so the ratio
r = p / q = [2, 1].
"""

import math

import pytest
import torch

from thinker.engine.losses import get_loss_fn
from thinker.errors import ConfigError

LN_HALF, LN_QUARTER = math.log(0.5), math.log(0.25)


def _inputs(advantages: list[float]) -> dict[str, torch.Tensor]:
    return {
        "target_tokens": torch.tensor([5, 6]),
        "logprobs": torch.tensor([LN_QUARTER, LN_QUARTER]),
        "advantages": torch.tensor(advantages),
    }


def _lp() -> torch.Tensor:
    return torch.tensor([LN_HALF, LN_QUARTER])


def test_cross_entropy_is_weighted_negative_logprob_sum() -> None:
    """-(1 * -1 + 0.5 * -2) = 2."""
    fn = get_loss_fn("cross_entropy", None)
    inputs = {"target_tokens": torch.tensor([1, 2]), "weights": torch.tensor([1.0, 0.5])}
    assert fn(torch.tensor([-1.0, -2.0]), inputs, {}).item() == pytest.approx(2.0)


def test_importance_sampling() -> None:
    """A = [1, -1]: -(2 * 1 + 1 * -1) = -1."""
    fn = get_loss_fn("importance_sampling", None)
    assert fn(_lp(), _inputs([1.0, -1.0]), {}).item() == pytest.approx(-1.0, abs=1e-6)


def test_ppo_clips_the_ratio_at_default_thresholds() -> None:
    """A = [1, -1]: min(2, clip(2) = 1.2) = 1.2 and min(-1, -1) = -1, so -(1.2 - 1) = -0.2."""
    fn = get_loss_fn("ppo", None)
    assert fn(_lp(), _inputs([1.0, -1.0]), {}).item() == pytest.approx(-0.2, abs=1e-6)


def test_ppo_honours_its_config() -> None:
    """clip_high 1.5: min(2, 1.5) = 1.5, so -(1.5 - 1) = -0.5."""
    fn = get_loss_fn("ppo", {"clip_high_threshold": 1.5})
    loss = fn(_lp(), _inputs([1.0, -1.0]), {"clip_high_threshold": 1.5})
    assert loss.item() == pytest.approx(-0.5, abs=1e-6)


def test_ppo_takes_per_token_thresholds_from_the_datum() -> None:
    """The datum's clip_high_threshold [1.5, 1.0] wins over the config's 3.0: A = [1, -1]:
    min(2, 1.5) = 1.5 and min(-1, -clip(1, .8, 1.0) = -1) = -1, so -(1.5 - 1) = -0.5."""
    fn = get_loss_fn("ppo", {"clip_high_threshold": 3.0})
    inputs = {**_inputs([1.0, -1.0]), "clip_high_threshold": torch.tensor([1.5, 1.0])}
    loss = fn(_lp(), inputs, {"clip_high_threshold": 3.0})
    assert loss.item() == pytest.approx(-0.5, abs=1e-6)


def test_cispo_takes_per_token_thresholds_from_the_datum() -> None:
    """clip_high [1.5, 4]: weights clip(r) = [1.5, 1]: -(1.5 ln .5 * 1 + 1 ln .25 * 2)."""
    fn = get_loss_fn("cispo", None)
    inputs = {**_inputs([1.0, 2.0]), "clip_high_threshold": torch.tensor([1.5, 4.0])}
    expected = -(1.5 * LN_HALF * 1 + 1 * LN_QUARTER * 2)
    assert fn(_lp(), inputs, {}).item() == pytest.approx(expected, rel=1e-6)


def test_cispo() -> None:
    """A = [1, 2], clip(r, 0, 4) = [2, 1]: -(2 ln .5 * 1 + 1 ln .25 * 2) = 4.1589."""
    fn = get_loss_fn("cispo", None)
    expected = -(2 * LN_HALF * 1 + 1 * LN_QUARTER * 2)
    assert fn(_lp(), _inputs([1.0, 2.0]), {}).item() == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(4.1589, abs=1e-4)


def test_cispo_gradient_does_not_flow_through_the_ratio() -> None:
    """d/d logp of -(stopgrad(r) * logp * A) is -r * A = [-2, -2] for A = [1, 2]."""
    lp = _lp().requires_grad_(True)
    get_loss_fn("cispo", None)(lp, _inputs([1.0, 2.0]), {}).backward()
    assert lp.grad is not None
    assert lp.grad.tolist() == pytest.approx([-2.0, -2.0])


def test_dro() -> None:
    """beta 1, A = [1, 2]: -(ln .5 - .5 (ln 2)^2 + 2 ln .25) = 3.7060."""
    fn = get_loss_fn("dro", {"beta": 1.0})
    expected = -(LN_HALF * 1 - 0.5 * math.log(2) ** 2 + LN_QUARTER * 2)
    assert fn(_lp(), _inputs([1.0, 2.0]), {"beta": 1.0}).item() == pytest.approx(expected)
    assert expected == pytest.approx(3.7060, abs=1e-4)


def test_dro_requires_beta() -> None:
    with pytest.raises(ConfigError, match="beta"):
        get_loss_fn("dro", None)(_lp(), _inputs([1.0, 2.0]), {})


def test_unknown_loss_and_config_key_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown loss_fn 'mse'"):
        get_loss_fn("mse", None)
    with pytest.raises(ConfigError, match="clip_low"):
        get_loss_fn("cross_entropy", {"clip_low_threshold": 0.5})
