"""Compiled decoder layers (engine/local/models.py `compile_layers`, the CUDA fast path's
COMPILE part) compute what the eager layers compute: logprobs and LoRA gradients for packed
rows, a padded batch without gradients, and with the adapter off; dynamo traces each layer
whole (no graph breaks) and the layers share their compiled graphs; a training client's
forward-only call reuses the training graph; `fast.eager()` (the sampling path) runs them
eagerly on its own thread only; flat packed rows take the form launched from Python.

What is ours here is how the layers are traced and wrapped, not how Inductor lowers a graph:
the engine compiles only on CUDA, where tests/integration/test_cuda_fast_path.py compares
Inductor's Triton code with the plain path. So on the CPU the layers compile with the
`aot_eager` backend: dynamo traces them and AOTAutograd builds their backward exactly as on the
GPU (graph breaks, shared graphs and recompiles show the same), and the traced graphs run
eagerly instead of as C++ that Inductor would spend 100 s building (CI, 2 cores)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from tinker import types
from tiny_lora import logprobs_and_grads, random_batch, tiny_lora_model
from torch._dynamo.utils import counters

from thinker.engine.local import attention, fast
from thinker.engine.local.models import (
    CPP_WRAPPER_MAX_TOKENS,
    Placement,
    _compiled_unless_eager,
    compile_layers,
    load_tokenizer,
)
from thinker.engine.local.training import LocalTrainingClient, LoraSpec


def test_compiled_layers_match_eager_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    counters.clear()
    model = tiny_lora_model()
    eager = {}
    packed = random_batch([50, 13, 31, 7], seed=0)
    padded = random_batch([40, 22, 31], seed=1)
    eager["packed"] = logprobs_and_grads(model, *packed, pack=True)
    with torch.no_grad():
        eager["padded"] = logprobs_and_grads(model, *padded, pack=False)
        with model.disable_adapter():
            eager["off"] = logprobs_and_grads(model, *padded, pack=False)

    compile_layers(model.get_base_model())
    compiled = {"packed": logprobs_and_grads(model, *packed, pack=True)}
    with torch.no_grad():
        compiled["padded"] = logprobs_and_grads(model, *padded, pack=False)
        with model.disable_adapter():
            compiled["off"] = logprobs_and_grads(model, *padded, pack=False)

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

    # Held-out evaluation (`forward`) on compiled layers reuses what training compiled: a
    # forward without gradients makes dynamo compile the layers again (as the last call here
    # shows), tens of seconds on a GPU model. The loss is the same either way.
    cpu = Placement(torch.device("cpu"), torch.float32, None)
    spec = LoraSpec("thinker/tiny", 4, 0, True, True, False)
    client = LocalTrainingClient("run", spec, model, load_tokenizer("thinker/tiny"), cpu, tmp_path)
    inputs, targets = random_batch([40, 40, 40], seed=2)
    batch = [
        types.Datum(
            model_input=types.ModelInput.from_ints(x),
            loss_fn_inputs={"target_tokens": t.tolist(), "weights": [1.0] * len(x)},
        )
        for x, t in zip(inputs, targets, strict=True)
    ]
    trained = client.forward_backward(batch, "cross_entropy").result().metrics["loss:sum"]
    graphs = counters["stats"]["unique_graphs"]
    evaluated = client.forward(batch, "cross_entropy").result().metrics["loss:sum"]
    assert counters["stats"]["unique_graphs"] == graphs
    assert evaluated == pytest.approx(trained, rel=1e-6)
    with torch.no_grad():  # what `forward` did before: a variant of its own
        logprobs_and_grads(model, inputs, targets, pack=False)
    assert counters["stats"]["unique_graphs"] > graphs

    # Sampling's eager block runs the same layers without dynamo, on its own thread only
    # (after a reset, a compiled call traces again, which the counters show).
    torch._dynamo.reset()
    captured = counters["stats"]["calls_captured"]
    with fast.eager():
        inside = logprobs_and_grads(model, *packed, pack=True)
        assert counters["stats"]["calls_captured"] == captured
        other = ThreadPoolExecutor(1).submit(logprobs_and_grads, model, *packed, True).result()
    assert counters["stats"]["calls_captured"] > captured  # the other thread: compiled
    for a, b, c in zip(inside[0], other[0], eager["packed"][0], strict=True):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-5)


def test_layer_calls_route_flat_rows_to_the_python_wrapper() -> None:
    """On CUDA each layer holds two compiled forms: kernels launched from C++ for batched rows,
    and from Python for flat packed rows (whose varlen attention op the C++ wrapper cannot
    call), for passes of many tokens and for passes that could run out of memory (an
    out-of-memory error in the C++ wrapper is a crash); `fast.eager()` bypasses both."""
    calls: list[str] = []

    def form(name: str) -> Callable[..., str]:
        def run(*args: object, **kwargs: object) -> str:
            calls.append(name)
            return name

        return run

    roomy = [True]
    forward = _compiled_unless_eager(form("python"), form("cpp"), form("eager"), lambda: roomy[0])
    assert forward(torch.zeros(2, 8, 4), position_ids=None) == "cpp"
    roomy[0] = False  # a pass near its memory budget, or after running out of memory
    assert forward(torch.zeros(2, 8, 4), position_ids=None) == "python"
    roomy[0] = True
    assert forward(torch.zeros(1, 8, 4), **{attention.FLAT_ROW_KWARG: torch.zeros(2)}) == "python"
    # A pass of many tokens: GPU-bound either way, and out of memory is an error, not a crash
    many = torch.zeros(2, CPP_WRAPPER_MAX_TOKENS // 2 + 1, 4)
    assert forward(hidden_states=many, position_ids=None) == "python"
    flat = {attention.FLAT_ROW_KWARG: torch.zeros(2)}
    with fast.eager():
        assert forward(torch.zeros(1, 8, 4), **flat) == "eager"
    assert calls == ["cpp", "python", "python", "python", "eager"]
