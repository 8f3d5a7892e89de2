"""The built-in losses on fixed logprobs, against values computed by hand.

Shared case (2 tokens): log p = [ln 0.5, ln 0.25], log q = [ln 0.25, ln 0.25], so the ratio
r = p / q = [2, 1].
"""

import math

import pytest
import torch

from thinker.engine.losses import get_loss_fn, inputs_read
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


def _grad(name: str, inputs: dict[str, torch.Tensor], config: dict[str, float]) -> list[float]:
    lp = _lp().requires_grad_(True)
    get_loss_fn(name, config)(lp, inputs, config).backward()
    assert lp.grad is not None
    return lp.grad.tolist()


def test_gspo_clips_the_sequence_ratio_at_the_paper_thresholds() -> None:
    """A = [1, -1], both tokens in the ratio: s = exp((ln 2 + 0) / 2) = sqrt 2 for both.
    Clip [1 - 3e-4, 1 + 4e-4]: token 1 min(sqrt 2, 1.0004) = 1.0004 (clipped, no gradient);
    token 2 min(-sqrt 2, -1.0004) = -sqrt 2 (gradient -(s * A) = +sqrt 2). Loss
    -(1.0004 - sqrt 2) = 0.41381; gradient [0, 1.41421]: no token's gradient flows through
    the other tokens' share of s."""
    inputs = _inputs([1.0, -1.0])
    loss = get_loss_fn("gspo", None)(_lp(), inputs, {})
    assert loss.item() == pytest.approx(math.sqrt(2) - 1.0004, abs=1e-6)
    assert loss.item() == pytest.approx(0.41381, abs=1e-5)
    assert _grad("gspo", inputs, {}) == pytest.approx([0.0, math.sqrt(2)])


def test_gspo_honours_its_config() -> None:
    """Clip [0.8, 1.5] leaves s = sqrt 2 unclipped: loss -(sqrt 2 - sqrt 2) = 0, gradient
    -s * A = [-1.41421, 1.41421]."""
    config = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.5}
    inputs = _inputs([1.0, -1.0])
    assert get_loss_fn("gspo", config)(_lp(), inputs, config).item() == pytest.approx(0.0)
    assert _grad("gspo", inputs, config) == pytest.approx([-math.sqrt(2), math.sqrt(2)])


def test_gspo_ratio_covers_the_sequence_ratio_mask_tokens_only() -> None:
    """sequence_ratio_mask [1, 0]: s = exp(ln 2) = 2; clip [0.5, 3], A = [1, 1]: loss
    -(2 + 2) = -4, gradient [-2, -2] (the unmasked token still trains, at s's value)."""
    config = {"clip_low_threshold": 0.5, "clip_high_threshold": 3.0}
    inputs = {**_inputs([1.0, 1.0]), "sequence_ratio_mask": torch.tensor([1.0, 0.0])}
    assert get_loss_fn("gspo", config)(_lp(), inputs, config).item() == pytest.approx(-4.0)
    assert _grad("gspo", inputs, config) == pytest.approx([-2.0, -2.0])


def test_gspo_without_mask_averages_over_tokens_with_an_advantage() -> None:
    """A = [1, 0] (a prompt token has advantage 0): s = exp(ln 2) = 2, as with the mask
    [1, 0]; clip [0.5, 3]: loss -(2 * 1) = -2."""
    config = {"clip_low_threshold": 0.5, "clip_high_threshold": 3.0}
    loss = get_loss_fn("gspo", config)(_lp(), _inputs([1.0, 0.0]), config)
    assert loss.item() == pytest.approx(-2.0)


def test_stable_reinforce_truncates_the_weight() -> None:
    """A = [1, 2], clip_high 1.5: weights min(r, 1.5) = [1.5, 1]:
    -(1.5 ln .5 * 1 + 1 ln .25 * 2) = 3.8123; gradient -w * A = [-1.5, -2]."""
    config = {"clip_high_threshold": 1.5}
    inputs = _inputs([1.0, 2.0])
    expected = -(1.5 * LN_HALF * 1 + 1 * LN_QUARTER * 2)
    loss = get_loss_fn("stable_reinforce", config)(_lp(), inputs, config)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(3.8123, abs=1e-4)
    assert _grad("stable_reinforce", inputs, config) == pytest.approx([-1.5, -2.0])


def test_stable_reinforce_kl_penalty() -> None:
    """A = [1, 2], default truncation 2 (weights [2, 1]), kl_coeff 0.5: the policy term is
    cispo's 4.15888; k3 = r - 1 - ln r = [1 - ln 2, 0] adds 0.5 * 0.30685: 4.31231.
    Gradient: -w * A = [-2, -2] plus 0.5 * (r - 1) = [0.5, 0]: [-1.5, -2]."""
    config = {"kl_coeff": 0.5}
    inputs = _inputs([1.0, 2.0])
    loss = get_loss_fn("stable_reinforce", config)(_lp(), inputs, config)
    assert loss.item() == pytest.approx(4.31231, abs=1e-5)
    assert _grad("stable_reinforce", inputs, config) == pytest.approx([-1.5, -2.0])


def test_loss_config_values_must_be_numbers() -> None:
    with pytest.raises(ConfigError, match=r"loss_fn_config\['kl_coeff'\].*must be a number"):
        get_loss_fn("stable_reinforce", {"kl_coeff": "high"})  # type: ignore[dict-item]


def test_unknown_loss_and_config_key_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown loss_fn 'mse'"):
        get_loss_fn("mse", None)
    with pytest.raises(ConfigError, match="clip_low"):
        get_loss_fn("cross_entropy", {"clip_low_threshold": 0.5})


def test_a_clip_threshold_the_loss_does_not_read_is_refused() -> None:
    """ppo reads per-token clips, gspo its mask too; importance_sampling would ignore a clip,
    so it is refused with the losses that read one."""
    keys = ["target_tokens", "logprobs", "advantages", "clip_high_threshold"]
    assert inputs_read("ppo", keys, 0)[-1] == "clip_high_threshold"
    assert "sequence_ratio_mask" in inputs_read("gspo", [*keys, "sequence_ratio_mask"], 0)
    with pytest.raises(ConfigError, match=r"datum 3: loss 'importance_sampling' does not read"):
        inputs_read("importance_sampling", keys, 3)
