"""A rule-based label of what a kernel or a PyTorch reference computes, from the operator names in
its code: "attention", "matmul", "normalisation", "reduction", "elementwise" or "other".

It measures retrieval (benchmarks/retrieval_quality.py: is the 1-shot example of the same kind as
the task?) and is deliberately independent of the retrieval's own synonym map (agent/operators.py),
so that the measurement does not grade the retriever with its own vocabulary. It reads the same
way a PyTorch module (`torch.relu`, `nn.LayerNorm`, `a @ b`, `x.sum(dim=1)`) and a Triton program
(`tl.dot`, `tl.sum(x, axis=0)`, `_layernorm_kernel`) do. Comments and docstrings are ignored: a
kernel is labelled by what it calls, not by what its prose mentions.

The first rule that matches wins, in this order (a fused kernel takes the heaviest kind it does):

1. attention: a name with attention / attn / flash / scaled_dot_product, or a softmax together with a
   matmul (rules 3 and 4: `softmax(q @ k.T) @ v` written out);
2. other: convolution or pooling (conv*, *pool*): neither kind has an example family of its own;
3. matmul: matmul, mm, bmm, addmm, baddbmm, linear, einsum, tensordot, mv, tl.dot, or the `@`
   operator;
4. normalisation: softmax, log_softmax, logsumexp, cross_entropy, layer/rms/batch/group/instance
   norm (`nn.BatchNorm2d` too; also written out: an `rms`, `rstd` or `rsqrt` name, or a reduction
   call of rule 5 together with sqrt), normalize, or torch.norm (x / norm);
5. reduction: a call of sum, mean, max, min, amax, amin, argmax, argmin, prod, var, std, cumsum,
   cumprod, cummax, topk, sort, reduce or associative_scan as a method or module function
   (`x.sum(`, `tl.max(`; a bare name such as a variable `row_max` does not count), or a loss
   (a name with loss, kl_div, hinge, margin, cosine_similarity);
6. elementwise: a rotary / rope name (an elementwise rotation, whatever else it is called);
7. other: data movement (flip, transpose, permute, t(), embedding, gather, index_select, scatter,
   roll, tl.trans);
8. elementwise: an activation or math function (relu, sigmoid, tanh, gelu, silu, exp, log, sqrt,
   abs, clamp, where, maximum, pow, erf, dropout, ...) or arithmetic between values (`x + y`);
9. other: nothing of the above.
"""

from __future__ import annotations

import re

from .code_tokens import strip_comments, tokenize

__all__ = ["KINDS", "kind_of"]

KINDS = ("elementwise", "reduction", "normalisation", "matmul", "attention", "other")

_ATTENTION = {"attention", "attn", "flash", "scaled_dot_product_attention", "sdpa", "multiheadattention"}
_CONV_POOL = {"conv", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "pool", "maxpool", "avgpool"}
_MATMUL = {"matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum", "tensordot", "mv",
           "tl.dot", "matvec"}
_NORMALISATION = {"softmax", "log_softmax", "logsoftmax", "logsumexp", "cross_entropy", "crossentropy",
                  "crossentropyloss", "layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm",
                  "batchnorm", "group_norm", "groupnorm", "instance_norm", "instancenorm", "normalize",
                  "rms", "rstd", "rsqrt", "torch.norm"}
_SOFTMAX = {"softmax", "log_softmax", "logsoftmax"}
_NORM_NAME = re.compile(r"(?:layer|rms|batch|group|instance)_?norm")
_REDUCE_CALL = re.compile(
    r"\.\s*(sum|mean|max|min|amax|amin|argmax|argmin|prod|var|std|cumsum|cumprod|cummax|topk|sort"
    r"|reduce|associative_scan)\s*\(")
_LOSS = {"loss", "kl_div", "hinge", "margin", "cosine_similarity"}
_ROTARY = {"rotary", "rope"}
_MOVEMENT = {"flip", "transpose", "permute", "embedding", "gather", "index_select", "scatter", "roll",
             "tl.trans"}
_ELEMENTWISE = {"relu", "relu6", "leaky_relu", "leakyrelu", "sigmoid", "tanh", "gelu", "silu", "swish",
                "elu", "selu", "celu", "softplus", "softsign", "hardtanh", "hardsigmoid", "hardswish",
                "mish", "exp", "exp2", "log", "log2", "sqrt", "abs", "clamp", "clip", "where", "maximum",
                "minimum", "pow", "sin", "cos", "erf", "dropout", "neg", "reciprocal", "round", "sign",
                "fma", "add", "mul", "sub", "div"}
# `x @ w` between values; `[ \t]` (not `\s`) so that a decorator line after a `)` is not one
_MATMUL_OP = re.compile(r"[\w\)\]][ \t]*@[ \t]*[\w\(]")
_ARITHMETIC = re.compile(r"[\w\)\]][ \t]*(?:\*\*|[-+*/])[ \t]*[\w\(]")
_T_CALL = re.compile(r"\.\s*t\s*\(\s*\)")


def kind_of(code: str) -> str:
    """The kind of `code` (a PyTorch reference, a KernelBench module or a Triton program)."""
    body = strip_comments(code or "")
    tokens = set(tokenize(body))
    matmul = bool(tokens & _MATMUL or _MATMUL_OP.search(body))
    if tokens & _ATTENTION or (matmul and tokens & _SOFTMAX):
        return "attention"
    if tokens & _CONV_POOL:
        return "other"
    if matmul:
        return "matmul"
    reduces = bool(_REDUCE_CALL.search(body))
    if tokens & _NORMALISATION or _NORM_NAME.search(body.lower()) or (reduces and "sqrt" in tokens):
        return "normalisation"
    if reduces or tokens & _LOSS or any(t.endswith("loss") for t in tokens):
        return "reduction"
    if tokens & _ROTARY:
        return "elementwise"
    if tokens & _MOVEMENT or _T_CALL.search(body):
        return "other"
    if tokens & _ELEMENTWISE or _ARITHMETIC.search(_code_lines(body)):
        return "elementwise"
    return "other"


def _code_lines(body: str) -> str:
    """The body without import lines and string literals: `import triton.language as tl` and a
    dtype string such as "float16" hold no arithmetic, but a `-` in a string would look like one."""
    body = re.sub(r"^\s*(?:import|from)\s.*$", "", body, flags=re.M)
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", body)
