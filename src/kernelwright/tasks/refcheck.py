"""Check a task's Triton reference against its PyTorch reference, case by case.

    python -m kernelwright.tasks.refcheck [--interpret | --perf] [--json] TASK_OR_PATH...

On a GPU machine this runs the Triton reference natively on every correctness case. With
`--interpret` it runs under Triton's CPU interpreter instead, which must be switched on through
the TRITON_INTERPRET environment variable *before* triton is first imported: that is why this is a
command (run it in a fresh process) and why nothing here imports triton at module level. The
interpreter emulates bfloat16/float8 wrongly, so cases of those dtypes are skipped under it;
bfloat16 cases are re-run with the same parameters in float16 instead.

The comparison mirrors the judge's rules: outputs must have the dtype and shape of the reference
evaluated on the native-dtype inputs; floating outputs must satisfy |out - ref| <= atol + rtol*|ref|
elementwise with the task's tolerance for their dtype (ref evaluated in float64 on upcast inputs
when the task says so); integer and bool outputs must be equal; no input may be modified.

With `--perf` (GPU only) it also times the Triton reference on every perf case
(triton.testing.do_bench) and reports the achieved bandwidth and FLOP rate from the task's cost
model; perf-sized outputs are only checked for dtype, shape and finiteness, since a float64
reference at those sizes can need more memory than the GPU has.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

INTERPRETER_SKIPS_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2"})
# Under the interpreter a bfloat16 case is still worth running with the same shapes in float16:
# the kernel's indexing, masking and reduction logic is dtype-independent.
INTERPRETER_SUBSTITUTES = {"bfloat16": "float16"}


def load_triton_entry(task) -> Callable[..., Any]:
    """Import the task's Triton reference file and return its entry-point function."""
    path = Path(task.triton_reference)
    spec = importlib.util.spec_from_file_location(f"kernelwright_triton_ref_{task.name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, task.entry_point.name, None)
    if not callable(fn):
        raise AttributeError(f"{path} does not define {task.entry_point.name}()")
    return fn


def compare_outputs(task, outputs: tuple, native: tuple, exact: tuple) -> list[str]:
    """Problems with `outputs` given the native-dtype reference and the (float64) exact one."""
    import torch

    if len(outputs) != len(native):
        return [f"returned {len(outputs)} output(s), the reference returns {len(native)}"]
    problems = []
    for i, (out, nat, ref) in enumerate(zip(outputs, native, exact)):
        what = f"output {i}" if len(native) > 1 else "output"
        if not isinstance(out, torch.Tensor):
            problems.append(f"{what} is a {type(out).__name__}, not a tensor")
            continue
        if out.dtype != nat.dtype or tuple(out.shape) != tuple(nat.shape):
            problems.append(f"{what} is {out.dtype} {tuple(out.shape)}, expected {nat.dtype} {tuple(nat.shape)}")
            continue
        out = out.detach().cpu()
        ref = ref.detach().cpu()
        if not out.is_floating_point():
            bad = out != ref.to(out.dtype)
            if bad.any():
                idx = bad.nonzero()[0].tolist()
                problems.append(f"{what}: {int(bad.sum())} of {out.numel()} elements differ, first at {idx}: "
                                f"{out[tuple(idx)].item()} vs {ref[tuple(idx)].item()}")
            continue
        tol = task.tolerance_for(str(out.dtype).removeprefix("torch."))
        o, r = out.to(torch.float64), ref.to(torch.float64)
        err = (o - r).abs()
        ok = err <= tol.atol + tol.rtol * r.abs()
        ok |= (o == r)  # equal infinities
        ok |= o.isnan() & r.isnan()
        if not ok.all():
            idx = (~ok).nonzero()[0].tolist()
            problems.append(f"{what}: {int((~ok).sum())} of {out.numel()} elements outside atol={tol.atol:g} "
                            f"rtol={tol.rtol:g}; max abs err {err.nan_to_num(float('inf')).max().item():.3g}; "
                            f"first at {idx}: {o[tuple(idx)].item():.8g} vs {r[tuple(idx)].item():.8g}")
    return problems


def check_case(task, fn: Callable[..., Any], case, device: str, seed: int = 0) -> list[str]:
    import torch

    from .validate import as_tuple, make_inputs, run_reference

    args = make_inputs(task, case, seed, device)
    snapshot = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    native = run_reference(task, snapshot, float64=False)
    exact = run_reference(task, snapshot) if task.reference_in_float64 else native
    outputs = as_tuple(fn(*args))
    if device != "cpu":
        torch.cuda.synchronize()
    problems = compare_outputs(task, outputs, native, exact)
    for pos, (before, after) in enumerate(zip(snapshot, args)):
        if pos in task.mutable_args or not isinstance(before, torch.Tensor):
            continue
        if not torch.equal(before, after):
            problems.append(f"argument {pos} was modified")
    return problems


def _short_error(exc: BaseException) -> str:
    """The error and the innermost frames of its cause chain that are not in triton/torch."""
    import traceback

    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    frames = [f for f in traceback.extract_tb(root.__traceback__)
              if "/triton/" not in f.filename and "/torch/" not in f.filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} ({frames[-1].line})" if frames else ""
    return f"{type(root).__name__}: {root}{where}"


def check_task(task, interpret: bool, cases: Sequence | None = None) -> dict[str, Any]:
    """{'task', 'checked': [{case, seconds}], 'skipped': [labels], 'failures': {label: [problems]}}.

    Skipped cases (dtypes the interpreter cannot run) may still appear in 'checked' under a
    substitute dtype, labelled "<label> as float16".
    """
    from .model import Case

    device = "cpu" if interpret else "cuda"
    report: dict[str, Any] = {"task": task.name, "checked": [], "skipped": [], "failures": {}}
    if task.triton_reference is None:
        report["failures"]["-"] = ["task has no triton_reference"]
        return report
    try:
        fn = load_triton_entry(task)
    except Exception as exc:
        report["failures"]["-"] = [f"cannot load Triton reference: {type(exc).__name__}: {exc}"]
        return report
    for case in task.correctness_cases if cases is None else cases:
        if interpret and case.dtype in INTERPRETER_SKIPS_DTYPES:
            report["skipped"].append(case.label)
            if case.dtype not in INTERPRETER_SUBSTITUTES:
                continue
            case = Case(INTERPRETER_SUBSTITUTES[case.dtype], label=f"{case.label} as {INTERPRETER_SUBSTITUTES[case.dtype]}",
                        **case.params)
        started = time.perf_counter()
        try:
            problems = check_case(task, fn, case, device)
        except Exception as exc:
            problems = [f"raised {_short_error(exc)}"]
        report["checked"].append({"case": case.label, "seconds": round(time.perf_counter() - started, 3)})
        if problems:
            report["failures"][case.label] = problems
    return report


def time_perf_cases(task, fn, device: str = "cuda") -> list[dict[str, Any]]:
    """Time the Triton reference on each perf case: microseconds, TB/s and TFLOP/s per cost()."""
    import torch
    from triton.testing import do_bench

    from .validate import as_tuple, make_inputs

    results = []
    for case in task.perf_cases:
        entry: dict[str, Any] = {"case": case.label}
        try:
            args = make_inputs(task, case, 0, device)
            outputs = as_tuple(fn(*args))
            bad = [i for i, o in enumerate(outputs)
                   if not isinstance(o, torch.Tensor) or (o.is_floating_point() and not torch.isfinite(o).all())]
            if bad:
                entry["problem"] = f"output(s) {bad} not finite tensors"
            seconds = do_bench(lambda: fn(*args), warmup=25, rep=100) * 1e-3
            cost = task.cost(case) if task.cost else {}
            entry.update(us=round(seconds * 1e6, 2),
                         tb_per_s=round(cost.get("bytes", 0) / seconds / 1e12, 3),
                         tflop_per_s=round(cost.get("flops", 0) / seconds / 1e12, 2))
        except Exception as exc:
            entry["problem"] = f"raised {_short_error(exc)}"
        finally:
            args = outputs = None
            torch.cuda.empty_cache()
        results.append(entry)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.tasks.refcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", help="built-in task names or task-file paths (default: all built-in)")
    parser.add_argument("--interpret", action="store_true", help="run on the CPU under TRITON_INTERPRET=1")
    parser.add_argument("--perf", action="store_true", help="also time the perf cases (GPU only)")
    parser.add_argument("--json", action="store_true", help="print one JSON report per task")
    opts = parser.parse_args(argv)
    if opts.interpret and opts.perf:
        parser.error("--perf times the GPU; it cannot be combined with --interpret")
    if opts.interpret:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            parser.error("triton was imported before TRITON_INTERPRET=1 could be set; run in a fresh process")
        os.environ["TRITON_INTERPRET"] = "1"

    from .registry import builtin_task_paths, resolve_task

    names = opts.tasks or list(builtin_task_paths())
    failed = 0
    for name in names:
        task = resolve_task(name)
        report = check_task(task, interpret=opts.interpret)
        if opts.perf and task.triton_reference is not None and "-" not in report["failures"]:
            report["perf"] = time_perf_cases(task, load_triton_entry(task))
            for entry in report["perf"]:
                if "problem" in entry:
                    report["failures"][f"perf {entry['case']}"] = [entry["problem"]]
        failed += bool(report["failures"])
        if opts.json:
            print(json.dumps(report), flush=True)
        else:
            status = "FAIL" if report["failures"] else "ok"
            secs = sum(c["seconds"] for c in report["checked"])
            print(f"{status:4} {report['task']}: {len(report['checked'])} checked, "
                  f"{len(report['skipped'])} skipped, {secs:.1f}s", flush=True)
            for entry in report.get("perf", []):
                if "us" in entry:
                    print(f"     perf {entry['case']}: {entry['us']:.1f} us, {entry['tb_per_s']:.2f} TB/s, "
                          f"{entry['tflop_per_s']:.1f} TFLOP/s")
            for label, problems in report["failures"].items():
                for problem in problems:
                    print(f"     [{label}] {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
