# expect: performance "picked when tuned alone"
# An autotuner that settles on a correct configuration the first time it tunes a shape (next to
# other workers, where the perf-size check runs) and on a wrong one when tuned again (alone, for
# timing). What is timed must have been checked: the check runs again with the timed choice.
import torch
import triton
import triton.language as tl

_tunings: dict[int, int] = {}


def _right_first_then_wrong(configs, named_args, **kwargs):
    n = named_args["n"]
    _tunings[n] = _tunings.get(n, 0) + 1
    wrong = int(_tunings[n] > 1)
    return [c for c in configs if c.kwargs["WRONG"] == wrong]


@triton.autotune(configs=[triton.Config({"BLOCK": 1024, "WRONG": 0}), triton.Config({"BLOCK": 1024, "WRONG": 1})],
                 key=["n"], prune_configs_by={"early_config_prune": _right_first_then_wrong})
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, WRONG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    total = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    if WRONG:
        total = total + 1
    tl.store(out_ptr + offs, total, mask=mask)


def vector_add(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    return out
