"""Our own log_softmax for the TritonBench-revised `log_softmax` task (interface taken from its
tests: `log_softmax(x, dim=-1, dtype=None)`, differentiable). The agent demo's scripted model
answers with it, so the prompts recorded in docs/agent-prompts.md hold no benchmark code.
One program per row of the (rows, N) view; rows up to 32768 elements in one block."""

import torch
import triton
import triton.language as tl


@triton.jit
def _log_softmax_fwd(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    shifted = x - tl.max(x, axis=0)
    lse = tl.log(tl.sum(tl.where(mask, tl.exp(shifted), 0.0), axis=0))
    tl.store(out_ptr + row * n_cols + cols, (shifted - lse).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _log_softmax_bwd(out_ptr, grad_out_ptr, grad_in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    out = tl.load(out_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(grad_out_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    grad = g - tl.exp(out) * tl.sum(g, axis=0)
    tl.store(grad_in_ptr + row * n_cols + cols, grad.to(grad_in_ptr.dtype.element_ty), mask=mask)


def _launch_config(n_cols):
    block = triton.next_power_of_2(max(n_cols, 1))
    assert block <= 32768, "rows longer than 32768 elements are not supported"
    return block, 4 if block <= 1024 else 8 if block <= 4096 else 16


class _LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, dtype):
        moved = x.movedim(dim, -1)
        rows = moved.contiguous().view(-1, moved.shape[-1])
        out = torch.empty(rows.shape, device=x.device, dtype=dtype or x.dtype)
        if rows.numel():
            block, warps = _launch_config(rows.shape[1])
            _log_softmax_fwd[(rows.shape[0],)](rows, out, rows.shape[1], BLOCK=block, num_warps=warps)
        result = out.view(moved.shape).movedim(-1, dim)
        ctx.save_for_backward(out)
        ctx.dim, ctx.shape = dim, moved.shape
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (out,) = ctx.saved_tensors
        grad_rows = grad_output.movedim(ctx.dim, -1).contiguous().view(out.shape)
        grad_in = torch.empty_like(out)
        if out.numel():
            block, warps = _launch_config(out.shape[1])
            _log_softmax_bwd[(out.shape[0],)](out, grad_rows, grad_in, out.shape[1], BLOCK=block, num_warps=warps)
        return grad_in.view(ctx.shape).movedim(-1, ctx.dim), None, None


def log_softmax(x, dim=-1, dtype=None):
    return _LogSoftmax.apply(x, dim, dtype)
