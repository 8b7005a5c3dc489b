"""GEAK-eval's file conventions, shared by its two suites (`geak.py`: TritonBench-revised,
`geak_rocm.py`: ROCm) and by TritonBench-T, which uses the same layout: where a checkout keeps
its files, the 146-`#` separator between a golden kernel and its test code, the test code's own
calls that the judge makes instead, GEAK's tolerances, and the fields every GEAK task shares.

Backend-specific libdevice imports (`tl.extra.cuda.libdevice`, `tl.extra.hip.libdevice`) are rewritten
to Triton's portable `tl.extra.libdevice` in references and candidates alike, so a kernel written for
one vendor runs on the other; code that calls AMD-only device functions directly (`__ocml_*`,
`__triton_hip_*`) is marked as requiring ROCm, with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..tasks.model import Task, Tolerance
from .adapter import SuiteError, without_definitions


SEPARATOR = re.compile(r"^#{146}[ \t]*$", re.M)
TRITONBENCH_DIR = "geak_eval/data/TritonBench/data/TritonBench_G_v1"
TRITONBENCH_JSON = "geak_eval/data/TritonBench/data/TritonBench_G_comp_alpac_v1_fixed_with_difficulty.json"
TRITONBENCH_PERF_DIR = "geak_eval/data/TritonBench/performance_metrics/perf_G/golden_metrics"
ROCM_DIR = "geak_eval/data/ROCm/data/ROCm_v1"
ROCM_JSON = "geak_eval/data/ROCm/data/ROCm_eval_complex_instruct_v1.json"
GOLDEN_PACKAGE = "geak_eval.data.TritonBench.data.TritonBench_G_v1"
GEAK_TOLERANCES = {
    "float64": Tolerance(1e-7, 1e-7),
    "float32": Tolerance(1e-4, 1e-4),
    "float16": Tolerance(1e-2, 1e-2),
    "bfloat16": Tolerance(2e-2, 2e-2),
    "float8_e4m3fn": Tolerance(1.25e-1, 1.25e-1),
    "float8_e5m2": Tolerance(2.5e-1, 2.5e-1),
}
AMD_ONLY = re.compile(r"__ocml_\w+|__triton_hip_\w+|\btl\.extra\.hip\b(?!\.libdevice)|language\.extra\.hip\b(?!\.libdevice)")


# GEAK-eval's files were written for older Triton releases, which let a kernel read a plain
# module-level int (`BLOCK = 1024`) as a constant; current Triton (3.6 on the H200) refuses it
# unless this knob is set (its own error message names it). Set before any worker starts, so
# references and candidates of these suites compile under the same, GEAK-compatible rule.
os.environ.setdefault("TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "1")


def portable_libdevice(source: str) -> str:
    """Rewrite vendor-specific libdevice access to Triton's dispatching `extra.libdevice`."""
    source = re.sub(r"\b(tl|triton\.language)\.extra\.(?:cuda|hip)\.libdevice\b", r"\1.extra.libdevice", source)
    source = re.sub(r"from\s+triton\.language\.extra\.(?:cuda|hip)\s+import\s+libdevice",
                    "from triton.language.extra import libdevice", source)
    source = re.sub(r"from\s+triton\.language\.extra\.(?:cuda|hip)\.libdevice\s+import",
                    "from triton.language.extra.libdevice import", source)
    source = re.sub(r"import\s+triton\.language\.extra\.(?:cuda|hip)\.libdevice\s+as",
                    "import triton.language.extra.libdevice as", source)
    return source


def split_source(text: str) -> tuple[str, str | None]:
    """(kernel code, test code) around the 146-`#` separator; test code is None without one."""
    match = SEPARATOR.search(text)
    if match is None:
        return text, None
    return text[: match.start()], text[match.end():]


def strip_test_calls(test_code: str, operator_names: frozenset[str] = frozenset()) -> tuple[str, str]:
    """Drop the module-level `result_gold = test_x()` (the judge calls the test itself) and return
    (test code, test function name). Definitions that shadow a name of the golden kernel code are
    dropped too: quantize_kv_copy's test section redefines its kernel and wrapper, which would
    replace the candidate's code with the golden's in the candidate's own module."""
    tree = ast.parse(without_definitions(test_code, operator_names))
    test_name = None
    body = []
    for node in tree.body:
        call = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("test"):
            test_name = test_name or call.func.id
            continue
        body.append(node)
    if test_name is None:
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
        if not names:
            raise SuiteError("no test_* function after the separator")
        test_name = names[0]
    tree.body = body
    return ast.unparse(tree), test_name


@lru_cache(maxsize=4)
def instructions(json_path: str, key: str = "file") -> dict[str, dict]:
    path = Path(json_path)
    if not path.is_file():
        return {}
    return {Path(item[key]).name: item for item in json.loads(path.read_text())}


def checkout_root(path: str | Path) -> Path:
    """Accept the GEAK-eval checkout or any folder inside it; return the checkout root."""
    path = Path(path).expanduser().resolve()
    for candidate in (path, *path.parents):
        if (candidate / "geak_eval" / "data").is_dir():
            return candidate
    raise SuiteError(f"{path} is not a GEAK-eval checkout (no geak_eval/data folder in it or above it)")


def suite_files(root: Path, relative: str) -> list[Path]:
    folder = root / relative
    if not folder.is_dir():
        raise SuiteError(f"{folder} does not exist: is {root} a GEAK-eval checkout?")
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def tritonbench_files(root: Path) -> list[Path]:
    return suite_files(root, TRITONBENCH_DIR)


def rocm_files(root: Path) -> list[Path]:
    return suite_files(root, ROCM_DIR)


def geak_task(kernel_code: str, **fields: Any) -> Task:
    """The fields every GEAK task shares: a golden reference in native precision, its tolerances,
    no input generator of its own, and whether it needs an AMD GPU."""
    amd = sorted(set(AMD_ONLY.findall(portable_libdevice(kernel_code))))
    return Task(make_inputs=lambda case, gen: (), reference=lambda: None, hidden_cases=[],
                tolerances=dict(GEAK_TOLERANCES), reference_in_float64=False,
                requires_backend="hip" if amd else None,
                requires_reason=f"calls AMD-only device functions ({', '.join(amd[:3])})" if amd else "",
                shrink_unsupported=GEAK_SIZES, **fields)


# why --shrink cannot scale a GEAK task (tasks/shrink.py)
GEAK_SIZES = ("GEAK's sizes are written in each test's code (its calls and pytest parameters), not data "
              "kernelwright can scale")
