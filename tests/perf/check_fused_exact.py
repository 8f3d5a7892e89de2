"""On CUDA: the fused kernels change no result beyond bf16 rounding. Computes the same
batch's target logprobs and LoRA gradients with THINKER_FUSED_KERNELS on and off and prints
the largest differences (JSON). Usage: PYTHONPATH=backend python tests/perf/check_fused_exact.py"""

from __future__ import annotations

import json
import os

import torch

from thinker.engine.local import models
from thinker.engine.local.forward import target_logprobs


def run(fused: bool, model_name: str, tokens: list[list[int]]) -> tuple[torch.Tensor, dict]:
    os.environ["THINKER_FUSED_KERNELS"] = "1" if fused else "0"
    placement = models.Placement(torch.device("cuda"), torch.bfloat16, None)
    base = models.load_base_model(model_name, placement)
    targets = models.lora_target_modules(base, True, True, True)
    model = models.attach_lora(base, 16, 0, targets)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.01, generator=torch.Generator("cuda").manual_seed(1))
    lps = target_logprobs(
        model, tokens, [torch.tensor(t[1:] + [0]) for t in tokens], placement.device
    )
    loss = -sum(lp.sum() for lp in lps)
    loss.backward()
    grads = {n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None}
    return torch.cat(lps).float(), {"loss": loss.item(), "grads": grads}


if __name__ == "__main__":
    name = "thinker/random-qwen3-0.6b"
    g = torch.Generator().manual_seed(0)
    tokens = [torch.randint(0, 150_000, (1024,), generator=g).tolist() for _ in range(4)]
    plain_lp, plain = run(False, name, tokens)
    fused_lp, fused = run(True, name, tokens)
    rel = max(
        ((fused["grads"][n] - g_).norm() / g_.norm().clamp_min(1e-12)).item()
        for n, g_ in plain["grads"].items()
    )
    print(
        json.dumps(
            {
                "model": name,
                "loss_plain": plain["loss"],
                "loss_fused": fused["loss"],
                "loss_rel_diff": abs(fused["loss"] - plain["loss"]) / abs(plain["loss"]),
                "logprob_max_abs_diff": (fused_lp - plain_lp).abs().max().item(),
                "lora_grad_max_rel_diff": rel,
            }
        )
    )
