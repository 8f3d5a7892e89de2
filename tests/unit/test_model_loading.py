"""Base models load from safetensors only: a pickled checkpoint (which can run code when
loaded) is refused, and a model's own Python code is not run unless allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from thinker.engine.local.models import Placement, load_base_model
from thinker.errors import BackendError

CPU = Placement(torch.device("cpu"), torch.float32, None)


def _saved_tiny(directory: Path) -> Path:
    model = load_base_model("thinker/tiny", CPU)
    model.save_pretrained(directory)
    return directory


def test_a_safetensors_directory_loads_with_the_same_weights(tmp_path: Path) -> None:
    directory = _saved_tiny(tmp_path / "tiny")
    assert (directory / "model.safetensors").is_file()
    loaded = load_base_model(str(directory), CPU)
    reference = load_base_model("thinker/tiny", CPU)
    for (name, a), (_, b) in zip(
        loaded.state_dict().items(), reference.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_pickled_checkpoint_is_refused(tmp_path: Path) -> None:
    directory = _saved_tiny(tmp_path / "tiny")
    state = load_base_model(str(directory), CPU).state_dict()
    (directory / "model.safetensors").unlink()
    torch.save(state, directory / "pytorch_model.bin")
    with pytest.raises(BackendError, match="cannot load base model"):
        load_base_model(str(directory), CPU)
