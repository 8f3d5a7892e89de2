"""The fused decode step (engine/local/fused_decode.py) against transformers' own layers.

On the CPU the fused step runs its torch operations (the Triton kernels are CUDA's; the CUDA
tests compare them): its logits must be those of the same shared-prompt decode through the
model's layers, step by step (its prefill of three ragged prompts included), for each family
it takes (Llama with biases, Qwen2's q/k/v biases, Qwen3's heads' norms), with a live LoRA
adapter, with the adapter off, and after the
adapter trains; the model's weights come back untouched; other models decode as before.
"""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel
from tests.support.prefix_decode import shared_decode
from transformers import (
    AutoModelForCausalLM,
    GemmaConfig,
    LlamaConfig,
    PretrainedConfig,
    Qwen2Config,
    Qwen3Config,
)

from thinker.engine.local import attention, prefix
from thinker.engine.local.fused_decode import FusedDecode
from thinker.engine.local.models import attach_lora, lora_target_modules

torch.set_num_threads(1)
# Qwen2 and Qwen3 tie the output layer to the embedding, and the tests adapt the output layer:
# PEFT warns that a merge would untie them (the fused step keeps its own folded copy).
pytestmark = pytest.mark.filterwarnings("ignore:Model has `tie_word_embeddings=True`")
SMALL = {
    "vocab_size": 384,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": None,
}
CONFIGS = {
    "llama-biases": lambda: LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True),
    "qwen2": lambda: Qwen2Config(**SMALL, tie_word_embeddings=True),
    "qwen3": lambda: Qwen3Config(**SMALL, head_dim=32, tie_word_embeddings=True),
}
PROMPTS = [list(range(5, 45)), list(range(50, 67)), list(range(100, 103))]
COUNTS = [3, 1, 4]


def _model(config: PretrainedConfig, train_unembed: bool = True) -> PeftModel:
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    attention.install(base)  # as load_base_model does: the prefill keeps the prompts' keys
    for name, p in base.named_parameters():  # biases and norms away from their 0 and 1
        if "bias" in name or "norm" in name:
            torch.nn.init.normal_(p, mean=1.0 if "norm" in name else 0.0, std=0.1)
    targets = lora_target_modules(
        base, train_attn=True, train_mlp=True, train_unembed=train_unembed
    )
    model = attach_lora(base, rank=4, seed=0, targets=targets)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    return model.eval()


def _decode(model: PeftModel, fused: bool, steps: int = 12) -> torch.Tensor:
    decoder = prefix.PrefixDecoder(model, model.config, graphs=False, fused=fused)
    return shared_decode(decoder, PROMPTS, COUNTS, steps)


def _ran(model: PeftModel) -> str:
    """How the last decode ran: "fused", or through the layers ("merged", "off")."""
    return prefix._CAPTURES[model].cache.layout.adapter


@pytest.mark.parametrize("name", sorted(CONFIGS))
@torch.inference_mode()
def test_the_fused_step_computes_what_the_layers_compute(monkeypatch, name: str) -> None:  # noqa: ANN001
    monkeypatch.setattr(prefix, "TOKEN_BUCKET", 8)  # 12 steps cross a bucket boundary
    model = _model(CONFIGS[name]())
    weights = {n: p.clone() for n, p in model.named_parameters()}
    expected = _decode(model, fused=False)
    assert _ran(model) == "merged"
    got = _decode(model, fused=True)
    assert _ran(model) == "fused"
    assert torch.allclose(got, expected, atol=1e-5), (got - expected).abs().max()
    for n, p in model.named_parameters():  # the layers' decode swaps merged weights in
        assert torch.equal(p, weights[n]), n
    # With the adapter off, the same capture decodes the base model.
    with model.disable_adapter():
        base = _decode(model, fused=True)
        assert _ran(model) == "fused"
        base_expected = _decode(model, fused=False)
        assert _ran(model) == "off"
    assert torch.allclose(base, base_expected, atol=1e-5)
    assert not torch.allclose(base, got, atol=1e-3)


@torch.inference_mode()
def test_the_fused_weights_follow_the_adapter_as_it_trains() -> None:
    model = _model(CONFIGS["qwen3"](), train_unembed=False)
    _decode(model, fused=True, steps=3)
    fused = prefix._CAPTURES[model].merged
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.add_(0.05)  # as an optimizer step would
    got = _decode(model, fused=True, steps=6)
    assert prefix._CAPTURES[model].merged is fused  # kept, refreshed at the prefill
    assert torch.allclose(got, _decode(model, fused=False, steps=6), atol=1e-5)


def test_models_outside_the_family_decode_through_their_layers() -> None:
    gemma = GemmaConfig(**SMALL, head_dim=16)  # (1 + w) norms, scaled embeddings
    model = _model(gemma)
    assert FusedDecode.of(model) is None
    with torch.inference_mode():
        got = _decode(model, fused=True, steps=3)
        assert _ran(model) == "merged"
        assert torch.equal(got, _decode(model, fused=False, steps=3))
