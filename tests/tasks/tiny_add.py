"""A vector_add with perf cases small enough for the CPU interpreter: exercises the performance
stage (spot checks, warm-up, interleaved blocks, statistics) in CI."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "tiny_add"
instruction = "Return x + y for two tensors of the same shape and dtype."
entry_point = "vector_add(x, y)"
deterministic = True


def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), randn(gen, case.shape, case.dtype)


def reference(x, y):
    return x + y


visible_cases = [Case("float32", shape=(1000,))]
hidden_cases = [Case("float16", shape=(30, 70))]
perf_cases = [Case("float32", shape=(1 << 16,)), Case("float16", shape=(300, 400))]


def cost(case):
    n = 1
    for d in case.shape:
        n *= d
    return {"flops": n, "bytes": 3 * n * (4 if case.dtype == "float32" else 2)}
