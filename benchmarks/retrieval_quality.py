"""How often the 1-shot example fits the task: is the retrieved example of the same kind?

    python benchmarks/retrieval_quality.py [--path KERNELBENCH] [--quick] [--baseline] [--corpus P ...] [--json]

Query tasks:
  * the built-in suite's tasks in their PyTorch-reference form (the query the agent's first
    attempt sends: the reference function's source);
  * KernelBench level 1: the problems of a checkout given by --path, or found under
    ../shared/benchmarks/KernelBench; without one (and always with --quick) a sample of
    KernelBench-shaped modules that this script carries (`SAMPLE`, written for it: Model,
    get_inputs, get_init_inputs; loaded through the real KernelBench adapter, so the query is the
    adapter's instruction with the module's source in it, as in a run).

Each query task and its retrieved example are labelled by `kernelwright.agent.kinds.kind_of` (a
rule-based labeller on operator names, documented there; independent of the retriever's synonym
map). The example is the one the agent would use: `session.make_retrieve` over the built-in corpus
(plus --corpus paths) with the task's own reference sources excluded. That is leave-one-out: the
corpus holds every built-in task's Triton reference, and a task's own reference (and any near-copy
of it, a sibling kernel scoring >= 0.5 similarity) is never returned.

The same-kind rate counts the tasks of the five kinds (elementwise, reduction, normalisation,
matmul, attention); tasks labelled "other" (convolution, pooling, data movement) have no example
family of their own and are listed, not counted. --baseline retrieves with plain BM25 over code
tokens (`Retriever.best`, the path kept for Triton-code queries) instead of the agent's path.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from kernelwright.agent.brief import brief_for
from kernelwright.agent.kinds import KINDS, kind_of

COUNTED = tuple(k for k in KINDS if k != "other")
SHARED_KERNELBENCH = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "KernelBench"

# (file stem, docstring, __init__ args, __init__ body, forward args, forward expression,
#  get_inputs list, get_init_inputs list): KernelBench level-1 shaped, written for this script
SAMPLE = [
    ("19_ReLU", "Simple model that performs a ReLU activation.", "", "", "x", "torch.relu(x)", "x", ""),
    ("20_LeakyReLU", "Simple model that performs a LeakyReLU activation.", ", negative_slope: float = 0.01",
     "self.negative_slope = negative_slope", "x",
     "torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)", "x", ""),
    ("21_Sigmoid", "Simple model that performs a Sigmoid activation.", "", "", "x", "torch.sigmoid(x)", "x", ""),
    ("22_Tanh", "Simple model that performs a Tanh activation.", "", "", "x", "torch.tanh(x)", "x", ""),
    ("25_Swish", "Simple model that performs a Swish activation.", "", "", "x", "x * torch.sigmoid(x)", "x", ""),
    ("26_GELU_", "Simple model that performs a GELU activation.", "", "", "x",
     "torch.nn.functional.gelu(x)", "x", ""),
    ("27_SELU_", "Simple model that performs a SELU activation.", "", "", "x", "torch.selu(x)", "x", ""),
    ("28_HardSigmoid", "Simple model that performs a HardSigmoid activation.", "", "", "x",
     "F.hardsigmoid(x)", "x", ""),
    ("29_Softplus", "Simple model that performs a Softplus activation.", "", "", "x",
     "torch.nn.functional.softplus(x)", "x", ""),
    ("30_Softsign", "Simple model that performs a Softsign activation.", "", "", "x",
     "x / (1 + torch.abs(x))", "x", ""),
    ("31_ELU", "Simple model that performs an ELU activation.", ", alpha: float = 1.0", "self.alpha = alpha",
     "x", "F.elu(x, alpha=self.alpha)", "x", "1.0"),
    ("32_HardTanh", "Simple model that performs a HardTanh activation.", "", "", "x",
     "F.hardtanh(x, min_val=-1., max_val=1.)", "x", ""),
    ("5_Matrix_scalar_multiplication", "Simple model that performs a matrix-scalar multiplication (C = A * s)",
     "", "", "A, s", "A * s", "A, 3.14", ""),
    ("23_Softmax", "Simple model that performs a Softmax activation.", "", "", "x", "torch.softmax(x, dim=1)",
     "x", ""),
    ("24_LogSoftmax", "Simple model that performs a LogSoftmax activation.", ", dim: int = 1", "self.dim = dim",
     "x", "torch.log_softmax(x, dim=self.dim)", "x", ""),
    ("33_BatchNorm", "Simple model that performs Batch Normalization.", ", num_features: int",
     "self.bn = nn.BatchNorm2d(num_features=num_features)", "x", "self.bn(x)", "x4", "features"),
    ("35_GroupNorm_", "Simple model that performs Group Normalization.", ", num_features: int, num_groups: int",
     "self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)", "x", "self.gn(x)", "x4",
     "features, 8"),
    ("36_RMSNorm_", "Simple model that performs RMS Normalization.", ", num_features: int, eps: float = 1e-5",
     "self.eps = eps", "x", "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)", "x4",
     "features"),
    ("39_L2Norm_", "Simple model that performs L2 normalization.", "", "", "x",
     "x / torch.norm(x, p=2, dim=1, keepdim=True)", "x", ""),
    ("40_LayerNorm", "Simple model that performs Layer Normalization.", ", normalized_shape: tuple",
     "self.ln = nn.LayerNorm(normalized_shape=normalized_shape)", "x", "self.ln(x)", "x4", "(features, 8, 8)"),
    ("95_CrossEntropyLoss", "A model that computes Cross Entropy Loss for multi-class classification tasks.",
     "", "", "predictions, targets", "torch.nn.functional.cross_entropy(predictions, targets)",
     "x, torch.randint(0, dim, (batch_size,))", ""),
    ("47_Sum_reduction_over_a_dimension", "Simple model that performs sum reduction over a specified dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.sum(x, dim=self.dim, keepdim=True)", "x", "1"),
    ("48_Mean_reduction_over_a_dimension", "Simple model that performs mean reduction over a specific dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.mean(x, dim=self.dim)", "x", "1"),
    ("49_Max_reduction_over_a_dimension", "Simple model that performs Max reduction over a specific dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.max(x, dim=self.dim)[0]", "x", "1"),
    ("50_Product_reduction_over_a_dimension", "Simple model that performs product reduction over a dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.prod(x, dim=self.dim)", "x", "1"),
    ("51_Argmax_over_a_dimension", "Simple model that performs Argmax over a specified dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.argmax(x, dim=self.dim)", "x", "1"),
    ("53_Min_reduction_over_a_dimension", "Simple model that performs min reduction over a specific dimension.",
     ", dim: int", "self.dim = dim", "x", "torch.min(x, dim=self.dim)[0]", "x", "1"),
    ("89_cumsum", "A simple model that performs a cumulative sum (prefix sum) operation along a dimension.",
     ", dim", "self.dim = dim", "x", "torch.cumsum(x, dim=self.dim)", "x", "1"),
    ("94_MSELoss", "A model that computes the Mean Squared Error loss for regression tasks.", "", "",
     "predictions, targets", "torch.mean((predictions - targets) ** 2)", "x, x", ""),
    ("1_Square_matrix_multiplication_", "Simple model that performs a single square matrix multiplication (C = A * B)",
     "", "", "A, B", "torch.matmul(A, B)", "a, b", ""),
    ("3_Batched_matrix_multiplication", "Performs batched matrix multiplication (C = A * B) where A, B and C "
     "have the same batch dimension.", "", "", "A, B", "torch.bmm(A, B)", "a3, b3", ""),
    ("4_Matrix_vector_multiplication_", "Simple model that performs matrix-vector multiplication (C = A * B).",
     "", "", "A, B", "torch.matmul(A, B)", "a, torch.randn(dim, 1)", ""),
    ("12_Matmul_with_diagonal_matrices_", "Simple model that performs a matrix multiplication of a diagonal "
     "matrix with another matrix.", "", "", "A, B", "torch.diag(A) @ B", "torch.randn(dim), b", ""),
    ("16_Matmul_with_transposed_A", "Simple model that performs a single matrix multiplication (C = A.T * B)",
     "", "", "A, B", "torch.matmul(A.T, B)", "a, b", ""),
    ("97_ScaledDotProductAttention", "Scaled dot-product attention.", "", "", "Q, K, V",
     "torch.nn.functional.scaled_dot_product_attention(Q, K, V)", "q, q, q", ""),
    ("63_conv_standard_2D__square_input__square_kernel", "Performs a standard 2D convolution operation.",
     ", in_channels: int, out_channels: int, kernel_size: int",
     "self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size))", "x", "self.conv2d(x)",
     "x4", "features, 8, 3"),
    ("42_Max_Pooling_2D", "Simple model that performs Max Pooling 2D.", ", kernel_size: int",
     "self.maxpool = nn.MaxPool2d(kernel_size=kernel_size)", "x", "self.maxpool(x)", "x4", "2"),
]

_INPUTS = {"x": "torch.randn(batch_size, dim)", "x4": "torch.randn(batch_size, features, 8, 8)",
           "a": "torch.randn(dim, dim)", "b": "torch.randn(dim, dim)", "a3": "torch.randn(batch_size, dim, dim)",
           "b3": "torch.randn(batch_size, dim, dim)", "q": "torch.randn(batch_size, 4, dim, 32)"}


def sample_source(spec: tuple) -> str:
    """One KernelBench-shaped problem file (small sizes: nothing is run here)."""
    stem, doc, init_args, init_body, fwd_args, expr, inputs, init_inputs = spec
    inputs = ", ".join(_INPUTS.get(p.strip(), p.strip()) for p in inputs.split(", ")) if inputs else ""
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
            f"class Model(nn.Module):\n    \"\"\"\n    {doc}\n    \"\"\"\n"
            f"    def __init__(self{init_args}):\n        super(Model, self).__init__()\n"
            f"        {init_body or 'pass'}\n\n"
            f"    def forward(self, {fwd_args}) -> torch.Tensor:\n        return {expr}\n\n\n"
            f"batch_size = 16\ndim = 64\nfeatures = 4\n\n\n"
            f"def get_inputs():\n    return [{inputs}]\n\n\n"
            f"def get_init_inputs():\n    return [{init_inputs}]\n")


def write_sample(root: Path) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for spec in SAMPLE:
        (level / f"{spec[0]}.py").write_text(sample_source(spec))
    return root


def kernelbench_tasks(path: Path | None, tmp: Path) -> tuple[list, str]:
    """Level-1 tasks of a checkout, or of the carried sample; and where they came from."""
    from kernelwright.suites.kernelbench import load_suite

    source = "sample"
    if path is None:
        path = write_sample(tmp)
    else:
        source = str(path)
    tasks, _ = load_suite(path)
    return [t for t in tasks if t.name.startswith("L1_")], source


def query_of(task) -> tuple[str, str]:
    """The first attempt's query as the agent builds it (agent/loop.py: start code, else the
    PyTorch reference, else the instruction), and the code that defines the task's kind."""
    brief = brief_for(task)
    query = brief.reference_code or brief.instruction
    return query, brief.reference_code or _kernelbench_source(task) or brief.instruction


def _kernelbench_source(task) -> str:
    path = getattr(task, "reference_impl", None)
    try:
        return Path(path).read_text() if path else ""
    except OSError:
        return ""


def make_lookup(corpus: list[str], baseline: bool):
    from kernelwright.agent.retrieval import Retriever, load_corpus
    from kernelwright.agent.session import golden_sources, make_retrieve

    if not baseline:
        return make_retrieve([Path(p) for p in corpus])
    retriever = Retriever(load_corpus([Path(p) for p in corpus]))
    return lambda query, task: retriever.best(query, exclude=golden_sources(task))


def measure(groups: dict[str, list], lookup, corpus: list[str]) -> list[dict]:
    from kernelwright.agent.retrieval import Retriever, load_corpus
    from kernelwright.agent.session import golden_sources

    retriever = Retriever(load_corpus([Path(p) for p in corpus]))
    kinds = [kind_of(ex.code) for ex in retriever.corpus]
    rows = []
    for group, tasks in groups.items():
        for task in tasks:
            query, defining = query_of(task)
            example = lookup(query, task)
            kind = kind_of(defining)
            # is any example of the task's kind left once its own reference (and near-copies) is out?
            excluded = retriever._excluded(golden_sources(task), ())
            reachable = any(k == kind and not retriever.is_excluded(ex, excluded)
                            for ex, k in zip(retriever.corpus, kinds))
            rows.append({"group": group, "task": task.name, "kind": kind, "reachable": reachable,
                         "example": example.name if example else None,
                         "example_kind": kind_of(example.code) if example else None})
    return rows


def summarise(rows: list[dict]) -> dict:
    counted = [r for r in rows if r["kind"] in COUNTED]
    same = [r for r in counted if r["example_kind"] == r["kind"]]
    out = {"tasks": len(rows), "counted": len(counted), "same_kind": len(same),
           "rate": len(same) / len(counted) if counted else None, "per_group": {}, "per_kind": {}}
    for group in dict.fromkeys(r["group"] for r in rows):
        g = [r for r in counted if r["group"] == group]
        hit = sum(r["example_kind"] == r["kind"] for r in g)
        out["per_group"][group] = {"counted": len(g), "same_kind": hit}
    for kind in COUNTED:
        k = [r for r in counted if r["kind"] == kind]
        out["per_kind"][kind] = {"counted": len(k), "same_kind": sum(r["example_kind"] == kind for r in k)}
    reachable = [r for r in counted if r["reachable"]]
    out["reachable"] = {"counted": len(reachable), "same_kind": sum(r["example_kind"] == r["kind"] for r in reachable)}
    out["mismatches"] = [r for r in counted if r["example_kind"] != r["kind"]]
    out["other"] = [r for r in rows if r["kind"] not in COUNTED]
    return out


def _pct(hit: int, n: int) -> str:
    return f"{hit}/{n} ({100 * hit / n:.0f}%)" if n else "-"


def report(summary: dict, sources: dict[str, str], baseline: bool) -> str:
    lines = [f"retrieval: {'plain BM25 over code tokens (--baseline)' if baseline else 'the agent path'}; "
             "leave-one-out (a task's own reference and its near-copies are excluded)"]
    lines += [f"  {group}: {src}" for group, src in sources.items()]
    lines.append(f"same-kind rate: {_pct(summary['same_kind'], summary['counted'])} of {summary['counted']} "
                 f"tasks of the five kinds ({summary['tasks'] - summary['counted']} 'other' not counted)")
    r = summary["reachable"]
    lines.append(f"  where the corpus has an example of the task's kind left: {_pct(r['same_kind'], r['counted'])}")
    for group, g in summary["per_group"].items():
        lines.append(f"  {group:12s} {_pct(g['same_kind'], g['counted'])}")
    for kind, k in summary["per_kind"].items():
        lines.append(f"  {kind:14s} {_pct(k['same_kind'], k['counted'])}")
    lines.append("mismatches (task [kind] -> example [kind]):")
    lines += [f"  {r['group']}/{r['task']} [{r['kind']}] -> {r['example']} [{r['example_kind']}]"
              + ("" if r["reachable"] else "  (no example of its kind left)")
              for r in summary["mismatches"]] or ["  none"]
    lines.append("not counted ('other'):")
    lines += [f"  {r['group']}/{r['task']} -> {r['example']} [{r['example_kind']}]" for r in summary["other"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--path", type=Path, help="a KernelBench checkout (default: ../shared/benchmarks/KernelBench)")
    parser.add_argument("--quick", action="store_true", help="the carried KernelBench-shaped sample only")
    parser.add_argument("--baseline", action="store_true", help="plain BM25 over code tokens for every query")
    parser.add_argument("--corpus", nargs="*", default=[], help="extra corpus paths (as `generate --corpus`)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from kernelwright.suites.runner import load_suite_tasks

    path = args.path
    if path is None and not args.quick and SHARED_KERNELBENCH.is_dir():
        path = SHARED_KERNELBENCH
    with tempfile.TemporaryDirectory() as tmp:
        builtin, _ = load_suite_tasks("builtin", None)
        kb, kb_source = kernelbench_tasks(path, Path(tmp))
        groups = {"builtin": builtin, "kernelbench": kb}
        sources = {"builtin": "the built-in suite (PyTorch references)", "kernelbench": f"level 1, {kb_source}"}
        summary = summarise(measure(groups, make_lookup(args.corpus, args.baseline), args.corpus))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(report(summary, sources, args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
