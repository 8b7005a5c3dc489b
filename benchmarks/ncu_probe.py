"""Nsight Compute on a 2^26-element fp32 vector add, contiguous (argv 1) or with lanes 256 KB apart
(argv 65536): the profiled call is the second one, between cudaProfilerStart/Stop. Run under
`ncu --profile-from-start off` (docs/benchmarks.md, session of 2026-12-04, has the command)."""
import sys, torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STRIDE > 1:
        # lane i of program p reads element i * STRIDE + p (a permutation when BLOCK * STRIDE == n):
        # the 32 lanes of a warp read 32 different sectors, 256 KB apart at STRIDE 65536
        idx = (tl.arange(0, BLOCK).to(tl.int64) * STRIDE + pid) % n
    else:
        idx = offs
    x = tl.load(x_ptr + idx, mask=mask)
    y = tl.load(y_ptr + idx, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)

n = 1 << 26
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
stride = int(sys.argv[1]) if len(sys.argv) > 1 else 1
grid = (triton.cdiv(n, 1024),)
add_kernel[grid](x, y, out, n, STRIDE=stride, BLOCK=1024)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
add_kernel[grid](x, y, out, n, STRIDE=stride, BLOCK=1024)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done", stride)
