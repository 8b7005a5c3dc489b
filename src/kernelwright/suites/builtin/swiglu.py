"""SwiGLU gating of a transformer MLP: silu(gate) * up, elementwise over two tensors."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "swiglu"
difficulty = 1
tags = ("elementwise", "activation", "fused", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `swiglu(gate, up)` that returns
    silu(gate) * up = gate * sigmoid(gate) * up        (elementwise)
gate and up are contiguous tensors of the same shape (any number of dimensions, any size,
including sizes that are not a multiple of the block size) and the same dtype (float32, float16 or
bfloat16). Compute in float32 without rounding intermediate results to the input dtype, and return
a new tensor of the same shape and dtype; do not modify the inputs. gate can reach |gate| of a
few hundred (float16 too): large negative gates must give (-)0, never NaN.
"""
entry_point = "swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/swiglu.py"
deterministic = True


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, scale=case.get("gate_scale", 2.0)),
            randn(gen, case.shape, case.dtype))


def reference(gate, up):
    return gate * torch.sigmoid(gate) * up


visible_cases = [Case("float32", shape=(4, 1000)), Case("float16", shape=(64, 384))]
hidden_cases = [
    Case("float32", shape=(1,)),
    Case("float32", shape=(3, 5, 7), hostile="odd-sizes"),
    Case("float16", shape=(7, 14_336 // 8 + 1)),
    Case("bfloat16", shape=(257, 129)),
    # numerically hostile (docs/tasks.md): exp(-gate) overflows for gate <~ -89
    Case("float32", shape=(5, 1003), gate_scale=100.0, hostile="large-magnitude"),
    Case("float16", shape=(7, 333), gate_scale=150.0, hostile="large-magnitude"),
]
perf_cases = [
    Case("bfloat16", shape=(8192, 14336)),  # a Llama-3-8B MLP at 8k tokens
    Case("float16", shape=(4096, 11008)),
    Case("float32", shape=(4096, 8192)),
]


def cost(case):
    n = math.prod(case.shape)
    return {"flops": 5 * n, "bytes": 3 * n * case.torch_dtype.itemsize}
