"""The 1-shot example fits the task (issue 34 item 4): the kind labeller, operator queries for
PyTorch-form tasks, Triton-code queries unchanged, and the measurement script on its own sample."""

import importlib.util
import json
from pathlib import Path

import pytest

from kernelwright.agent.kinds import kind_of
from kernelwright.agent.operators import is_triton_code, operator_query
from kernelwright.agent.retrieval import BUILTIN_REFS_DIR, Corpus, Example, Retriever, load_corpus
from kernelwright.suites.kernelbench import INSTRUCTION

ROOT = Path(__file__).resolve().parents[2]

RELU_MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that performs a ReLU activation.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def retriever():
    return Retriever(load_corpus())


@pytest.mark.parametrize("source, kind", [
    ("def f(x):\n    return torch.relu(x)", "elementwise"),
    ("def f(x, y):\n    return x + y", "elementwise"),
    ("y = F.leaky_relu(x, negative_slope=0.1)  # max_val is not a max", "elementwise"),
    ("def f(x):\n    return x.sum(dim=1)", "reduction"),
    ("def f(x):\n    return torch.argmax(x, dim=-1)", "reduction"),
    ("def f(x):\n    return torch.cumsum(x, 1)", "reduction"),
    ("def f(p, t):\n    return torch.nn.functional.mse_loss(p, t)", "reduction"),
    ("def f(x):\n    return torch.softmax(x, -1)", "normalisation"),
    ("self.ln = nn.LayerNorm(64)\nreturn self.ln(x)", "normalisation"),
    ("def f(x):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", "normalisation"),
    ("def f(a, b):\n    return a @ b", "matmul"),
    ("self.fc = nn.Linear(8, 16)", "matmul"),
    ("def f(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v", "attention"),
    ("F.scaled_dot_product_attention(q, k, v)", "attention"),
    ("self.conv = nn.Conv2d(3, 8, 3)", "other"),
    ("def f(x):\n    return torch.flip(x, dims=(-1,))", "other"),
    ("@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    o = tl.program_id(0) * B + tl.arange(0, B)\n"
     "    tl.store(x_ptr + o, tl.maximum(tl.load(x_ptr + o), 0.0))", "elementwise"),
    ("@triton.jit\ndef k(x_ptr, o_ptr, N: tl.constexpr):\n    x = tl.load(x_ptr + tl.arange(0, N))\n"
     "    tl.store(o_ptr, tl.sum(x, axis=0))", "reduction"),
    ("@triton.jit\ndef k(a, b, c):\n    acc += tl.dot(a, b)\n", "matmul"),
    ("# softmax, layer_norm and attention mentioned in a comment only\ndef f(x):\n    return x * 2", "elementwise"),
])
def test_the_kind_labeller_reads_operator_names(source, kind):
    assert kind_of(source) == kind


def test_the_builtin_triton_references_have_the_kinds_of_their_tags():
    kinds = {p.stem: kind_of(p.read_text()) for p in BUILTIN_REFS_DIR.glob("*.py")}
    assert kinds["vector_add"] == kinds["gelu"] == kinds["silu"] == "elementwise"
    assert kinds["row_sum"] == kinds["row_argmax"] == kinds["cumsum"] == "reduction"
    assert kinds["softmax"] == kinds["layernorm"] == kinds["rmsnorm"] == "normalisation"
    assert kinds["matmul"] == kinds["bmm"] == kinds["linear_gelu"] == "matmul"
    assert kinds["flash_attention"] == "attention"


def test_a_relu_module_gets_an_elementwise_example(retriever):
    query = INSTRUCTION.format(relpath="level1/19_ReLU.py", source=RELU_MODULE.strip())
    assert not is_triton_code(query)  # the instruction mentions `@triton.jit` in prose only
    example = retriever.best_for(query, query)
    assert example is not None and kind_of(example.code) == "elementwise", example and example.name
    # plain code-token BM25 (the path a Triton query keeps) is what picked flash-attention here
    assert kind_of(retriever.best(query).code) != "elementwise"


def test_the_operators_of_a_relu_module_expand_to_triton_vocabulary():
    weights = operator_query("def f(x):\n    return torch.relu(x)")
    assert weights["relu"] == 1.0 and weights["tl.maximum"] > 0
    assert weights["tl.sum"] < 0 and weights["tl.dot"] < 0  # an elementwise task needs neither
    assert operator_query("just words, no operator") == {}


def test_an_epilogue_does_not_forbid_the_heavy_part():
    weights = operator_query("def f(x, w, b):\n    return torch.relu(x @ w.T + b)")
    assert weights["tl.dot"] > 0 and weights["matmul"] > weights["relu"]


def test_prose_adds_only_operators_of_the_families_the_code_uses():
    weights = operator_query("def reference(a, b):\n    return torch.bmm(a, b)",
                             "Batched matrix multiply, as in attention.")
    assert "attention" not in weights or weights["attention"] < 0


def test_a_small_corpus_gives_an_elementwise_example_for_relu():
    ew = ("@triton.jit\ndef _scale_kernel(x_ptr, n, B: tl.constexpr):\n    o = tl.program_id(0) * B + "
          "tl.arange(0, B)\n    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) * 2.0, mask=o < n)\n")
    red = ("@triton.jit\ndef _rowmax_kernel(x_ptr, o_ptr, model, forward, inputs, N: tl.constexpr):\n"
           "    x = tl.maximum(tl.load(x_ptr + tl.arange(0, N)), 0.0)\n    tl.store(o_ptr, tl.max(x, axis=0))\n")
    retriever = Retriever(Corpus([Example("scale", ew, "t"), Example("rowmax", red, "t")]))
    query = INSTRUCTION.format(relpath="level1/19_ReLU.py", source=RELU_MODULE.strip())
    assert retriever.best_for(query, query).name == "scale"


def test_a_triton_code_query_keeps_the_code_similarity_ranking(retriever):
    query = (BUILTIN_REFS_DIR / "softmax.py").read_text().replace("_softmax_single", "_my_kernel")
    assert is_triton_code(query)
    assert retriever.best_for(query, "an instruction about relu and matmul") == retriever.best(query)
    plain = [ex.name for ex, _ in retriever.ranked(query, k=5)]
    assert plain[0] == "softmax"  # the fixture: its own near-copy ranks first on code similarity
    excluded = [query]
    assert retriever.best_for(query, exclude=excluded) == retriever.best(query, exclude=excluded)


def test_the_measurement_script_runs_on_its_sample(capsys):
    spec = importlib.util.spec_from_file_location("retrieval_quality", ROOT / "benchmarks" / "retrieval_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counted"] >= 50 and summary["rate"] >= 0.8
    assert summary["per_group"]["kernelbench"]["counted"] >= 30


def test_the_agents_retrieve_ranks_a_pytorch_reference_by_operators_leaving_its_own_kernel_out():
    from kernelwright.agent.brief import brief_for
    from kernelwright.agent.session import make_retrieve
    from kernelwright.suites.runner import load_suite_tasks

    tasks = {t.name: t for t in load_suite_tasks("builtin", None)[0]}
    retrieve = make_retrieve()
    for name, kind in (("row_sum", "reduction"), ("vector_add", "elementwise"), ("layernorm", "normalisation")):
        task = tasks[name]
        example = retrieve(brief_for(task).reference_code, task)
        assert example is not None and example.name != name and kind_of(example.code) == kind, (name, example)
