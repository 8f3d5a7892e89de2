"""The built-in loss functions, exactly as TINKER_API.md defines them.

Each is a pure function of one datum: `logprobs_N` (the learner's log p of each target
token, with grad), the datum's `loss_fn_inputs` as tensors, and `loss_fn_config`. Each
returns the loss as a SUM over tokens; normalisation lives in the weights/advantages.
With log q the sampler's logprobs and r = exp(log p - log q):

    cross_entropy        -sum(w * log p)
    importance_sampling  -sum(r * A)                                  (on-policy REINFORCE)
    ppo                  -sum(min(r * A, clip(r, lo, hi) * A))        arXiv:1707.06347
    cispo                -sum(stopgrad(clip(r, lo, hi)) * log p * A)  arXiv:2506.13585

(lo and hi from loss_fn_config, or per token from the datum's clip_low_threshold and
clip_high_threshold inputs where it has them.)
    dro                  -sum(log p * A - beta/2 * (log p - log q)^2) arXiv:2506.07211 (DRO)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from thinker.errors import ConfigError

LossInputs = Mapping[str, Tensor]
LossConfig = Mapping[str, float]
LossFn = Callable[[Tensor, LossInputs, LossConfig], Tensor]


def cross_entropy(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    return -(inputs["weights"] * logprobs_N).sum()


def importance_sampling(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    ratio_N = torch.exp(logprobs_N - inputs["logprobs"])
    return -(ratio_N * inputs["advantages"]).sum()


def _thresholds(
    like_N: Tensor, inputs: LossInputs, config: LossConfig, low: float, high: float
) -> tuple[Tensor, Tensor]:
    """The clip range, as tensors like `like_N`: per token from the datum's
    `clip_low_threshold`/`clip_high_threshold` inputs where it has them, else from
    `loss_fn_config`, else the loss's defaults."""

    def bound(key: str, default: float) -> Tensor:
        value = inputs.get(key, config.get(key, default))
        return torch.as_tensor(value, dtype=like_N.dtype, device=like_N.device)

    return bound("clip_low_threshold", low), bound("clip_high_threshold", high)


def ppo(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    advantages_N = inputs["advantages"]
    ratio_N = torch.exp(logprobs_N - inputs["logprobs"])
    low, high = _thresholds(ratio_N, inputs, config, 0.8, 1.2)
    clipped_N = torch.clamp(ratio_N, low, high)
    return -torch.minimum(ratio_N * advantages_N, clipped_N * advantages_N).sum()


def cispo(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    ratio_N = torch.exp(logprobs_N - inputs["logprobs"])
    low, high = _thresholds(ratio_N, inputs, config, 0.0, 4.0)
    weight_N = torch.clamp(ratio_N, low, high).detach()
    return -(weight_N * logprobs_N * inputs["advantages"]).sum()


def dro(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    if "beta" not in config:
        raise ConfigError("loss 'dro' needs loss_fn_config={'beta': ...}")
    beta = config["beta"]
    gap_N = logprobs_N - inputs["logprobs"]
    return -(logprobs_N * inputs["advantages"] - 0.5 * beta * gap_N**2).sum()


LOSS_FNS: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
    "dro": dro,
}

REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    "importance_sampling": ("target_tokens", "logprobs", "advantages"),
    "ppo": ("target_tokens", "logprobs", "advantages"),
    "cispo": ("target_tokens", "logprobs", "advantages"),
    "dro": ("target_tokens", "logprobs", "advantages"),
}

# Inputs a datum may carry besides the required ones: per-token clip thresholds, which take
# the place of loss_fn_config's for that datum's tokens.
OPTIONAL_INPUTS: dict[str, tuple[str, ...]] = {
    "ppo": ("clip_low_threshold", "clip_high_threshold"),
    "cispo": ("clip_low_threshold", "clip_high_threshold"),
}

CONFIG_KEYS: dict[str, frozenset[str]] = {
    "cross_entropy": frozenset(),
    "importance_sampling": frozenset(),
    "ppo": frozenset({"clip_low_threshold", "clip_high_threshold"}),
    "cispo": frozenset({"clip_low_threshold", "clip_high_threshold"}),
    "dro": frozenset({"beta"}),
}


def get_loss_fn(name: str, config: Mapping[str, float] | None) -> LossFn:
    """The loss function called `name`, after checking `config` names only keys it reads."""
    if name not in LOSS_FNS:
        raise ConfigError(f"unknown loss_fn {name!r}; expected one of {sorted(LOSS_FNS)}")
    unknown = set(config or {}) - CONFIG_KEYS[name]
    if unknown:
        allowed = sorted(CONFIG_KEYS[name]) or "none"
        raise ConfigError(
            f"loss_fn_config for {name!r} has unknown keys {sorted(unknown)}; allowed: {allowed}"
        )
    return LOSS_FNS[name]
