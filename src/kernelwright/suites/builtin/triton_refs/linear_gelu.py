"""Triton reference for linear_gelu: the tiled matmul over x (M, K) and a transposed view of
weight (N, K), with the bias add and GELU (tanh form, as x * sigmoid(2u)) applied to the float32
accumulator before the single store."""

import torch
import triton
import triton.language as tl


@triton.jit
def _linear_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                        stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
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
    x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    wt_ptrs = w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn  # (BLOCK_K, BLOCK_N) view of W.T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        wt = tl.load(wt_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, wt, acc)
        x_ptrs += BLOCK_K * stride_xk
        wt_ptrs += BLOCK_K * stride_wk
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    z = acc + bias[None, :]
    two_u = 1.5957691216057308 * (z + 0.044715 * z * z * z)  # 2 * sqrt(2/pi) * (...)
    y = z / (1.0 + tl.exp(-two_u))
    out_ptrs = out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
    assert bias.shape == (weight.shape[0],) and x.dtype == weight.dtype == bias.dtype
    M, K = x.shape
    N = weight.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if x.is_cuda:
        bm, bn, bk, warps, stages = (128, 128, 32, 8, 3) if x.dtype == torch.float32 else (128, 256, 64, 8, 3)
    else:
        bm, bn, bk, warps, stages = 64, 64, 64, 4, 1  # the CPU interpreter: few, large steps
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _linear_gelu_kernel[grid](x, weight, bias, out, M, N, K, x.stride(0), x.stride(1), weight.stride(0),
                              weight.stride(1), out.stride(0), out.stride(1),
                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return out
