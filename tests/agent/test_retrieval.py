"""1-shot example retrieval: tokens, corpora, BM25 ranking and the exclusion of the task's own solution."""

import json
import re
import time
from pathlib import Path

import pytest

from kernelwright.agent.retrieval import (BUILTIN_REFS_DIR, EXCLUDE_SIMILARITY, MAX_EXAMPLE_CHARS, Corpus,
                                          Example, Retriever, load_corpus, similarity, tokenize)
from tests.conftest import GEAK_EVAL

REFS = sorted(BUILTIN_REFS_DIR.glob("*.py"))
SHARED = GEAK_EVAL.parent


def ref(name: str) -> str:
    return (BUILTIN_REFS_DIR / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def retriever():
    return Retriever(load_corpus())


KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def {name}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, {expr}, mask=offs < n)
'''


# -- tokens ----------------------------------------------------------------------------------
def test_tokens_keep_the_triton_api_and_split_identifiers():
    tokens = tokenize("y = tl.load(x_ptr + offs, mask=mask)  # rowMax of BLOCK_SIZE 1024")
    for t in ("tl.load", "tl", "load", "x_ptr", "ptr", "offs", "mask", "rowmax", "row", "max", "block_size",
              "block", "size"):
        assert t in tokens, t
    assert "1024" not in tokens and "y" not in tokens  # numbers and one-letter names are dropped
    assert all(t == t.lower() for t in tokens)


def test_tokens_of_longer_chains_and_digits_inside_names():
    tokens = tokenize("from triton.language.extra import libdevice\nz = x.to(tl.float16) + tl.exp2(y)")
    for t in ("triton.language", "language.extra", "libdevice", "tl.float16", "float16", "tl.exp2", "exp2"):
        assert t in tokens, t
    assert "from" not in tokens and "import" not in tokens


# -- corpora ---------------------------------------------------------------------------------
def test_builtin_corpus_holds_every_triton_reference():
    corpus = load_corpus()
    assert sorted(e.name for e in corpus) == sorted(p.stem for p in REFS)
    assert all("@triton.jit" in e.code and e.source.endswith(".py") for e in corpus)


@pytest.mark.serial  # CPU work bounded by 1 s of wall clock
def test_building_and_querying_is_fast():
    start = time.perf_counter()
    retriever = Retriever(load_corpus())
    for path in REFS:
        retriever.best(path.read_text(), exclude=[path.read_text()])
    assert time.perf_counter() - start < 1.0


def test_examples_without_a_kernel_and_huge_files_are_left_out(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "plain.py").write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "sub" / "k.py").write_text(KERNEL.format(name="k", expr="x * 2"))
    (tmp_path / "huge.py").write_text(KERNEL.format(name="h", expr="x") + "# pad\n" * (MAX_EXAMPLE_CHARS // 6))
    harness = KERNEL.format(name="tb", expr="x + 1") + "#" * 146 + "\n" + "def test_tb():\n    pass\n" * 800
    (tmp_path / "tb.py").write_text(harness)
    corpus = Corpus.from_folder(tmp_path)
    names = {e.name: e for e in corpus}
    assert set(names) == {"sub/k", "tb"}  # recursive; TritonBench harness cut after its '#' separator
    assert "def test_tb" not in names["tb"].code and len(names["tb"].code) < MAX_EXAMPLE_CHARS
    assert names["sub/k"].file_name == "k"


def test_folder_corpus_is_cached_until_a_file_changes(tmp_path):
    (tmp_path / "a.py").write_text(KERNEL.format(name="a", expr="x * 2"))
    first = Corpus.from_folder(tmp_path)
    assert Corpus.from_folder(tmp_path) is first
    (tmp_path / "b.py").write_text(KERNEL.format(name="b", expr="x * 3"))
    assert len(Corpus.from_folder(tmp_path)) == 2


def test_train_crawl_style_json_loads(tmp_path):
    data = [{"repo": "someone/kernels", "file": "ops/relu.py", "code": KERNEL.format(name="relu", expr="tl.maximum(x, 0)")},
            {"code": "print('no kernel here')"},
            {"content": KERNEL.format(name="neg", expr="-x")},
            {"instruction": "write it", "output": KERNEL.format(name="sq", expr="x * x"), "file": "sq.py"},
            "not an object", 42]
    path = tmp_path / "train_crawl.json"
    path.write_text(json.dumps(data))
    corpus = Corpus.from_path(path)
    assert [e.name for e in corpus] == ["relu", "train_crawl[2]", "sq"]
    assert corpus.examples[0].source == f"{path.resolve()}#0"
    combined = load_corpus([path, ])
    assert len(combined) == len(REFS) + 3


def test_bad_corpus_paths_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_corpus([tmp_path / "missing"])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_corpus([bad])


def test_empty_corpus_gives_none(tmp_path):
    assert Retriever(Corpus()).best("x = tl.load(ptr)") is None
    assert Retriever(Corpus.from_folder(tmp_path)).best("x = tl.load(ptr)") is None
    assert Retriever(load_corpus()).best("") is None


# -- exclusion -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", REFS, ids=lambda p: p.stem)
def test_the_tasks_own_reference_is_never_returned(retriever, path):
    code = path.read_text()
    ranked = retriever.ranked(code, exclude=[code], k=len(REFS))
    assert path.stem not in [e.name for e, _ in ranked]
    assert all(similarity(e.code, code) < EXCLUDE_SIMILARITY for e, _ in ranked)


def near_copy(code: str) -> str:
    """The reference with its local names renamed, comments added and the docstring replaced."""
    renames = {"x_ptr": "inp", "out_ptr": "dst", "cols": "col_idx", "mask": "in_bounds", "row": "r",
               "n_cols": "ncols", "stride_x": "sx", "stride_o": "so", "BLOCK": "TILE", "num": "numer",
               "m_new": "running_max", "start": "k0", "alpha": "rescale"}
    for old, new in renames.items():
        code = re.sub(rf"\b{old}\b", new, code)
    code = code.replace("@triton.jit", "# the kernel, one program per row\n@triton.jit")
    return '"""My own softmax."""\n# written from scratch\n' + code.split('"""', 2)[2]


def test_a_near_copy_of_the_reference_is_excluded(retriever):
    original = ref("softmax")
    copy = near_copy(original)
    assert copy != original and similarity(copy, original) >= 0.9
    # the copy as a corpus entry under another name: excluded when the reference is
    corpus = Corpus([Example("my_softmax", copy, "user"), *load_corpus()])
    found = [e.name for e, _ in Retriever(corpus).ranked(original, exclude=[original], k=len(corpus))]
    assert "my_softmax" not in found and "softmax" not in found


def test_same_file_name_is_excluded_even_when_the_code_differs(retriever):
    query = KERNEL.format(name="k", expr="tl.exp(x)")
    corpus = Corpus([Example("ops/softmax", KERNEL.format(name="sm", expr="tl.exp(x) / 2"), "user"),
                     *load_corpus()])
    r = Retriever(corpus)
    assert r.best(query, exclude_names=["softmax.py"]).file_name != "softmax"
    ref_path = BUILTIN_REFS_DIR / "softmax.py"
    assert all(e.file_name != "softmax" for e, _ in r.ranked(query, exclude=[ref_path], k=40))


def test_a_similar_but_different_kernel_is_returned(retriever):
    best = retriever.best(ref("softmax"), exclude=[ref("softmax")])
    assert best.name in ("softmax_long_row", "cross_entropy", "log_softmax")
    best = retriever.best(ref("cross_entropy"), exclude=[ref("cross_entropy")])
    assert "softmax" in best.name
    # bmm's closest kernels, the matmuls, are near-copies of it (shingle similarity ~0.6): excluded;
    # linear_gelu, a tiled matmul with a fused epilogue, is the nearest kernel that is not
    best = retriever.best(ref("bmm"), exclude=[ref("bmm")])
    assert "tl.dot" in best.code and similarity(best.code, ref("bmm")) < EXCLUDE_SIMILARITY
    assert retriever.best(ref("layernorm"), exclude=[ref("layernorm")]).name in ("rmsnorm", "layernorm_backward")


def test_a_softmax_like_query_written_differently_finds_a_softmax_family_kernel(retriever):
    query = '''
@triton.jit
def my_row_softmax(inp, outp, ncols, BS: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BS)
    v = tl.load(inp + r * ncols + c, mask=c < ncols, other=-float("inf"))
    v = v - tl.max(v, axis=0)
    e = tl.exp(v)
    tl.store(outp + r * ncols + c, e / tl.sum(e, axis=0), mask=c < ncols)
'''
    best = retriever.best(query)
    assert best.name in ("softmax", "softmax_long_row", "cross_entropy")
    assert retriever.best(query, exclude=[ref("softmax")]).name in ("softmax_long_row", "cross_entropy", "rmsnorm")


def test_non_triton_exclude_texts_do_not_remove_everything(retriever):
    task_file = (BUILTIN_REFS_DIR.parent / "softmax.py").read_text()  # the PyTorch task definition
    assert retriever.best(ref("softmax"), exclude=[task_file]).name == "softmax"


def test_similarity_is_symmetric_and_ignores_comments():
    a = ref("vector_add")
    assert similarity(a, a) == 1.0
    commented = "\n".join(line + "  # note" if line.strip() else line for line in a.splitlines())
    assert similarity(a, commented) == 1.0
    assert similarity(a, ref("matmul")) == similarity(ref("matmul"), a) < 0.3
    assert similarity("", a) == 0.0


# -- the real data, when the shared checkout is there ------------------------------------------
def _find(name: str) -> Path | None:
    if not SHARED.is_dir():
        return None
    return next(iter(sorted(SHARED.rglob(name))), None)


def test_real_train_crawl_json_loads():
    path = _find("train_crawl.json")
    if path is None:
        pytest.skip("no train_crawl.json under ../shared/benchmarks (a TritonBench checkout)")
    corpus = Corpus.from_path(path)
    assert len(corpus) > 1000 and all("@triton.jit" in e.code for e in corpus)
    assert Retriever(corpus).best(ref("softmax")) is not None


def test_real_tritonbench_instruction_json_and_folder_load():
    data = GEAK_EVAL / "geak_eval" / "data" / "TritonBench" / "data"
    json_path = data / "TritonBench_G_comp_alpac_v1_fixed_with_difficulty.json"
    folder = data / "TritonBench_G_v1"
    if not json_path.is_file() or not folder.is_dir():
        pytest.skip("GEAK-eval data not present under ../shared/benchmarks")
    from_json, from_folder = Corpus.from_path(json_path), Corpus.from_path(folder)
    assert len(from_json) > 150 and len(from_folder) > 150
    assert all("result_gold" not in e.code for e in from_folder)  # the test harness is cut
    # a task's golden file is never its own example, whichever copy of it the corpus holds
    r = Retriever(from_json + from_folder)
    golden = sorted(folder.glob("*.py"))[0]
    found = r.ranked(golden.read_text(), exclude=[golden], k=10)
    assert found and all(e.file_name != golden.stem for e, _ in found)


def test_a_program_found_twice_is_kept_once(tmp_path):
    code = KERNEL.format(name="twice", expr="x * 2")
    (tmp_path / "twice.py").write_text(code)
    (tmp_path / "crawl.json").write_text(json.dumps([{"code": "# a copy\n" + code.replace("\n", "\n\n")}]))
    corpus = load_corpus([tmp_path / "twice.py", tmp_path / "crawl.json"])
    assert len(corpus) == len(REFS) + 1 and corpus.examples[-1].name == "twice"
