"""The fused decode step's own Triton kernels (fused_decode.py): the heads' RMSNorm and RoPE,
and SiLU(gate) * up. Each reproduces transformers' arithmetic (fused_decode's torch versions,
which the CPU runs and the CUDA tests compare against) within one rounding of the model's dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: fused_decode runs its torch versions
    triton = None


def available() -> bool:
    return triton is not None


def heads(
    qkv: Tensor, q_norm: tuple[Tensor, float] | None, k_norm: tuple[Tensor, float] | None,
    position_B: Tensor, cos: Tensor, sin: Tensor, q_heads: int, kv_heads: int, head_dim: int,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The step's query (B, q heads, D) and key and value (B, kv heads, D each, views of one
    buffer with the same strides) from the stacked q|k|v projection (B, (q + 2 kv) x D)."""
    b = qkv.shape[0]
    q = torch.empty((b, q_heads, head_dim), dtype=qkv.dtype, device=qkv.device)
    kv = torch.empty((b, 2, kv_heads, head_dim), dtype=qkv.dtype, device=qkv.device)
    norm = q_norm is not None and k_norm is not None
    q_w, eps = q_norm if q_norm is not None else (q, 0.0)
    k_w = k_norm[0] if k_norm is not None else q
    assert qkv.stride(1) == 1 and cos.stride(1) == 1 and sin.stride() == cos.stride()
    _heads_kernel[(b, q_heads + kv_heads)](
        qkv, q, kv, position_B, cos, sin, q_w, k_w, eps,
        qkv.stride(0), q.stride(0), q.stride(1), kv.stride(0), kv.stride(1), kv.stride(2),
        cos.stride(0),
        Q_HEADS=q_heads, KV_HEADS=kv_heads, DIM=head_dim,
        DIM_PAD=triton.next_power_of_2(head_dim), NORM=norm,
    )  # fmt: skip
    return q, kv[:, 0], kv[:, 1]


def silu_mul(gate_up: Tensor) -> Tensor:
    """SiLU(gate) * up of the stacked gate|up projection (B, 2 I) -> (B, I)."""
    b, width = gate_up.shape
    inner = width // 2
    out = torch.empty((b, inner), dtype=gate_up.dtype, device=gate_up.device)
    block = 1024
    _silu_mul_kernel[(b, triton.cdiv(inner, block))](
        gate_up, out, gate_up.stride(0), out.stride(0), inner, BLOCK=block
    )
    return out


if triton is not None:

    @triton.jit
    def _heads_kernel(
        QKV, Q, KV, Pos, Cos, Sin, QW, KW, eps,
        s_qkv, s_qb, s_qh, s_kvb, s_kvp, s_kvh, s_cos,
        Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, DIM: tl.constexpr,
        DIM_PAD: tl.constexpr, NORM: tl.constexpr,
    ):  # fmt: skip
        """One (row, head) of q then k: its RMSNorm (NORM), then the rotary embedding; a key
        head also copies its value head beside it."""
        row = tl.program_id(0)
        head = tl.program_id(1)
        half = DIM // 2
        offs = tl.arange(0, DIM_PAD)
        valid = offs < DIM
        partner = tl.where(offs < half, offs + half, offs - half)
        src = QKV + row * s_qkv + head * DIM
        x = tl.load(src + offs, mask=valid, other=0.0).to(tl.float32)
        xp = tl.load(src + partner, mask=valid, other=0.0).to(tl.float32)
        if NORM:  # transformers: weight * (x * rstd).to(dtype), in the model's dtype
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / DIM + eps)
            if head < Q_HEADS:
                w = tl.load(QW + offs, mask=valid, other=0.0).to(tl.float32)
                wp = tl.load(QW + partner, mask=valid, other=0.0).to(tl.float32)
            else:
                w = tl.load(KW + offs, mask=valid, other=0.0).to(tl.float32)
                wp = tl.load(KW + partner, mask=valid, other=0.0).to(tl.float32)
            dtype = Q.dtype.element_ty
            x = (w * (x * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
            xp = (wp * (xp * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        pos = tl.load(Pos + row)
        c = tl.load(Cos + pos * s_cos + offs, mask=valid, other=0.0).to(tl.float32)
        s = tl.load(Sin + pos * s_cos + offs, mask=valid, other=0.0).to(tl.float32)
        y = x * c + tl.where(offs < half, -xp, xp) * s
        if head < Q_HEADS:
            tl.store(Q + row * s_qb + head * s_qh + offs, y.to(Q.dtype.element_ty), mask=valid)
        else:
            kh = head - Q_HEADS
            dst = KV + row * s_kvb + kh * s_kvh + offs
            tl.store(dst, y.to(KV.dtype.element_ty), mask=valid)
            v = tl.load(QKV + row * s_qkv + (Q_HEADS + KV_HEADS + kh) * DIM + offs, mask=valid)
            tl.store(dst + s_kvp, v, mask=valid)

    @triton.jit
    def _silu_mul_kernel(GU, Out, s_gu, s_out, inner, BLOCK: tl.constexpr):
        """transformers' act_fn(gate) * up: the SiLU rounded to the model's dtype first."""
        row = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < inner
        gate = tl.load(GU + row * s_gu + offs, mask=mask, other=0.0).to(tl.float32)
        up = tl.load(GU + row * s_gu + inner + offs, mask=mask, other=0.0)
        act = (gate / (1.0 + tl.exp(-gate))).to(up.dtype)
        out = act.to(tl.float32) * up.to(tl.float32)
        tl.store(Out + row * s_out + offs, out.to(Out.dtype.element_ty), mask=mask)
