"""A decode step's draw in one pass over the logits: each row's next token and its logprob.

The plain draw (sampling.py) takes a log-softmax of every row's logits in fp32, an exp, then
`torch.multinomial` (exponential noise, a division, an argmax), then gathers the token's
logprob and copies both into the call's buffers: about ten kernels a call, each reading or
writing a rows x vocabulary fp32 array (39 MB at 64 rows of Qwen3's 151,936). Here one
Triton kernel reads the model-dtype logits once and keeps, for its slice of a row, the
running log-sum-exp and the Gumbel-max candidate, argmax_v(logit_v / T + G_v) with
G_v = -log(-log U_v); a second merges the slices and writes the token (to the step's token
buffer and the call's history) and its logprob, log_softmax(logits)[token] as the plain
draw reports it (of the logits, not the tempered ones).

Gumbel-max is an exact draw from softmax(logits / T), as multinomial is, but from other
random numbers: for a seed the tokens differ from the plain draw's. Each step's noise comes
from Triton's Philox generator keyed by a seed the call's own host generator gives (one per
step) and by the row and vocabulary index, so a call's draws depend on its seed only, not on
what decodes beside it or how the vocabulary is cut into slices.

Temperature only: top-k, top-p, greedy decoding and kept top-k logprobs take the plain draw.
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: sampling.py draws with torch
    triton = None

BLOCK = 2048  # vocabulary entries an iteration of the slice kernel takes
SEED_BOUND = 2**31 - 1  # step seeds below this: one 32-bit kernel argument type


def available(logits: Tensor) -> bool:
    """Whether the kernel can draw from `logits` (rows, vocabulary): CUDA, Triton, and every
    (row, vocabulary index) within the 32-bit counter the noise is keyed by."""
    rows, vocab = logits.shape
    return (
        triton is not None
        and logits.device.type == "cuda"
        and logits.stride(1) == 1
        and rows * vocab < 2**31
    )


def slices_for(rows: int, vocab: int, device: torch.device) -> int:
    """Slices per row: enough programs for two waves over the card's SMs, none shorter than
    one BLOCK."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(-(-2 * sms // rows), -(-vocab // BLOCK)))


def draw(
    logits_NV: Tensor,
    temperature: float,
    seed: int,
    token_N: Tensor,
    history_N: Tensor,
    logprob_N: Tensor,
    slices: int | None = None,
) -> None:
    """Draw each row's next token from softmax(logits / temperature): written to `token_N`
    and `history_N` (int64, any stride), its logprob under the untempered logits to
    `logprob_N` (fp32). `seed` (0 <= seed < SEED_BOUND) keys this step's noise."""
    assert triton is not None and 0 <= seed < SEED_BOUND and temperature > 0
    rows, vocab = logits_NV.shape
    if slices is None:
        slices = slices_for(rows, vocab, logits_NV.device)
    width = -(-vocab // slices)  # vocabulary entries a slice takes
    slices = -(-vocab // width)  # none empty
    partial = torch.empty((4, rows, slices), dtype=torch.float32, device=logits_NV.device)
    _slice_kernel[(rows, slices)](
        logits_NV, partial, logits_NV.stride(0), vocab, width, 1.0 / temperature, seed,
        BLOCK=min(BLOCK, triton.next_power_of_2(width)),
    )  # fmt: skip
    _merge_kernel[(rows,)](
        logits_NV, partial, token_N, history_N, logprob_N, logits_NV.stride(0),
        token_N.stride(0), history_N.stride(0), logprob_N.stride(0),
        SLICES=slices, SLICES_PAD=triton.next_power_of_2(slices),
    )  # fmt: skip


if triton is not None:

    @triton.jit(do_not_specialize=["seed"])
    def _slice_kernel(
        Logits, Partial, s_row, vocab, width, inv_temperature, seed, BLOCK: tl.constexpr
    ):
        """One (row, slice): its maximum logit, sum of exp(logit - maximum), and the best
        tempered logit plus Gumbel noise with its index; stored in Partial[0..3, row, slice]."""
        row = tl.program_id(0)
        piece = tl.program_id(1)
        rows = tl.num_programs(0)
        slices = tl.num_programs(1)
        first = piece * width
        end = tl.minimum(first + width, vocab)
        top = tl.max(tl.full([BLOCK], float("-inf"), tl.float32), 0)
        total = tl.sum(tl.zeros([BLOCK], tl.float32), 0)
        best = top
        best_at = tl.sum(tl.zeros([BLOCK], tl.int32), 0)
        for start in range(first, end, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            valid = offs < end
            x = tl.load(Logits + row * s_row + offs, mask=valid, other=float("-inf"))
            x = x.to(tl.float32)
            higher = tl.maximum(top, tl.max(x, 0))
            total = total * tl.exp(top - higher) + tl.sum(tl.exp(x - higher), 0)
            top = higher
            u = tl.maximum(tl.rand(seed, row * vocab + offs), 1.0e-30)
            score = tl.where(valid, x * inv_temperature - tl.log(-tl.log(u)), float("-inf"))
            here = tl.max(score, 0)
            at = tl.argmax(score, 0) + start
            better = here > best
            best = tl.where(better, here, best)
            best_at = tl.where(better, at, best_at)
        out = Partial + row * slices + piece
        tl.store(out, top)
        tl.store(out + rows * slices, total)
        tl.store(out + 2 * rows * slices, best)
        tl.store(out + 3 * rows * slices, best_at.to(tl.float32))  # exact below 2**24

    @triton.jit
    def _merge_kernel(
        Logits, Partial, Token, History, Logprob, s_row, s_token, s_history, s_logprob,
        SLICES: tl.constexpr, SLICES_PAD: tl.constexpr,
    ):  # fmt: skip
        """One row: its slices' log-sum-exps merged, the best candidate taken."""
        row = tl.program_id(0)
        rows = tl.num_programs(0)
        offs = tl.arange(0, SLICES_PAD)
        valid = offs < SLICES
        part = Partial + row * SLICES + offs
        top = tl.load(part, mask=valid, other=float("-inf"))
        total = tl.load(part + rows * SLICES, mask=valid, other=0.0)
        best = tl.load(part + 2 * rows * SLICES, mask=valid, other=float("-inf"))
        best_at = tl.load(part + 3 * rows * SLICES, mask=valid, other=0.0)
        highest = tl.max(top, 0)
        log_total = highest + tl.log(tl.sum(total * tl.exp(top - highest), 0))
        token = tl.sum(tl.where(offs == tl.argmax(best, 0), best_at, 0.0), 0).to(tl.int64)
        logit = tl.load(Logits + row * s_row + token).to(tl.float32)
        tl.store(Token + row * s_token, token)
        tl.store(History + row * s_history, token)
        tl.store(Logprob + row * s_logprob, logit - log_total)
