"""`thinker.ServiceClient` takes the tinker SDK's arguments (issue 18): each method below has
the parameters of `tinker.ServiceClient`'s (0.38, the version the project pins), in its order,
kinds and defaults, read from the SDK itself; and on the local engine they do what the SDK's
do: the backend by keyword, user metadata kept, `base_model` checked, the creation future
usable as the client, the `_async` twins giving the client itself."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest
import tinker
from tinker import types

import thinker
from thinker.errors import ConfigError

METHODS = [
    "__init__",
    "create_lora_training_client",
    "create_lora_training_client_async",
    "create_training_client_from_state",
    "create_training_client_from_state_async",
    "create_training_client_from_state_with_optimizer",
    "create_training_client_from_state_with_optimizer_async",
    "create_sampling_client",
    "create_sampling_client_async",
]


@pytest.mark.parametrize("name", METHODS)
def test_each_sdk_parameter_is_taken_the_same_way(name: str) -> None:
    sdk = inspect.signature(getattr(tinker.ServiceClient, name)).parameters
    ours = inspect.signature(getattr(thinker.ServiceClient, name)).parameters
    for param in sdk.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            assert any(p.kind is param.kind for p in ours.values()), f"{name} takes no **kwargs"
            continue
        assert param.name in ours, f"{name} lacks the SDK's {param.name!r}"
        mine = ours[param.name]
        assert mine.kind == param.kind, f"{name}({param.name}): {mine.kind} vs {param.kind}"
        assert mine.default == param.default, f"{name}({param.name}) default"
    positional = [p.name for p in sdk.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in ours.values()][: len(positional)] == positional  # same order


def test_the_backend_is_a_keyword_and_the_first_argument_is_user_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"ServiceClient\(backend='local'\)"):
        thinker.ServiceClient("local")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown argument"):
        thinker.ServiceClient(backend="local", storage_dri=tmp_path)
    monkeypatch.setenv("THINKER_BACKEND", "nowhere")
    with pytest.raises(ConfigError, match="unknown backend 'nowhere'"):
        thinker.ServiceClient()
    monkeypatch.delenv("THINKER_BACKEND")
    service = thinker.ServiceClient(
        {"team": "a"}, "project-1", display_name="d", storage_dir=tmp_path
    )
    assert service.backend == "local"
    assert (service.user_metadata, service.project_id, service.display_name) == (
        {"team": "a"},
        "project-1",
        "d",
    )


def _datum() -> types.Datum:
    tokens = list(range(5, 40))
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


def test_creation_calls_as_sdk_code_makes_them(tmp_path: Path) -> None:
    """The cookbook's ways: a creation future used as the client (deprecated, warned), the
    `_async` twins, user metadata, and `base_model` on the from-state calls."""
    service = thinker.ServiceClient({"team": "a"}, storage_dir=tmp_path, device="cpu")
    future = service.create_lora_training_client("thinker/tiny", rank=4, user_metadata={"k": "v"})
    with pytest.warns(FutureWarning, match="deprecated"):
        loss = future.forward_backward([_datum()], "cross_entropy").result().metrics["loss:sum"]
    assert loss > 0
    client = future.result()
    assert client.user_metadata == {"team": "a", "k": "v"}  # type: ignore[attr-defined]
    path = client.save_state("s").result().path

    async def twins() -> tuple[object, object]:
        resumed = await service.create_training_client_from_state_with_optimizer_async(
            path, base_model="thinker/tiny"
        )
        sampler = await service.create_sampling_client_async(base_model="thinker/tiny")
        return resumed, sampler

    resumed, sampler = asyncio.run(twins())
    assert type(resumed) is type(client) and resumed.step == client.step  # type: ignore[attr-defined]
    assert sampler.get_base_model() == "thinker/tiny"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="the checkpoint's base model is 'thinker/tiny'"):
        service.create_training_client_from_state(path, base_model="thinker/other").result()
    with pytest.raises(ConfigError, match="optimizer"):
        service.create_lora_training_client("thinker/tiny", optimizer=object())
