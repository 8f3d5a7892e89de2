"""A decode step's attention over the shared-prompt cache: one Triton kernel a layer.

Each row of a decode has one new query token, and attends to two runs of keys: its group's
prompt (kept once for the group) and its own new tokens. One program takes one (row, key
head): the query heads that share that key head are the rows of its tile (padded to 16, the
least `tl.dot` takes), so each key is read once per key head, not once per query head; the
softmax is accumulated online in fp32 over the prompt's keys, then the row's own. A group's
rows read the same prompt keys, which after the first come from the card's L2 cache.

Where rows x key heads are too few programs to fill the card (a few long rows), each (row,
key head) is cut into `splits` programs, each taking one slice of both runs, and the slices
are merged by their log-sum-exps (flash decoding).

This is the kernel general attention kernels lack for this shape: FlashAttention's forward
tiles are 128 queries tall, so a row's 1-8 queries per key head use a few percent of each
tile and the step becomes compute-bound (profiled in docs/benchmarks.md, run AB). PyTorch
2.11 does not expose FlashAttention's split-KV decode kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the cache falls back to eager products
    triton = None


def available(device: torch.device, dtype: torch.dtype, head_dim: int) -> bool:
    return triton is not None and device.type == "cuda" and dtype in _DTYPES and head_dim <= 256


_DTYPES = (torch.bfloat16, torch.float16)
CONFIG = (64, 4, 2)  # keys a loop iteration takes, warps, pipeline stages
LOG2_E = 1.4426950408889634


def splits_for(rows: int, kv_heads: int, columns: int, device: torch.device) -> int:
    """Slices per (row, key head): enough programs for two waves over the card's SMs, none
    shorter than 256 keys."""
    programs = rows * kv_heads
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(-(-2 * sms // programs), columns // 256))


def attend(
    query_BHD: Tensor,
    key_BHD: Tensor,
    value_BHD: Tensor,
    prompt_k: Tensor,
    prompt_v: Tensor,
    own_k: Tensor,
    own_v: Tensor,
    group_B: Tensor,
    prompt_used_G: Tensor,
    own_used_B: Tensor,
    scale: float,
    splits: int,
    config: tuple[int, int, int] | None = None,
) -> Tensor:
    """Attention of each row's query heads over its group's prompt, then its own tokens.

    query_BHD, key_BHD, value_BHD: the step's token, (rows, heads, head dim); prompt_k/v:
    (groups, columns, key heads, head dim); own_k/v: (rows, key heads, columns, head dim);
    group_B: each row's group; prompt_used_G, own_used_B: the keys of each prompt and of each
    row's own run, this step's token included (int32, on the device, so that a CUDA graph
    reads this step's values). The step's key and value are also written to own_k/v at
    column own_used_B - 1 (the kernel reads them from key_BHD and value_BHD, so no program
    reads a column another writes). Returns (rows, query heads, head dim) in the query's
    dtype. `config` (keys a loop iteration, warps, pipeline stages) overrides CONFIG.
    """
    block_n, warps, stages = config or CONFIG
    b, q_heads, dim = query_BHD.shape
    kv_heads = own_k.shape[1]
    assert query_BHD.stride(2) == key_BHD.stride(2) == 1 and key_BHD.stride() == value_BHD.stride()
    assert prompt_k.stride() == prompt_v.stride()
    assert own_k.stride() == own_v.stride() and prompt_k.stride(3) == own_k.stride(3) == 1
    group = q_heads // kv_heads
    out = torch.empty(
        (b, q_heads, splits, dim),
        dtype=query_BHD.dtype if splits == 1 else torch.float32,
        device=query_BHD.device,
    )
    lse = torch.empty((b, q_heads, splits), dtype=torch.float32, device=query_BHD.device)
    _decode_kernel[(b, kv_heads, splits)](
        query_BHD, key_BHD, value_BHD, prompt_k, prompt_v, own_k, own_v, group_B,
        prompt_used_G, own_used_B, out, lse, scale * LOG2_E,
        query_BHD.stride(0), query_BHD.stride(1), key_BHD.stride(0), key_BHD.stride(1),
        prompt_k.stride(0), prompt_k.stride(1), prompt_k.stride(2),
        own_k.stride(0), own_k.stride(1), own_k.stride(2),
        out.stride(0), out.stride(1), out.stride(2), lse.stride(0),
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        DIM=dim,
        DIM_PAD=triton.next_power_of_2(dim),
        BLOCK_N=block_n,
        SPLITS=splits,
        num_warps=warps,
        num_stages=stages,
    )  # fmt: skip
    if splits == 1:
        return out.view(b, q_heads, dim)
    # Each slice's output is normalised by its own mass; weight it by its share of the total.
    weight_BHS = torch.exp2(lse - lse.amax(dim=-1, keepdim=True))
    merged = (out * weight_BHS[..., None]).sum(dim=2) / weight_BHS.sum(dim=-1)[..., None]
    return merged.to(query_BHD.dtype)


if triton is not None:

    @triton.jit
    def _run(
        q, k_base, v_base, stride_n, lo, hi, acc, m_i, l_i, offs_d, d_valid, qk_scale,
        BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        """Online softmax over keys lo .. hi - 1 (base 2: scores carry log2(e))."""
        for start in range(lo, hi, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            valid = cols < hi
            offsets = cols[:, None] * stride_n + offs_d[None, :]
            mask = valid[:, None] & d_valid[None, :]
            k = tl.load(k_base + offsets, mask=mask, other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            s = tl.where(valid[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))  # finite: column `start` is valid
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + offsets, mask=mask, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        return acc, m_i, l_i

    @triton.jit
    def _decode_kernel(
        Q, KN, VN, PK, PV, TK, TV, Group, PromptUsed, OwnUsed, Out, Lse, qk_scale,
        s_qb, s_qh, s_kb, s_kh, s_pg, s_pn, s_ph, s_tb, s_th, s_tn, s_ob, s_oh, s_os, s_lb,
        GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, DIM: tl.constexpr,
        DIM_PAD: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr,
    ):  # fmt: skip
        row = tl.program_id(0)
        head = tl.program_id(1)
        split = tl.program_id(2)
        g = tl.load(Group + row)
        prompt_len = tl.load(PromptUsed + g)
        own_len = tl.load(OwnUsed + row)
        offs_r = tl.arange(0, GROUP_PAD)
        offs_d = tl.arange(0, DIM_PAD)
        r_valid = offs_r < GROUP
        d_valid = offs_d < DIM
        q_heads = head * GROUP + offs_r
        q = tl.load(
            Q + row * s_qb + q_heads[:, None] * s_qh + offs_d[None, :],
            mask=r_valid[:, None] & d_valid[None, :],
            other=0.0,
        )
        m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
        acc = tl.zeros([GROUP_PAD, DIM_PAD], dtype=tl.float32)
        # This program's slice of each run.
        chunk = tl.cdiv(prompt_len, SPLITS)
        lo = split * chunk
        hi = tl.minimum(prompt_len, lo + chunk)
        base = g * s_pg + head * s_ph
        acc, m_i, l_i = _run(
            q, PK + base, PV + base, s_pn, lo, hi, acc, m_i, l_i, offs_d, d_valid, qk_scale,
            BLOCK_N,
        )  # fmt: skip
        cached = own_len - 1  # the step's own token comes from KN/VN, not the cache
        chunk = tl.cdiv(cached, SPLITS)
        lo = split * chunk
        hi = tl.minimum(cached, lo + chunk)
        base = row * s_tb + head * s_th
        acc, m_i, l_i = _run(
            q, TK + base, TV + base, s_tn, lo, hi, acc, m_i, l_i, offs_d, d_valid, qk_scale,
            BLOCK_N,
        )  # fmt: skip
        new = row * s_kb + head * s_kh + offs_d
        k_new = tl.load(KN + new, mask=d_valid, other=0.0)
        v_new = tl.load(VN + new, mask=d_valid, other=0.0)
        if split == 0:  # kept for the next steps
            column = base + cached * s_tn + offs_d
            tl.store(TK + column, k_new, mask=d_valid)
            tl.store(TV + column, v_new, mask=d_valid)
        if split == SPLITS - 1:
            s = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], 1) * qk_scale
            m_new = tl.maximum(m_i, s)
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new)
            l_i = l_i * alpha + p
            acc = acc * alpha[:, None] + p[:, None] * v_new.to(tl.float32)[None, :]
            m_i = m_new
        # A slice with no keys (short runs cut in many) holds nothing: output 0, weight 0.
        has = l_i > 0
        out = acc / tl.where(has, l_i, 1.0)[:, None]
        mask = r_valid[:, None] & d_valid[None, :]
        out_ptrs = Out + row * s_ob + q_heads[:, None] * s_oh + split * s_os + offs_d[None, :]
        tl.store(out_ptrs, out.to(Out.dtype.element_ty), mask=mask)
        lse = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        tl.store(Lse + row * s_lb + q_heads * SPLITS + split, lse, mask=r_valid)
