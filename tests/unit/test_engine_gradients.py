"""The local engine's gradients equal autograd of each loss formula written out by hand.

The reference recomputes every datum on its own (no padding, no batching) through a copy of
the same adapter, applies the formula from TINKER_API.md directly, and backpropagates.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tinker import types
from torch import Tensor

import thinker

Formula = Callable[[Tensor, dict[str, Tensor]], Tensor]


def _ce(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    return -(x["weights"] * lp).sum()


def _is(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    return -(torch.exp(lp - x["logprobs"]) * x["advantages"]).sum()


def _ppo(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    r = torch.exp(lp - x["logprobs"])
    a = x["advantages"]
    return -torch.minimum(r * a, torch.clamp(r, 0.9, 1.1) * a).sum()


def _cispo(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    r = torch.exp(lp - x["logprobs"]).detach()
    return -(torch.clamp(r, 0.0, 4.0) * lp * x["advantages"]).sum()


def _dro(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    return -(lp * x["advantages"] - 0.5 * 0.3 * (lp - x["logprobs"]) ** 2).sum()


def _gspo(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    in_ratio = x["sequence_ratio_mask"] != 0
    s = torch.exp((lp.detach() - x["logprobs"])[in_ratio].mean())
    r = s * torch.exp(lp - lp.detach())  # s's value, token t's own gradient
    a = x["advantages"]
    return -torch.minimum(r * a, torch.clamp(r, 0.05, 20.0) * a).sum()


def _stable_reinforce(lp: Tensor, x: dict[str, Tensor]) -> Tensor:
    r = torch.exp(lp - x["logprobs"])
    kl = r - 1 - (lp - x["logprobs"])
    return -(torch.clamp(r, max=1.5).detach() * lp * x["advantages"]).sum() + 0.1 * kl.sum()


CASES: dict[str, tuple[Formula, dict[str, float]]] = {
    "cross_entropy": (_ce, {}),
    "importance_sampling": (_is, {}),
    "ppo": (_ppo, {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1}),
    "cispo": (_cispo, {}),
    "dro": (_dro, {"beta": 0.3}),
    "gspo": (_gspo, {"clip_low_threshold": 0.05, "clip_high_threshold": 20.0}),
    "stable_reinforce": (_stable_reinforce, {"kl_coeff": 0.1, "clip_high_threshold": 1.5}),
}


@pytest.fixture
def client(tmp_path: Path):  # type: ignore[no-untyped-def]
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move B off zero so that every LoRA weight gets a gradient
        for name, p in tc._model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return tc


def _data(kind: str) -> list[types.Datum]:
    gen = torch.Generator().manual_seed(1)
    data = []
    for n in (7, 12):  # different lengths: the engine pads, the reference does not
        tokens = torch.randint(3, 259, (n + 1,), generator=gen)
        inputs: dict[str, Tensor] = {"target_tokens": tokens[1:]}
        if kind == "cross_entropy":
            inputs["weights"] = (torch.rand(n, generator=gen) > 0.3).float()
        else:
            inputs["logprobs"] = -torch.rand(n, generator=gen) * 6 - 2
            inputs["advantages"] = torch.randn(n, generator=gen)
        if kind == "gspo":  # the first two tokens stand for a prompt, outside the ratio
            inputs["sequence_ratio_mask"] = (torch.arange(n) >= 2).float()
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1].tolist()), loss_fn_inputs=inputs
            )
        )
    return data


def _reference(
    model: torch.nn.Module, data: list[types.Datum], formula: Formula
) -> tuple[float, list[Tensor]]:
    total = torch.zeros(())
    logprobs = []
    for d in data:
        ids = torch.tensor([d.model_input.to_ints()])
        logits = model(input_ids=ids).logits[0].float()
        x = {k: v.to_torch() for k, v in d.loss_fn_inputs.items()}
        lp = torch.log_softmax(logits, -1).gather(-1, x["target_tokens"][:, None]).squeeze(-1)
        logprobs.append(lp.detach())
        total = total + formula(lp, x)
    total.backward()
    return total.item(), logprobs


def _assert_grad_close(got: Tensor, want: Tensor) -> None:
    # fp32 summation order differs between the padded batch and the one-by-one reference
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))


def _lora_grads(model: torch.nn.Module) -> dict[str, Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if "lora_" in n}


@pytest.mark.parametrize("loss_fn", list(CASES))
def test_engine_gradient_matches_autograd_of_the_formula(client, loss_fn: str) -> None:  # type: ignore[no-untyped-def]
    formula, config = CASES[loss_fn]
    reference = copy.deepcopy(client._model)
    data = _data(loss_fn)

    out = client.forward_backward(data, loss_fn, config).result()
    ref_loss, ref_logprobs = _reference(reference, data, formula)

    assert out.metrics["loss:sum"] == pytest.approx(ref_loss, rel=1e-5, abs=1e-5)
    for got, want in zip(out.loss_fn_outputs, ref_logprobs, strict=True):
        torch.testing.assert_close(got["logprobs"].to_torch(), want, rtol=1e-5, atol=1e-5)
    engine_grads, ref_grads = _lora_grads(client._model), _lora_grads(reference)
    assert set(engine_grads) == set(ref_grads) and len(engine_grads) > 0
    for name, grad in engine_grads.items():
        assert grad.abs().sum() > 0, f"{name} got no gradient"
        _assert_grad_close(grad, ref_grads[name])


def test_custom_loss_gradient_matches_autograd(client) -> None:  # type: ignore[no-untyped-def]
    """A custom mean-of-squares loss on the logprobs, pushed back through the model."""
    reference = copy.deepcopy(client._model)
    data = _data("cross_entropy")

    def custom(batch: list[types.Datum], logprobs: list[Tensor]) -> tuple[Tensor, dict[str, float]]:
        loss = sum((lp**2).mean() for lp in logprobs)
        return loss, {"custom:value": float(loss.detach())}

    out = client.forward_backward_custom(data, custom).result()
    ref_loss, _ = _reference(reference, data, lambda lp, x: (lp**2).mean())
    assert out.metrics["loss:sum"] == pytest.approx(ref_loss, rel=1e-5)
    assert out.metrics["custom:value"] == pytest.approx(ref_loss, rel=1e-5)
    ref_grads = _lora_grads(reference)
    for name, grad in _lora_grads(client._model).items():
        _assert_grad_close(grad, ref_grads[name])


def test_gradients_accumulate_until_optim_step(client) -> None:  # type: ignore[no-untyped-def]
    data = _data("cross_entropy")
    client.forward_backward(data, "cross_entropy").result()
    once = _lora_grads(client._model)
    client.forward_backward(data, "cross_entropy").result()
    twice = _lora_grads(client._model)
    for name in once:
        torch.testing.assert_close(twice[name], 2 * once[name])
    client.optim_step(types.AdamParams(learning_rate=0.0)).result()
    assert all(p.grad is None for n, p in client._model.named_parameters() if "lora_" in n)


def test_optim_step_is_adamw_with_the_given_hyperparameters(client) -> None:  # type: ignore[no-untyped-def]
    """One step from zero moments: p <- p (1 - lr wd) - lr * m_hat / (sqrt(v_hat) + eps)."""
    params = types.AdamParams(learning_rate=0.01, beta1=0.8, beta2=0.9, eps=1e-3, weight_decay=0.1)
    client.forward_backward(_data("cross_entropy"), "cross_entropy").result()
    before = {n: p.detach().clone() for n, p in client._model.named_parameters() if "lora_" in n}
    grads = _lora_grads(client._model)
    client.optim_step(params).result()
    for name, p in client._model.named_parameters():
        if "lora_" not in name:
            continue
        g = grads[name]
        m_hat = (1 - 0.8) * g / (1 - 0.8)
        v_hat = (1 - 0.9) * g**2 / (1 - 0.9)
        expected = before[name] * (1 - 0.01 * 0.1) - 0.01 * m_hat / (v_hat.sqrt() + 1e-3)
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7)


def test_grad_clip_norm_scales_the_gradient(client) -> None:  # type: ignore[no-untyped-def]
    """The reported norm is the pre-clip norm; the first moment (1 - beta1) g records the
    clipped gradient, whose norm is the limit."""
    client.forward_backward(_data("cross_entropy"), "cross_entropy").result()
    norm = math.sqrt(sum(float((g**2).sum()) for g in _lora_grads(client._model).values()))
    out = client.optim_step(types.AdamParams(learning_rate=0.0, grad_clip_norm=norm / 10)).result()
    assert out.metrics is not None
    assert out.metrics["grad_norm"] == pytest.approx(norm, rel=1e-5)
    exp_avg = [s["exp_avg"] for s in client._optimizer.state.values()]
    applied = math.sqrt(sum(float((m**2).sum()) for m in exp_avg)) / (1 - 0.9)
    assert applied == pytest.approx(norm / 10, rel=1e-4)
