"""The built-in tiny model on the CPU with a LoRA adapter whose B is not zero, so the adapter
changes the logits (a fresh adapter starts with B = 0 and changes nothing)."""

from __future__ import annotations

import torch
from peft import PeftModel

from thinker.engine.local.models import Placement, attach_lora, load_base_model, lora_target_modules


def tiny_lora_model(train_unembed: bool = False, b_std: float = 0.05) -> PeftModel:
    base = load_base_model("thinker/tiny", Placement(torch.device("cpu"), torch.float32, None))
    targets = lora_target_modules(
        base, train_attn=True, train_mlp=True, train_unembed=train_unembed
    )
    model = attach_lora(base, rank=4, seed=0, targets=targets)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=b_std)
    return model
