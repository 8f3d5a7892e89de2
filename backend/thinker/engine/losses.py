"""The built-in loss functions, exactly as TINKER_API.md defines them.

Each is a pure function of one datum: `logprobs_N` (the learner's log p of each target
token, with grad), the datum's `loss_fn_inputs` as tensors, and `loss_fn_config`. Each
returns the loss as a SUM over tokens; normalisation lives in the weights/advantages.
With log q the sampler's logprobs and r = exp(log p - log q):

    cross_entropy        -sum(w * log p)
    importance_sampling  -sum(r * A)                                  (on-policy REINFORCE)
    ppo                  -sum(min(r * A, clip(r, lo, hi) * A))        arXiv:1707.06347
    cispo                -sum(stopgrad(clip(r, lo, hi)) * log p * A)  arXiv:2506.13585

    dro                  -sum(log p * A - beta/2 * (log p - log q)^2) arXiv:2506.07211 (DRO)
    gspo                 -sum(min(s_t * A, clip(s_t, lo, hi) * A))    arXiv:2507.18071
    stable_reinforce     -sum(stopgrad(min(r, hi)) * log p * A) + kl_coeff * sum(r - 1 - log r)

(lo and hi from loss_fn_config, or per token from the datum's clip_low_threshold and
clip_high_threshold inputs where it has them.) gspo is Tinker's GSPO-token: s_t has the value
of the sequence ratio exp(mean of (log p - log q) over the sequence_ratio_mask tokens) and the
gradient of token t's own ratio. stable_reinforce's formula is not published by Tinker; this
is Thinker's reading of it (TRAINING_GUIDE.md says what was assumed).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

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


def _sequence_mask(inputs: LossInputs) -> Tensor:
    """The tokens a sequence-level quantity averages over: the datum's `sequence_ratio_mask`
    where it has one, else the tokens with a non-zero advantage (the sampled tokens of the
    cookbook's datums, whose prompt tokens carry advantage 0 and logprob 0)."""
    if "sequence_ratio_mask" in inputs:
        return inputs["sequence_ratio_mask"] != 0
    return inputs["advantages"] != 0


def gspo(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    advantages_N = inputs["advantages"]
    log_ratio_N = logprobs_N.detach() - inputs["logprobs"]
    in_ratio_N = _sequence_mask(inputs)
    # The mean over no token is 0 (ratio 1), not NaN: such a datum trains nothing anyway.
    count = in_ratio_N.sum().clamp(min=1)
    sequence_log_ratio = (log_ratio_N * in_ratio_N).sum() / count
    ratio_N = torch.exp(sequence_log_ratio + logprobs_N - logprobs_N.detach())
    low, high = _thresholds(ratio_N, inputs, config, 1 - 3e-4, 1 + 4e-4)
    clipped_N = torch.clamp(ratio_N, low, high)
    return -torch.minimum(ratio_N * advantages_N, clipped_N * advantages_N).sum()


def stable_reinforce(logprobs_N: Tensor, inputs: LossInputs, config: LossConfig) -> Tensor:
    log_ratio_N = logprobs_N - inputs["logprobs"]
    ratio_N = torch.exp(log_ratio_N)
    _, high = _thresholds(ratio_N, inputs, config, 0.0, 2.0)
    weight_N = torch.minimum(ratio_N, high).detach()
    policy = -(weight_N * logprobs_N * inputs["advantages"]).sum()
    # k3 estimate of KL(q || p) on the sampled tokens: >= 0, and 0 where p = q.
    kl_N = (ratio_N - 1 - log_ratio_N) * _sequence_mask(inputs)
    return policy + config.get("kl_coeff", 0.0) * kl_N.sum()


LOSS_FNS: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "importance_sampling": importance_sampling,
    "ppo": ppo,
    "cispo": cispo,
    "dro": dro,
    "gspo": gspo,
    "stable_reinforce": stable_reinforce,
}

REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "cross_entropy": ("target_tokens", "weights"),
    "importance_sampling": ("target_tokens", "logprobs", "advantages"),
    "ppo": ("target_tokens", "logprobs", "advantages"),
    "cispo": ("target_tokens", "logprobs", "advantages"),
    "dro": ("target_tokens", "logprobs", "advantages"),
    "gspo": ("target_tokens", "logprobs", "advantages"),
    "stable_reinforce": ("target_tokens", "logprobs", "advantages"),
}

# Inputs a datum may carry besides the required ones: per-token clip thresholds, which take
# the place of loss_fn_config's for that datum's tokens, and the tokens a sequence-level
# ratio or penalty covers.
_CLIPS = ("clip_low_threshold", "clip_high_threshold")
OPTIONAL_INPUTS: dict[str, tuple[str, ...]] = {
    "ppo": _CLIPS,
    "cispo": _CLIPS,
    "gspo": (*_CLIPS, "sequence_ratio_mask"),
    "stable_reinforce": ("clip_high_threshold", "sequence_ratio_mask"),
}

CONFIG_KEYS: dict[str, frozenset[str]] = {
    "cross_entropy": frozenset(),
    "importance_sampling": frozenset(),
    "ppo": frozenset({"clip_low_threshold", "clip_high_threshold"}),
    "cispo": frozenset({"clip_low_threshold", "clip_high_threshold"}),
    "dro": frozenset({"beta"}),
    "gspo": frozenset(_CLIPS),
    "stable_reinforce": frozenset({"kl_coeff", "clip_high_threshold"}),
}


def inputs_read(name: str, datum_inputs: Collection[str], index: int) -> tuple[str, ...]:
    """The inputs of datum `index` that loss `name` reads: its required ones and the optional
    ones the datum has. A clip threshold the loss would not read is refused, not ignored."""
    unread = [k for k in _CLIPS if k in datum_inputs and k not in OPTIONAL_INPUTS.get(name, ())]
    if unread:
        readers = sorted(n for n, keys in OPTIONAL_INPUTS.items() if unread[0] in keys)
        raise ConfigError(
            f"datum {index}: loss {name!r} does not read the input {unread[0]!r} "
            f"(losses that do: {readers}); remove it or choose one of those losses"
        )
    optional = tuple(k for k in OPTIONAL_INPUTS.get(name, ()) if k in datum_inputs)
    return REQUIRED_INPUTS[name] + optional


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
    for key, value in (config or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(
                f"loss_fn_config[{key!r}] for {name!r} must be a number, got {value!r}"
            )
    return LOSS_FNS[name]
