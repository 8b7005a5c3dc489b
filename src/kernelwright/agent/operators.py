"""The retrieval query of a task given in PyTorch (or prose): its operator names, expanded to the
vocabulary of Triton kernels and weighted.

BM25 over code tokens matches a PyTorch module poorly against Triton kernels: the two share almost
no words except the generic ones (a KernelBench ReLU module and its instruction share "model",
"forward", "inputs", "kernels" with a flash-attention kernel, and nothing with a ReLU kernel, which
says `tl.maximum`). So for a query that is not Triton code, `operator_query` extracts the operators
the reference uses (torch.* / F.* functions, nn modules, tensor methods, `@`, arithmetic) and the
instruction names, and maps each through `SYNONYMS` to the tokens a Triton kernel doing the same has
(relu -> relu, tl.maximum, tl.where; softmax -> softmax, tl.exp, tl.max, tl.sum; matmul -> matmul,
tl.dot, acc). Each operator belongs to a family whose *negative* tokens mark heavier machinery the
task does not need (an elementwise task: tl.dot, tl.sum, tl.max, tl.cumsum...), so that a kernel
using them ranks lower unless another operator of the task asks for them. A softmax together with
a matmul is attention (`softmax(q @ k.T) @ v` written out) and adds the attention family.

Weights: operators in the query (the reference code, or KernelBench's instruction with the module
in it) count 1.0, operators named only in a separate instruction 0.5 (prose mentions things it does
not compute: "subtract the row maximum"), arithmetic operators 0.25 (nearly every reference has
some). A token takes the largest weight any operator gives it. Triton-code queries never come here
(`is_triton_code`): they keep GEAK's code-similarity retrieval (`Retriever.best`).
"""

from __future__ import annotations

import re

from .code_tokens import strip_comments, tokenize

__all__ = ["SYNONYMS", "FAMILY_NEGATIVES", "is_triton_code", "operator_names", "operator_query"]

_POINTWISE_HEAVY = ("tl.dot", "tl.sum", "tl.max", "tl.min", "tl.cumsum", "tl.argmax", "tl.argmin",
                    "tl.reduce", "tl.associative_scan")
# tokens a kernel of the family has no use for: present in an example, they lower its score
FAMILY_NEGATIVES: dict[str, tuple[str, ...]] = {
    "pointwise": _POINTWISE_HEAVY,
    "reduce": ("tl.dot", "tl.sqrt", "rstd", "tl.exp", "softmax"),
    "norm": ("tl.dot",),
    "dot": ("attention", "attn", "flash", "softmax"),
    "attention": (),
    "move": ("tl.dot", "tl.sum", "tl.max", "tl.exp"),
    "window": (),
}

# tokens any kernel of the family has: they rank a kernel of the right family first when the
# task's own operator is in no example (a top-k task, a corpus without top-k: another reduction)
FAMILY_POSITIVES: dict[str, tuple[str, ...]] = {
    "pointwise": (), "move": (), "window": (),
    "reduce": ("tl.sum", "tl.max", "tl.min", "tl.reduce", "acc"),
    "norm": ("tl.sum", "tl.max", "tl.exp", "rstd"),
    "dot": ("tl.dot", "acc"),
    "attention": ("tl.dot", "tl.exp", "tl.max"),
}
# the family that shapes a fused kernel: beside any of these, elementwise operators are its epilogue
# and a transpose the layout of an operand (`q @ k.transpose(-2, -1)`), so they count a quarter
_HEAVY = ("dot", "attention", "norm", "reduce")
_LIGHT = ("pointwise", "move")


def _ops(family: str, names: str, tokens: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    expansion = tuple(tokens.split())
    return {name: (family, expansion) for name in names.split()}


# operator name (as `tokenize` spells it: lowercased, snake_case kept) -> (family, Triton tokens)
SYNONYMS: dict[str, tuple[str, tuple[str, ...]]] = {
    **_ops("pointwise", "relu relu6", "relu tl.maximum maximum tl.where"),
    **_ops("pointwise", "leaky_relu leakyrelu", "leaky relu tl.where where slope"),
    **_ops("pointwise", "sigmoid hardsigmoid", "sigmoid tl.sigmoid tl.exp exp"),
    **_ops("pointwise", "tanh", "tanh libdevice tl.exp exp"),
    **_ops("pointwise", "gelu", "gelu erf tl.math tanh libdevice"),
    **_ops("pointwise", "silu swish", "silu swish sigmoid tl.exp"),
    **_ops("pointwise", "elu selu celu", "elu tl.exp exp tl.where alpha"),
    **_ops("pointwise", "softplus mish", "softplus tl.exp tl.log log"),
    **_ops("pointwise", "softsign", "softsign tl.abs abs"),
    **_ops("pointwise", "hardtanh hardswish clamp clip clamp_",
           "clamp tl.minimum tl.maximum minimum maximum"),
    **{op: ("pointwise", (op, f"tl.{op}")) for op in
       "exp exp2 log log2 sqrt abs pow sin cos erf where maximum minimum fma".split()},
    **_ops("pointwise", "neg reciprocal round sign", "tl.where"),
    **_ops("pointwise", "rotary rope", "rotary rope cos sin"),
    **_ops("pointwise", "dropout", "dropout tl.rand rand seed philox keep"),
    **_ops("pointwise", "add sub", "add"),
    **_ops("pointwise", "mul div", "mul scale"),
    **_ops("reduce", "sum", "sum tl.sum acc"),
    **_ops("reduce", "mean", "mean tl.sum sum"),
    **_ops("reduce", "max amax", "max tl.max amax"),
    **_ops("reduce", "min amin", "min tl.min"),
    **_ops("reduce", "argmax", "argmax tl.argmax max tl.max idx"),
    **_ops("reduce", "argmin", "argmin tl.argmin min tl.min idx"),
    **_ops("reduce", "prod", "prod tl.reduce reduce"),
    **_ops("reduce", "cumsum cumprod cummax", "cumsum tl.cumsum scan tl.associative_scan"),
    **_ops("reduce", "topk sort", "topk sort tl.sort"),
    **_ops("reduce", "var std", "var mean tl.sum"),
    **_ops("reduce", "mse_loss l1_loss smooth_l1_loss huber_loss kl_div hinge_embedding_loss "
           "triplet_margin_loss cosine_similarity loss", "loss tl.sum mean sum"),
    **_ops("norm", "softmax", "softmax tl.exp exp tl.max tl.sum"),
    **_ops("norm", "log_softmax logsoftmax", "softmax log tl.log tl.exp tl.max tl.sum"),
    **_ops("norm", "logsumexp", "logsumexp lse tl.log tl.exp tl.max tl.sum"),
    **_ops("norm", "cross_entropy crossentropyloss nll_loss",
           "cross_entropy entropy lse logits tl.log tl.exp tl.max tl.sum targets"),
    **_ops("norm", "layer_norm layernorm", "layernorm layer_norm mean var rstd eps tl.sqrt tl.sum"),
    **_ops("norm", "rms_norm rmsnorm rms", "rmsnorm rms rstd eps tl.sqrt tl.sum"),
    **_ops("norm", "batch_norm batchnorm batchnorm1d batchnorm2d batchnorm3d group_norm groupnorm "
           "instance_norm instancenorm instancenorm2d", "norm mean var rstd eps tl.sqrt tl.sum"),
    **_ops("norm", "rsqrt rstd", "rstd rsqrt eps tl.sqrt"),
    **_ops("norm", "norm normalize", "norm tl.sqrt tl.sum"),
    **_ops("dot", "matmul mm addmm einsum tensordot mv matvec", "matmul tl.dot dot acc tl.cdiv"),
    **_ops("dot", "bmm baddbmm", "bmm matmul tl.dot dot acc batch"),
    **_ops("dot", "linear", "linear matmul tl.dot dot acc bias weight"),
    **_ops("attention", "scaled_dot_product_attention attention multiheadattention sdpa attn",
           "attention attn flash tl.dot softmax tl.exp tl.max scale"),
    **_ops("move", "flip", "flip"),
    **_ops("move", "transpose permute", "transpose tl.trans"),
    **_ops("move", "embedding gather index_select", "embedding gather indices"),
    **_ops("window", "conv1d conv2d conv3d conv conv_transpose2d convtranspose2d", "conv tl.dot acc"),
    **_ops("window", "max_pool1d max_pool2d max_pool3d maxpool1d maxpool2d maxpool3d", "pool tl.max"),
    **_ops("window", "avg_pool1d avg_pool2d avg_pool3d avgpool1d avgpool2d avgpool3d", "pool tl.sum"),
}
# operator names that are common English words: counted in code only, never from prose
_CODE_ONLY = {"add", "sub", "mul", "div", "max", "min", "sum", "mean", "sort", "norm", "where", "round",
              "sign", "log", "exp", "abs", "pow", "linear", "gather", "flip", "clip", "loss", "var", "std"}

_TRITON_DECORATOR = re.compile(r"^[ \t]*@triton\.(?:jit|autotune|heuristics)\b", re.M)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")
_FENCE = re.compile(r"```(?:python|py)?\n(.*?)```", re.S)
_MATMUL_OP = re.compile(r"[\w\)\]][ \t]*@[ \t]*[\w\(]")
_ADD_OP = re.compile(r"[\w\)\]][ \t]*[-+][ \t]*[\w\(]")
_MUL_OP = re.compile(r"[\w\)\]][ \t]*(?:\*\*|[*/])[ \t]*[\w\(]")
CODE_WEIGHT, PROSE_WEIGHT, ARITHMETIC_WEIGHT = 1.0, 0.5, 0.25
# a family's own tokens count half an operator; a negative token costs the best positive match
# (`Retriever.ranked_weighted`), however weakly the task asked for its family: one tl.max in a
# kernel makes it a reduction, whatever else it shares with an elementwise task
FAMILY_WEIGHT, NEGATIVE_WEIGHT, EPILOGUE_WEIGHT = 0.5, 1.0, 0.25
# the tokens an operator expands to count half its own name: tl.maximum or tl.where say "relu" only
# weakly (a quantize kernel clamps with them too), the name "relu" says it outright
SYNONYM_WEIGHT = 0.5


def is_triton_code(query: str) -> bool:
    """A query with a `@triton.jit` (or autotune / heuristics) decorator line is Triton code: a
    start kernel to optimize or a candidate to fix. A mention in prose (KernelBench's instruction
    says "(`@triton.jit`)") is not a decorator line."""
    return bool(_TRITON_DECORATOR.search(query or ""))


def _code_part(text: str) -> tuple[str, str]:
    """(code, prose) of a query: the fenced Python blocks of an instruction, else all of it as code."""
    blocks = _FENCE.findall(text)
    if blocks:
        return "\n".join(blocks), _FENCE.sub(" ", text)
    return text, ""


def operator_names(text: str, prose: bool = False) -> dict[str, float]:
    """Operator name -> weight for one text: every token of `SYNONYMS` (torch.relu, F.relu,
    nn.ReLU and x.relu() all give "relu"), `@` as "matmul", + - as "add", * / ** as "mul".
    `prose`: the text is an instruction (no operator symbols; no common English words)."""
    weight = PROSE_WEIGHT if prose else CODE_WEIGHT
    names: dict[str, float] = {}
    for token in (tokenize(text) if prose else _whole_names(text)):
        if token in SYNONYMS and not (prose and token in _CODE_ONLY):
            names[token] = weight
    if not prose:
        # importing torch.nn.functional is not a use of it: drop import lines before the symbols
        body = re.sub(r"^\s*(?:import|from)\s.*$", "", strip_comments(text), flags=re.M)
        body = re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", body)
        if _MATMUL_OP.search(body):
            names["matmul"] = weight
        for name, pattern in (("add", _ADD_OP), ("mul", _MUL_OP)):
            if name not in names and pattern.search(body):
                names[name] = ARITHMETIC_WEIGHT
    return names


def _whole_names(code: str) -> list[str]:
    """The names of code, each dotted part whole and lowercased (`F.leaky_relu` -> f, leaky_relu;
    `nn.LayerNorm` -> nn, layernorm): in code an operator is called by its whole name, and the
    parts of other names are not operators (`max_val=1.` is not a max)."""
    return [part.lower() for word in _NAME.findall(code) for part in re.sub(r"\s+", "", word).split(".")]


def operator_query(query: str, instruction: str = "") -> dict[str, float]:
    """Token -> weight for a PyTorch / prose query, or {} when it names no known operator (the
    caller then falls back to code similarity). Negative weights mark tokens to avoid."""
    code, prose = _code_part(query)
    names = operator_names(code)
    extra = " ".join(t for t in (prose, instruction if instruction.strip() != query.strip() else "") if t)
    # the instruction adds operators of the families the code already uses (gelu for a written-out
    # gelu); only when the code names no operator may it add any: prose mentions what a task does
    # not compute ("the row maximum", "as in attention", the `rotary_embedding` wrapper name)
    code_families = {SYNONYMS[n][0] for n, w in names.items() if w > ARITHMETIC_WEIGHT}
    if "reduce" in code_families:
        code_families.add("norm")  # a normalisation written out is reductions (mean, sum)
    for name, w in operator_names(extra, prose=True).items():
        if not code_families or SYNONYMS[name][0] in code_families:
            names.setdefault(name, w)
    if not names:
        return {}
    families: dict[str, float] = {}
    for name, w in names.items():
        family = SYNONYMS[name][0]
        families[family] = max(families.get(family, 0.0), w)
    if "dot" in families and any(n in names for n in ("softmax", "log_softmax", "logsoftmax")):
        families["attention"] = min(families["dot"], names.get("softmax", PROSE_WEIGHT))
        names.setdefault("attention", families["attention"])
    if any(f in families for f in _HEAVY):
        names = {n: w * EPILOGUE_WEIGHT if SYNONYMS[n][0] in _LIGHT else w for n, w in names.items()}
    return _expand(names, families)


def _expand(names: dict[str, float], families: dict[str, float]) -> dict[str, float]:
    """Operator and family weights -> token weights (largest positive wins; negatives last)."""
    weights: dict[str, float] = {}
    for name, w in names.items():
        weights[name] = max(weights.get(name, 0.0), w)
        for token in SYNONYMS[name][1]:
            weights[token] = max(weights.get(token, 0.0), w * SYNONYM_WEIGHT)
    for family, w in families.items():
        for token in FAMILY_POSITIVES[family]:
            weights[token] = max(weights.get(token, 0.0), w * FAMILY_WEIGHT)
    heavy = any(f in families for f in _HEAVY)
    for family in families:
        if heavy and family in _LIGHT:
            continue  # an epilogue does not forbid what the heavy part needs
        for token in FAMILY_NEGATIVES[family]:
            if weights.get(token, 0.0) <= 0:
                weights[token] = -NEGATIVE_WEIGHT
    return weights
