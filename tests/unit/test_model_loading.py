"""Base models load from safetensors only: a pickled checkpoint (which can run code when
loaded) is refused, and a model's own Python code is not run unless allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from thinker.engine.local.models import Placement, load_base_model, load_tokenizer
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


def test_a_random_model_of_a_real_shape_decodes_any_id_of_its_vocabulary() -> None:
    """The random Qwen3 shape samples ids up to 151,935 while its byte tokenizer has 384:
    every id decodes (past 384, as the byte it indexes modulo 256), and text round-trips."""
    tokenizer = load_tokenizer("thinker/random-qwen3-0.6b")
    text = "Q: 2+2? A: 4"
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False).input_ids) == text
    q = tokenizer("Q", add_special_tokens=False).input_ids[0]
    # q + 512 and q + 128,000 are Q again; (151,935 - 3) % 256 = 124 is "|"
    assert tokenizer.decode([q + 512, 151_935, q + 256 * 500]) == "Q|Q"
    assert isinstance(tokenizer.decode(list(range(384, 151_936, 97))), str)
