"""Autotuning fidelity (issue 20, item 6): is the config the judge times the one the candidate would
pick alone at that key? And when it is not, how much slower is it?

The judge does not let `@triton.autotune` tune freely at timing: checks tune on a short budget and
remember, per key, the SHORTLIST_CONFIGS fastest; the timing turn drops every choice and tunes
again among that shortlist only, on TuningBench's budget (judge/autotuning.py). For each autotuned task of
a GEAK suite (TritonBench-revised or ROCm), this script

  (a) judges the golden code as the candidate with the real JudgePool and reads, per timed perf case,
      the config each autotuned kernel was timed with (`verdict.cases[i].timing["tuned"]["cand"]`,
      and the reference side's, `["ref"]`: the same code, tuned in another process);
  (b) in a fresh Python process per task (no judge; the golden code is the benchmark's own), builds
      the same perf case's inputs the way the judge's child does (`Harness._bound`: the task's own
      `call_for`, seeded with the case's seed), imports the golden module, calls the entry point
      once per case with Triton's autotuner untouched (its default benchmarker, every config), and
      records for every autotuned kernel its pick (`best_config`) and `configs_timings`;
  (c) compares: the same config is "agree"; another is "differ", with the speed difference
      t(judge's config) / t(standalone pick) - 1 from the standalone's own timings (medians; the
      20-80% spread of both is kept, "in spread" when the two spreads overlap), or "pruned" when
      the judge's config is not among the configs the standalone timed.

    PYTHONPATH=src python benchmarks/autotune_fidelity.py --path .geak/GEAK-eval \\
        --tasks max_reduction logsumexp_fwd --max-perf-cases 1 --seconds 60 --out fidelity.json

The run stops starting tasks when the budget (`--seconds`, the whole run) is nearly spent and writes
the JSON after every task, so a run cut short keeps what it did. `--device cpu` runs the plumbing
under the Triton interpreter (autotuners do run there, but their timings are interpreter times:
meaningless for speed; the output says so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

AUTOTUNED = re.compile(r"^\s*@\s*(?:triton\s*\.\s*)?autotune\b", re.M)
SUITES = ("tritonbench-revised", "rocm")
# config fields left out of the table (kept in the JSON) when they hold these defaults
DEFAULT_FIELDS = re.compile(r",?\s*\b(?:num_ctas: 1|maxnreg: None|num_buffers_warp_spec: 0|num_consumer_groups: 0|"
                            r"reg_dec_producer: 0|reg_inc_consumer: 0|ir_override: None)\b")


# -- the standalone process ---------------------------------------------------------------------
def standalone(spec_path: str) -> None:
    """Run in a fresh process: load the task and its golden code, wait for the cases on stdin (one
    JSON line), then call the entry point once per case and write what every autotuner picked."""
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    result: dict = {"cases": [], "ready_s": None}

    def write() -> None:
        out.write_text(json.dumps(result, default=str))

    start = time.monotonic()
    try:
        import types
        import weakref

        import torch
        from triton.runtime.autotuner import Autotuner

        from kernelwright.judge.sandbox.harness import Harness
        from kernelwright.tasks import load_task_ref

        # Only *registered* here (no benchmarker, budget or prune of ours): Triton's own autotuner.
        tuners: list = []
        seen: weakref.WeakSet = weakref.WeakSet()
        init = Autotuner.__init__

        def register(self, *args, **kwargs):
            init(self, *args, **kwargs)
            if self not in seen:
                seen.add(self)
                tuners.append(self)

        Autotuner.__init__ = register
        task = load_task_ref(spec["task_ref"])
        impl = task.load_implementation(spec["golden"], "candidate")  # as the judge's candidate side loads it
        device = spec["device"]
        # the judge's own input builder: Harness._bound(impl, "perf_cases", index, seed)
        harness = types.SimpleNamespace(task=task, _generator=torch.Generator, device=device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        result["ready_s"] = round(time.monotonic() - start, 3)
        result["triton"] = __import__("triton").__version__
        write()
        line = sys.stdin.readline()  # the judge's seeds are known once its verdict is in
        cases = json.loads(line) if line.strip() else []
        for case in cases:
            row: dict = {"index": case["index"], "label": case["label"], "seed": case["seed"], "kernels": []}
            result["cases"].append(row)
            # each case tunes afresh at its key, as a process that only ran this case would
            for tuner in tuners:
                getattr(tuner, "cache", {}).clear()
                tuner.best_config = None
                tuner.configs_timings = None
            mark = time.monotonic()
            try:
                fn, args = Harness._bound(harness, impl, "perf_cases", case["index"], case["seed"])
                fn(*args)
                sync()
            except BaseException as exc:  # noqa: BLE001 - reported with the case
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            row["seconds"] = round(time.monotonic() - mark, 3)
            for tuner in tuners:
                best = getattr(tuner, "best_config", None)
                if best is None:  # not called in this case
                    continue
                timings = getattr(tuner, "configs_timings", None)
                row["kernels"].append({
                    "kernel": getattr(getattr(tuner, "base_fn", None), "__name__", "kernel"),
                    "best": str(best),
                    "n_configs": len(getattr(tuner, "configs", None) or ()),
                    "keys_tuned": len(getattr(tuner, "cache", {}) or {}),
                    "bench_s": round(float(getattr(tuner, "bench_time", 0.0) or 0.0), 3),
                    "timings_ms": ({str(c): _quantiles(v) for c, v in timings.items()}
                                   if isinstance(timings, dict) else None)})
            write()
    except BaseException as exc:  # noqa: BLE001
        result["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    write()


def _quantiles(value) -> list[float]:
    """[median, p20, p80] in ms (Triton's autotuner benchmarks with quantiles (0.5, 0.2, 0.8))."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    items = [float(v) for v in items] + [float(items[0])] * (3 - len(items))
    return items[:3]


# -- comparison ---------------------------------------------------------------------------------
def compare(judged: dict[str, str], alone: list[dict]) -> list[dict]:
    """One row per kernel: the judge's timed config against the standalone process's pick."""
    rows = []
    by_name = {k["kernel"]: k for k in alone}
    for name in sorted(set(judged) | set(by_name)):
        mine, solo = judged.get(name), by_name.get(name)
        row = {"kernel": name, "judge": mine, "alone": solo["best"] if solo else None}
        if mine is None or solo is None:
            row["outcome"] = "only alone" if mine is None else "not in case alone"
            if mine is not None:
                row["note"] = ("this perf case never launched it alone: the judge lists every autotuner's last "
                               "choice, kernels only the correctness tests launch included")
        elif mine == solo["best"]:
            row["outcome"] = "agree"
        else:
            timings = solo.get("timings_ms") or {}
            if mine in timings and solo["best"] in timings:
                (tj, lj, hj), (tp, lp, hp) = timings[mine], timings[solo["best"]]
                row.update(outcome="differ", slower=round(tj / tp - 1, 4) if tp > 0 else None,
                           judge_ms=timings[mine], alone_ms=timings[solo["best"]],
                           in_spread=bool(lj <= hp and lp <= hj))
            else:
                row["outcome"] = ("pruned" if timings else "differ, no timings alone")
                row["note"] = ("the judge's config is not among the configs the standalone autotuner timed "
                               "(pruned there)" if timings else "the standalone autotuner did not benchmark "
                               "(a single config after pruning)")
        rows.append(row)
    return rows


def short(config: str | None) -> str:
    return DEFAULT_FIELDS.sub("", config).strip(" ,") if config else "-"


# -- the run --------------------------------------------------------------------------------------
def autotuned_stems(suite: str, root: Path) -> list[str]:
    from kernelwright.suites import geak_source as geak

    files = geak.tritonbench_files(root) if suite == "tritonbench-revised" else geak.rocm_files(root)
    return [f.stem for f in files if AUTOTUNED.search(geak.split_source(f.read_text())[0])]


CUDA_TO_CPU = ((re.compile(r"""device\s*=\s*(['"])cuda(:0)?\1"""), 'device="cpu"'),
               (re.compile(r"\.cuda\(\)"), ".cpu()"),
               (re.compile(r"\btorch\.cuda\.device\("), '__import__("contextlib").nullcontext('))
# Under the interpreter Triton's autotuner has no benchmarker ("0 active drivers"): the CPU copy hands
# each autotuner this wall-clock one (interpreter times: the plumbing runs, the picks mean nothing).
CPU_BENCH = '''
def _kw_cpu_bench(fn, quantiles=None):  # added by autotune_fidelity.py --device cpu
    import time
    fn()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return [times[1], times[0], times[2]]

'''
AUTOTUNE_CALL = re.compile(r"^@\s*((?:triton\s*\.\s*)?autotune)\s*\(", re.M)


def cpu_mirror(root: Path, suite: str, stems: list[str], into: Path) -> Path:
    """CPU dry runs only: a GEAK-eval layout holding the chosen tasks' golden files (and perf
    scripts, and the instruction JSON) with their CUDA device requests turned into CPU ones."""
    from kernelwright.suites import geak_source as geak

    data, perf, info = ((geak.TRITONBENCH_DIR, geak.TRITONBENCH_PERF_DIR, geak.TRITONBENCH_JSON)
                        if suite == "tritonbench-revised" else (geak.ROCM_DIR, None, geak.ROCM_JSON))
    files = [(Path(data) / f"{s}.py") for s in stems] + ([Path(perf) / f"{s}_perf.py" for s in stems] if perf else [])
    for rel in files:
        if not (root / rel).is_file():
            continue
        text = (root / rel).read_text()
        for pattern, repl in CUDA_TO_CPU:
            text = pattern.sub(repl, text)
        first = AUTOTUNE_CALL.search(text)
        if first and rel.parent == Path(data):
            text = (text[:first.start()] + CPU_BENCH
                    + AUTOTUNE_CALL.sub(r"@\1(do_bench=_kw_cpu_bench, ", text[first.start():]))
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_text(text)
    if (root / info).is_file():
        (into / info).parent.mkdir(parents=True, exist_ok=True)
        (into / info).write_text((root / info).read_text())
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=SUITES, default="tritonbench-revised")
    parser.add_argument("--path", type=Path, help="the GEAK-eval checkout")
    from kernelwright.cli.options import add_tasks_argument

    add_tasks_argument(parser, help="task names (default: every autotuned one of the suite)")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--device", default="auto", help="auto | cuda | cpu (cpu: the plumbing only)")
    parser.add_argument("--max-perf-cases", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0, help="budget of the whole run")
    parser.add_argument("--min-left", type=float, default=12.0,
                        help="do not start a task with less than this many seconds of the budget left")
    parser.add_argument("--seed", type=int, default=20, help="the judge's base seed")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="start each standalone process only after the judge's verdict (by default it "
                             "imports torch and the golden module while the judge works, then waits)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--standalone", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.standalone:
        return standalone(args.standalone)
    begun = time.monotonic()
    deadline = begun + args.seconds

    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.judge.coordinator.pool import detect_backend
    from kernelwright.suites import geak_source as geak
    from kernelwright.tasks import load_task_ref

    if args.path is None:
        parser.error("--path: the GEAK-eval checkout")
    root = geak.checkout_root(args.path)
    backend, _ = detect_backend(args.device)
    on_cpu = backend == "cpu"
    stems = autotuned_stems(args.suite, root)
    if args.tasks:
        unknown = [t for t in args.tasks if t not in stems]
        if unknown:
            parser.error(f"not autotuned tasks of {args.suite}: {', '.join(unknown)} (autotuned: {', '.join(stems)})")
        stems = list(args.tasks)
    stems = stems[:args.limit] if args.limit else stems
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"autotune_fidelity_{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    if on_cpu:  # GEAK's files ask for CUDA: a copy of the chosen ones that asks for the CPU
        root = cpu_mirror(root, args.suite, stems, work / "checkout")
    options = JudgeOptions(seeds=1, seed=args.seed, max_perf_cases=args.max_perf_cases, perf=True)
    if on_cpu:  # the interpreter: as little timing as the plumbing needs
        options.perf_blocks, options.perf_input_sets, options.block_ms = 2, 1, 1.0
        options.min_calls_per_block, options.warmup_ms = 2, 1.0
    note = ("CPU dry run: Triton interpreter; every time here (judge and standalone) is an interpreter time, "
            "meaningless for speed (the CPU copy of each golden file gives its autotuners a wall-clock benchmarker, "
            "which the interpreter lacks); only the plumbing is shown" if on_cpu else "")
    summary: dict = {"suite": args.suite, "device": backend, "note": note, "budget_s": args.seconds,
                     "method": "judge: JudgePool, golden code as the candidate, JudgeOptions(seeds=1, max_perf_cases="
                               f"{args.max_perf_cases}); alone: a fresh process per task, Triton's autotuner untouched "
                               "(its default benchmarker over every config), each timed case tuned afresh at its key",
                     "work_dir": str(work), "planned": stems, "tasks": [], "partial": True}
    if note:
        print(f"NOTE: {note}", flush=True)

    def save() -> None:
        summary["device_name"] = pool.device_info.get("name") if pool is not None else None
        if args.out:
            args.out.write_text(json.dumps(summary, indent=2, default=str) + "\n")

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    if on_cpu:
        env["TRITON_INTERPRET"] = "1"

    def spawn(stem: str, ref: str, golden: str):
        spec = {"task_ref": ref, "golden": golden, "device": "cpu" if on_cpu else "cuda",
                "out": str(work / f"{stem}.json")}
        (work / f"{stem}.spec.json").write_text(json.dumps(spec))
        log = open(work / f"{stem}.log", "w")
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--standalone",
                                 str(work / f"{stem}.spec.json")], stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT, env=env, text=True, cwd=str(ROOT))
        return proc, log, Path(spec["out"])

    pool = None
    with JudgePool(args.device, workers=1, options=options, workers_per_device=1) as pool:
        pool.start(wait=False)
        for stem in stems:
            left = deadline - time.monotonic()
            if left < args.min_left:
                summary["stopped"] = f"budget: {left:.1f} s left before {stem}"
                print(f"stopping: {summary['stopped']}", flush=True)
                break
            entry: dict = {"task": stem}
            summary["tasks"].append(entry)
            mark = time.monotonic()
            ref = f"{args.suite}:{root}::{stem}"
            proc = log = None
            try:
                task = load_task_ref(ref)  # the suite adapter, as judge-suite builds it
                golden = str(task.reference_impl)
                entry["load_s"] = round(time.monotonic() - mark, 2)
                if not args.no_prewarm:
                    proc, log, out = spawn(stem, ref, golden)
                future = pool.submit(task, Path(golden).read_text(), f"{stem}-golden")
                verdict = future.result(timeout=max(1.0, deadline - time.monotonic()))
                entry.update(stage=verdict.stage, judge_s=round(time.monotonic() - mark - entry["load_s"], 2))
                index = {case.label: i for i, case in enumerate(task.perf_cases)}
                timed = [c for c in verdict.cases if c.kind == "performance" and c.timing and "tuned" in c.timing]
                if not timed:
                    entry["reason"] = (verdict.reason or "no perf case timed")[:300]
                    continue
                cases = [{"index": index[c.label], "label": c.label, "seed": c.seeds[0],
                          "judge": c.timing["tuned"]} for c in timed]
                if proc is None:
                    proc, log, out = spawn(stem, ref, golden)
                mark2 = time.monotonic()
                try:
                    proc.stdin.write(json.dumps([{k: c[k] for k in ("index", "label", "seed")} for c in cases]) + "\n")
                    proc.stdin.close()
                except OSError:  # it died while loading: its output says why
                    pass
                try:
                    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    entry["standalone_timeout"] = True
                entry["standalone_s"] = round(time.monotonic() - mark2, 2)
                alone = json.loads(out.read_text()) if out.is_file() else {"error": "no output"}
                if alone.get("error"):
                    entry["standalone_error"] = alone["error"]
                got = {c["index"]: c for c in alone.get("cases", [])}
                entry["cases"] = []
                for c in cases:
                    solo = got.get(c["index"], {})
                    entry["cases"].append({
                        "label": c["label"], "seed": c["seed"], "judge_tuned": c["judge"],
                        "standalone": solo, "cand": compare(c["judge"].get("cand", {}), solo.get("kernels", [])),
                        "ref": compare(c["judge"].get("ref", {}), solo.get("kernels", []))})
            except Exception as exc:  # noqa: BLE001 - one task's problem is reported, the run goes on
                entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            finally:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if log is not None:
                    log.close()
                    tail = (work / f"{stem}.log").read_text(errors="replace")[-600:]
                    if entry.get("standalone_error") or entry.get("error"):
                        entry["standalone_log_tail"] = tail
                entry["wall_s"] = round(time.monotonic() - mark, 2)
                report_task(entry)
                save()
    summary["partial"] = False
    summary["wall_s"] = round(time.monotonic() - begun, 1)
    rows = [r for t in summary["tasks"] for c in t.get("cases", []) for r in c["cand"]]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    slower = [r["slower"] for r in rows if r.get("slower") is not None]
    summary["totals"] = {"kernels_compared": len(rows), "outcomes": counts,
                         "max_slower": max(slower) if slower else None,
                         "tasks_done": sum(1 for t in summary["tasks"] if t.get("cases")),
                         "tasks_planned": len(stems)}
    save()
    print(json.dumps({k: summary[k] for k in ("device", "device_name", "wall_s", "totals")}, default=str))
    if note:
        print(f"NOTE: {note}")


def report_task(entry: dict) -> None:
    head = f"== {entry['task']}: stage {entry.get('stage', '-')}, judge {entry.get('judge_s', '-')} s, " \
           f"standalone {entry.get('standalone_s', '-')} s"
    print(head, flush=True)
    for what in ("error", "reason", "standalone_error"):
        if entry.get(what):
            print(f"   {what}: {entry[what]}")
    for c in entry.get("cases", []):
        print(f"   {c['label']}")
        ref_of = {r["kernel"]: r["outcome"] for r in c["ref"]}
        for r in c["cand"]:
            diff = ""
            if r.get("slower") is not None:
                diff = f" {100 * r['slower']:+.1f}%{' in spread' if r.get('in_spread') else ''}"
            print(f"     {r['kernel']:28.28s} {r['outcome'] + diff:22s} ref side: {ref_of.get(r['kernel'], '-'):8s} "
                  f"judge [{short(r['judge'])}]  alone [{short(r['alone'])}]")
            if r.get("judge_ms"):
                print(f"       alone, median [p20-p80] ms: judge's config {r['judge_ms'][0]:.4g} "
                      f"[{r['judge_ms'][1]:.4g}-{r['judge_ms'][2]:.4g}], pick {r['alone_ms'][0]:.4g} "
                      f"[{r['alone_ms'][1]:.4g}-{r['alone_ms'][2]:.4g}]")
            if r.get("note"):
                print(f"       {r['note']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
