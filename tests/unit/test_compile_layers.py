"""Compiled decoder layers (engine/local/models.py `compile_layers`, the CUDA fast path's
COMPILE part) compute what the eager layers compute: logprobs and LoRA gradients for packed
rows, a padded batch without gradients, and with the adapter off; dynamo traces each layer
whole (no graph breaks) and the layers share their compiled graphs; `fast.eager()` (the
sampling path) runs them eagerly on its own thread only. On the CPU Inductor
compiles to C++, so this runs in CI (about half a minute)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch
from tiny_lora import tiny_lora_model
from torch._dynamo.utils import counters

from thinker.engine.local import fast, forward
from thinker.engine.local.models import compile_layers

CPU = torch.device("cpu")


def _batch(lengths: list[int], seed: int) -> tuple[list[list[int]], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randint(3, 384, (n,), generator=g).tolist() for n in lengths]
    return inputs, [torch.randint(3, 384, (n,), generator=g) for n in lengths]


def _run(model, inputs, targets, pack: bool):  # noqa: ANN001, ANN202
    model.zero_grad(set_to_none=True)
    lps = forward.target_logprobs(model, inputs, targets, CPU, pack=pack)
    if torch.is_grad_enabled():
        torch.stack([lp.sum() for lp in lps]).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return [lp.detach() for lp in lps], grads


def test_compiled_layers_match_eager_layers() -> None:
    torch._dynamo.reset()
    counters.clear()
    model = tiny_lora_model()
    eager = {}
    packed = _batch([50, 13, 31, 7], seed=0)
    padded = _batch([40, 22, 31], seed=1)
    eager["packed"] = _run(model, *packed, pack=True)
    with torch.no_grad():
        eager["padded"] = _run(model, *padded, pack=False)
        with model.disable_adapter():
            eager["off"] = _run(model, *padded, pack=False)

    compile_layers(model.get_base_model())
    compiled = {"packed": _run(model, *packed, pack=True)}
    with torch.no_grad():
        compiled["padded"] = _run(model, *padded, pack=False)
        with model.disable_adapter():
            compiled["off"] = _run(model, *padded, pack=False)

    assert counters["stats"]["calls_captured"] > 0  # dynamo really traced the layers
    assert not counters["graph_break"]
    # The layers share compiled graphs: one set per layer would be at least 2 x 3.
    assert counters["stats"]["unique_graphs"] < 2 * 3
    for case, (lps, grads) in eager.items():
        for a, b in zip(compiled[case][0], lps, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert compiled[case][1].keys() == grads.keys()
        for name, g in grads.items():
            torch.testing.assert_close(compiled[case][1][name], g, rtol=1e-4, atol=1e-5)
    assert eager["packed"][1]  # the packed case did compare gradients

    # Sampling's eager block runs the same layers without dynamo, on its own thread only
    # (after a reset, a compiled call traces again, which the counters show).
    torch._dynamo.reset()
    captured = counters["stats"]["calls_captured"]
    with fast.eager():
        inside = _run(model, *packed, pack=True)
        assert counters["stats"]["calls_captured"] == captured
        other = ThreadPoolExecutor(1).submit(_run, model, *packed, True).result()
    assert counters["stats"]["calls_captured"] > captured  # the other thread: compiled
    for a, b, c in zip(inside[0], other[0], eager["packed"][0], strict=True):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-5)
