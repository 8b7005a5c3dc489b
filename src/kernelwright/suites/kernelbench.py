"""Adapter for KernelBench (ScalingIntelligence/KernelBench), read from the user's own checkout.

Layout: `KernelBench/level<L>/<N>_<Name>.py` (levels 1-4, and any later ones). Each file defines
`class Model(nn.Module)`, `get_inputs()` (the forward inputs, at the file's own module-level sizes) and `get_init_inputs()`
(the constructor arguments). A candidate is a file defining `class ModelNew(nn.Module)`, built with
the same constructor arguments, whose forward must compute with the candidate's own Triton kernels.

Judged as KernelBench does: inputs come from `get_inputs()` under the case seed, both models are
constructed under the same fixed seed (so their parameters match) and moved to the judged device,
and outputs must agree within atol = rtol = 1e-2 (KernelBench's tolerance, for every dtype).
Construction is not timed: each implementation builds its model once and keeps it. The
performance case is the same call at the file's own sizes. KernelBench ships no Triton reference:
the reference is the file's PyTorch `Model`. Beyond KernelBench's check, two hidden cases judge the
same inputs with random signs and at 100x their magnitude (tasks/derived.py): dropped, and
recorded, where Model's outputs on them are not finite.

Task names are identifier-safe: `level1/19_ReLU.py` becomes `L1_19_ReLU` (candidate `L1_19_ReLU.py`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..tasks.derived import derived_cases
from ..tasks.model import FLOAT_DTYPES, Case, EntryPoint, Task, Tolerance
from .adapter import SuiteError, exec_module, from_ref, load_each, seed_everything

DATA_DIR = "KernelBench"
# KernelBench seeds model construction with a fixed seed on both sides so that the weights match.
CONSTRUCTION_SEED = 42
# KernelBench's correctness check: torch.allclose(out, ref, atol=1e-02, rtol=1e-02).
KERNELBENCH_TOLERANCE = Tolerance(1e-2, 1e-2)
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
NO_TRITON_REFERENCE = "KernelBench ships no Triton reference (its reference is the PyTorch Model)"

INSTRUCTION = """\
Write `ModelNew`, a drop-in replacement for the PyTorch `Model` below, using custom Triton kernels
(`@triton.jit`) for its computation. ModelNew must be an `nn.Module` constructed with the same
arguments as Model (`get_init_inputs()`), its `forward` must take the same inputs (`get_inputs()`)
and return the same outputs within atol = rtol = 1e-2. Parameters are created under the same
random seed as Model's, so create them in the same order with the same shapes. The work must be
done by your own Triton kernels: a ModelNew that only calls PyTorch operators fails. It is also
checked on inputs of the same shapes and dtypes drawn from other distributions (other signs, larger
magnitudes), wherever Model is defined on them.
Reply with one complete Python file (imports included) defining ModelNew.

The reference ({relpath}):

```python
{source}
```
"""


def task_name(relpath: str) -> str:
    """`level1/19_ReLU.py` -> `L1_19_ReLU` (a valid identifier and file stem)."""
    level, _, stem = relpath.removesuffix(".py").partition("/")
    name = f"L{level.removeprefix('level')}_{stem}"
    return re.sub(r"\W", "_", name)


def data_root(path: str | Path) -> Path:
    """Accept the KernelBench repository, its `KernelBench` data folder, or a folder inside it;
    return the folder that holds `level1`, `level2`, ..."""
    path = Path(path).expanduser().resolve()
    for candidate in (path, *path.parents):
        for folder in (candidate / DATA_DIR, candidate):
            if folder.is_dir() and any(folder.glob("level*/")):
                return folder
    raise SuiteError(f"{path} is not a KernelBench checkout (no KernelBench/level1 ... folders in it or above it)")


PROBLEM_FILE = re.compile(r"(\d+)_.+\.py")


def benchmark_files(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Problem files relative to the data folder (`level1/19_ReLU.py`), levels and files in natural
    order, and (file, reason) for every Python file of a level folder that is not one, as
    KernelBench's own loader decides: a problem file's name starts with its number, and a file
    kept as `<N>_..._OLD.py` next to the fixed `<N>_...py` is superseded."""
    def natural(p: Path) -> tuple:
        return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.as_posix()))

    files = sorted((p for p in root.glob("level*/*.py") if p.name != "__init__.py"), key=natural)
    current = {(p.parent.name, PROBLEM_FILE.fullmatch(p.name).group(1)) for p in files
               if PROBLEM_FILE.fullmatch(p.name) and not p.stem.endswith("_OLD")}
    chosen, skipped = [], []
    for p in files:
        relpath = p.relative_to(root).as_posix()
        match = PROBLEM_FILE.fullmatch(p.name)
        if not match:
            skipped.append((relpath, "not a problem file: its name does not start with the problem number"))
        elif p.stem.endswith("_OLD") and (p.parent.name, match.group(1)) in current:
            skipped.append((relpath, f"superseded by the fixed problem {match.group(1)} in {p.parent.name}"))
        else:
            chosen.append(relpath)
    return chosen, skipped


def _check_defines(tree: ast.Module, path: Path) -> None:
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        raise SuiteError(f"{path.name} does not define {', '.join(missing)}")


@dataclass
class KernelBenchImpl:
    """A model class (reference `Model` or candidate `ModelNew`) plus the benchmark file's input
    functions; the module is built once per device and kept (construction is not timed)."""

    model_cls: type
    inputs: dict[str, Any]
    _models: dict[str, Any] = field(default_factory=dict, repr=False)

    def model(self, device) -> Any:
        key = str(device)
        if key not in self._models:
            seed_everything(CONSTRUCTION_SEED)
            init = self.inputs["get_init_inputs"]()
            seed_everything(CONSTRUCTION_SEED)  # KernelBench seeds right before each construction
            # Built on the CPU and moved, like KernelBench: the weights do not depend on the device's RNG.
            self._models[key] = self.model_cls(*init).to(device)
        return self._models[key]


def _loader(reference_path: Path, sizes: dict[str, Any] | None = None) -> Callable[[str, str], KernelBenchImpl]:
    from .kernelbench_shrink import sized_code

    def load(path: str, module_name: str) -> KernelBenchImpl:
        # The benchmark file's get_inputs/get_init_inputs, in a namespace of their own: in a
        # candidate's process they must not depend on anything the candidate file defines.
        # `sizes`: its module-level sizes under --shrink (kernelbench_shrink.py).
        namespace: dict[str, Any] = {"__name__": "kernelwright_kernelbench_inputs", "__file__": str(reference_path)}
        exec(sized_code(reference_path, sizes), namespace)  # noqa: S102 - benchmark code
        module = exec_module(module_name, Path(path).read_text(), path)
        # The reference side judges the file's own Model; a candidate must bring ModelNew.
        wanted = "ModelNew" if module_name == "candidate" else "Model"
        cls = getattr(module, wanted, None)
        if not isinstance(cls, type):
            raise AttributeError(f"{Path(path).name} does not define a class `{wanted}`")
        return KernelBenchImpl(cls, namespace)

    return load


def _bind(impl: KernelBenchImpl, kind: str, case: Case, gen) -> tuple[Callable, tuple]:
    import torch

    device = gen.device
    model = impl.model(device)  # first, so that construction never shifts the inputs' RNG stream
    seed_everything(gen.initial_seed())
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in impl.inputs["get_inputs"]()]

    def forward(*args):
        with torch.no_grad():  # KernelBench evaluates without autograd
            return model(*args)

    return forward, tuple(inputs)


def _sizes(impl: KernelBenchImpl, kind: str, case: Case) -> tuple[int, int] | None:
    """(input bytes, output bytes) of the file's `get_inputs()` and of the model's outputs, from
    meta tensors (nothing allocated: `torch.rand(...)` under the meta device makes only a shape),
    or None where the file builds its inputs another way. Outputs the meta device cannot compute
    count 0."""
    import torch

    def nbytes(values) -> int:
        if isinstance(values, torch.Tensor):
            return values.numel() * values.element_size()
        if isinstance(values, (list, tuple)):
            return sum(nbytes(v) for v in values)
        if isinstance(values, dict):
            return sum(nbytes(v) for v in values.values())
        return 0

    try:
        with torch.device("meta"):
            inputs = impl.inputs["get_inputs"]()
        size_in = nbytes(inputs)
    except Exception:  # noqa: BLE001 - not a file whose sizes can be read off; judged as it is
        return None
    size_out = 0
    try:
        with torch.device("meta"), torch.no_grad():
            model = impl.model_cls(*impl.inputs["get_init_inputs"]())
            size_out = nbytes(model(*[x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]))
    except Exception:  # noqa: BLE001
        pass
    return size_in, size_out


def _input_bytes(namespace: dict[str, Any]) -> int | None:
    """The bytes of a problem's inputs and outputs (`_sizes`), from its executed file's namespace."""
    found = _sizes(KernelBenchImpl(namespace["Model"], namespace), "correctness", None)
    return sum(found) if found else None


def _shrinker(root: Path, relpath: str) -> Callable[[float], tuple[Task, str]]:
    """--shrink F (tasks/shrink.py): the problem with its module-level sizes scaled."""
    def shrink(factor: float) -> tuple[Task, str]:
        from .kernelbench_shrink import shrunk_sizes

        fitted = shrunk_sizes(root / relpath, factor, _input_bytes)
        if not fitted["sizes"]:
            return kernelbench_task(root, relpath), "no module-level int sizes to scale: judged at its own sizes"
        sizes = ", ".join(f"{k}={v}" for k, v in fitted["sizes"].items())
        return kernelbench_task(root, relpath, fitted["sizes"]), f"{sizes} ({fitted['ratio']:.3g} of the bytes)"

    return shrink


def kernelbench_task(root: Path, relpath: str, sizes: dict[str, Any] | None = None) -> Task:
    """The task of one problem file; `sizes`: its module-level sizes replaced (--shrink)."""
    path = root / relpath
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise SuiteError(f"{relpath} does not parse: {exc.msg} at line {exc.lineno}") from None
    _check_defines(tree, path)
    level = relpath.split("/", 1)[0]
    what = "get_inputs() at the file's sizes"
    instruction = INSTRUCTION.format(relpath=relpath, source=source.strip())
    if sizes:
        shown = ", ".join(f"{k} = {v}" for k, v in sizes.items())
        what = f"get_inputs() at shrunk sizes ({shown})"
        instruction += (f"\nJudged at shrunk sizes (--shrink): the file runs with {shown}; ModelNew must take "
                        "its sizes from its constructor arguments and inputs.\n")
    return Task(
        name=task_name(relpath),
        instruction=instruction,
        entry_point=EntryPoint("ModelNew", "class ModelNew(nn.Module): __init__(*get_init_inputs()); "
                                           "forward(*get_inputs())"),
        make_inputs=lambda case, gen: (),
        reference=lambda: None,
        # One case at the file's own sizes; the judge runs it under every seed (KernelBench: 5 trials).
        visible_cases=[Case("any", label=what)],
        # The same inputs from other distributions (signed, large magnitude): one distribution
        # lets wrong kernels pass (an identity "ReLU" on torch.rand inputs); tasks/derived.py.
        hidden_cases=derived_cases(what),
        perf_cases=[Case("any", label=what)],
        source_path=path,
        tolerances={dtype: KERNELBENCH_TOLERANCE for dtype in FLOAT_DTYPES},
        reference_in_float64=False,  # KernelBench compares with the model in its own precision
        tags=("kernelbench", level),
        ref=f"kernelbench:{root}::{relpath}",
        load_impl=_loader(path, sizes),
        shrinker=_shrinker(root, relpath),
        bind=_bind,
        sizes=_sizes,
        reference_impl=path,  # the judge's reference side runs its Model; it is not a Triton reference
        suite="kernelbench",
    )


ADAPTER_LOADERS = {"kernelbench": from_ref(kernelbench_task)}


def load_suite(path: str | Path) -> tuple[list[Task], list[tuple[str, str]]]:
    """All KernelBench tasks of a checkout, and (file, reason) for every file that could not become
    a task: nothing is dropped silently."""
    root = data_root(path)
    files, skipped = benchmark_files(root)
    tasks, problems = load_each(kernelbench_task, root, ((relpath, relpath) for relpath in files))
    return tasks, skipped + problems
