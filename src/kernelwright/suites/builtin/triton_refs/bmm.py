"""Triton reference for bmm: the tiled matmul with a second grid axis over the batch, so one
launch covers every (batch, tile) pair."""

import torch
import triton
import triton.language as tl


@triton.jit
def _bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                stride_cb, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group_size = GROUP_M * num_pid_n
    first_m = (pid // group_size) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size) % size_m
    pid_n = (pid % group_size) // size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * stride_ab + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + batch * stride_cb + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]
    assert a.dtype == b.dtype
    B, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((B, M, N), device=a.device, dtype=a.dtype)
    if a.is_cuda:
        bm, bn, bk, warps, stages = (128, 128, 32, 8, 3) if a.dtype == torch.float32 else (128, 128, 64, 8, 3)
    else:
        bm, bn, bk, warps, stages = 64, 64, 64, 4, 1  # the CPU interpreter: few, large steps
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), B)
    _bmm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1),
                      b.stride(2), c.stride(0), c.stride(1), c.stride(2),
                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return c
