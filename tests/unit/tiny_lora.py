"""The built-in tiny model on the CPU with a LoRA adapter whose B is not zero, so the adapter
changes the logits (a fresh adapter starts with B = 0 and changes nothing)."""

from __future__ import annotations

import torch
from peft import PeftModel

from thinker.engine.local import forward
from thinker.engine.local.models import Placement, attach_lora, load_base_model, lora_target_modules


def tiny_lora_model(train_unembed: bool = False, b_std: float = 0.05, seed: int = 0) -> PeftModel:
    base = load_base_model("thinker/tiny", Placement(torch.device("cpu"), torch.float32, None))
    targets = lora_target_modules(
        base, train_attn=True, train_mlp=True, train_unembed=train_unembed
    )
    model = attach_lora(base, rank=4, seed=0, targets=targets)
    g = torch.Generator().manual_seed(seed)  # the same model in every test run
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=b_std, generator=g)
    return model


def random_batch(lengths: list[int], seed: int) -> tuple[list[list[int]], list[torch.Tensor]]:
    """Random inputs and targets (token ids of the tiny model's vocabulary) of these lengths."""
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randint(3, 384, (n,), generator=g).tolist() for n in lengths]
    return inputs, [torch.randint(3, 384, (n,), generator=g) for n in lengths]


def logprobs_and_grads(
    model: PeftModel, inputs: list[list[int]], targets: list[torch.Tensor], pack: bool
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """`target_logprobs` of the batch and, when gradients are on, the gradients of their sum."""
    model.zero_grad(set_to_none=True)
    lps = forward.target_logprobs(model, inputs, targets, torch.device("cpu"), pack=pack)
    if torch.is_grad_enabled():
        torch.stack([lp.sum() for lp in lps]).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return [lp.detach() for lp in lps], grads


def each_alone(
    model: PeftModel, inputs: list[list[int]], targets: list[torch.Tensor]
) -> list[torch.Tensor]:
    """Each sequence's logprobs computed on its own (no batch, no padding)."""
    return [
        forward.target_logprobs(model, [x], [t], torch.device("cpu"))[0].detach()
        for x, t in zip(inputs, targets, strict=True)
    ]
