"""What this machine gives a candidate sandbox (capabilities.probe) and what confinement costs.

  PYTHONPATH=src python benchmarks/sandbox_probe.py [--forks 50] [--imports 3] [--json out.json]

Measures, in forked children of this process (as the judge's worker forks its candidates):
- the per-child cost of landlock.apply(torch_policy(...)) and of the optional layers (empty
  network namespace, PID namespace with a private /proc), median and p90 of N forks, in µs;
- `import torch` + `import triton` + a tiny kernel under TRITON_INTERPRET=1, unconfined and
  confined, in fresh children (nothing imported before the fork: the worst case);
- the same tiny kernel in children of a parent that has torch imported already (the worker's case).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from kernelwright.judge.common import capabilities, isolation, landlock, procs
from kernelwright.judge.sandbox import confinement


def in_child(fn) -> dict:
    ok, text = procs.in_fork(lambda: json.dumps(fn()))
    return json.loads(text) if ok else {"error": text}


def stats_us(samples: list[float]) -> dict:
    samples = sorted(samples)
    return {"n": len(samples), "median_us": round(statistics.median(samples), 1),
            "p90_us": round(samples[int(0.9 * (len(samples) - 1))], 1), "min_us": round(samples[0], 1)}


def setup_cost(n: int, scratch: str, policy: landlock.Policy, pidns: bool = False) -> dict:
    samples, errors = [], []
    for _ in range(n):
        def child():
            t0 = time.perf_counter_ns()
            if pidns:
                _kind, why = isolation.enter_pid_namespace(mount_proc=True)
                if why:
                    return {"error": why}
            applied = landlock.apply(policy)
            t1 = time.perf_counter_ns()
            return {"us": (t1 - t0) / 1e3, "fs": applied.fs, "missing": applied.missing}
        res = in_child(child)
        if "us" in res:
            samples.append(res["us"])
        if res.get("error") or res.get("missing"):
            errors.append(res.get("error") or res.get("missing"))
    out = stats_us(samples) if samples else {}
    if errors:
        out["errors"] = errors[:3]
    return out


KERNEL = """
import torch, triton, triton.language as tl
@triton.jit
def add_one(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + 1.0, mask=i < n)
"""


def import_and_run(scratch: str | None, source: str) -> dict:
    """In a forked child: (confine,) then import the candidate file `source` (which imports torch
    and triton unless the parent did) and run its kernel once."""
    import importlib.util

    os.environ["TRITON_INTERPRET"] = "1"
    t0 = time.perf_counter()
    applied = None
    if scratch:
        confinement.use_scratch(scratch)
        policy = confinement.torch_policy(scratch, sources=[source])
        tp = time.perf_counter()
        applied = landlock.apply(policy)
    t1 = time.perf_counter()
    spec = importlib.util.spec_from_file_location("cand_kernel", source)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t2 = time.perf_counter()
    torch = mod.torch
    x = torch.arange(4096, dtype=torch.float32)
    out = torch.empty_like(x)
    mod.add_one[(4,)](x, out, 4096, BLOCK=1024)
    ok = bool(torch.equal(out, x + 1))
    t3 = time.perf_counter()
    return {"policy_s": (tp - t0) if scratch else 0.0, "apply_s": (t1 - tp) if scratch else 0.0, "import_s": t2 - t1, "kernel_s": t3 - t2, "ok": ok,
            "fs": bool(applied and applied.fs)}


GPU_KERNEL = """
import torch, triton, triton.language as tl
@triton.jit
def add_one(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + 1.0, mask=i < n)
def run():
    x = torch.arange(4096, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    add_one[(4,)](x, out, 4096, BLOCK=1024)
    torch.cuda.synchronize()
    return bool(torch.equal(out, x + 1))
"""


def gpu_variant(base: str, name: str, source: str, extra_write=(), extra_read=(), devices=None,
                pidns=False, netns=False) -> dict:
    """In a fresh child: confine with torch_policy + extras, then CUDA init and a compiled Triton
    kernel. Returns where it failed, if it did."""
    import importlib.util
    import traceback

    scratch = os.path.join(base, "gpu-" + name.replace(" ", "_").replace("/", "_"))
    os.makedirs(scratch, exist_ok=True)
    os.environ.pop("TRITON_INTERPRET", None)
    out: dict = {"variant": name}
    t0 = time.perf_counter()
    try:
        if pidns:
            kind, why = isolation.enter_pid_namespace(mount_proc=True)
            out["pidns"] = kind or why
        if name != "unconfined":
            confinement.use_scratch(scratch)
            pol = confinement.torch_policy(scratch, sources=[source], extra_write=extra_write,
                                       extra_read=extra_read, netns=netns,
                                       **({"devices": devices} if devices is not None else {}))
            out["applied"] = landlock.apply(pol).summary()
        spec = importlib.util.spec_from_file_location("gpu_kernel", source)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out["import_s"] = round(time.perf_counter() - t0, 2)
        out["device_count"] = mod.torch.cuda.device_count()
        out["ok"] = mod.run()
        out["total_s"] = round(time.perf_counter() - t0, 2)
    except BaseException:  # noqa: BLE001
        out["error"] = traceback.format_exc()[-1500:]
    return out


def gpu_main(base: str) -> list:
    source = os.path.join(base, "gpu_kernel.py")
    with open(source, "w") as f:
        f.write(GPU_KERNEL)
    variants = [("unconfined", {}), ("torch_policy", {}),
                ("+ write /proc/self", {"extra_write": ["/proc/self", "/proc/thread-self"]}),
                ("+ write /proc", {"extra_write": ["/proc"]}),
                ("+ read /sys /proc, write /proc/self", {"extra_read": ["/sys", "/proc"],
                                                          "extra_write": ["/proc/self", "/proc/thread-self"]}),
                ("+ devices /dev, write /proc", {"devices": ["/dev"], "extra_write": ["/proc"]}),
                ("+ read /", {"extra_read": ["/"]}),
                ("+ read /, write /proc", {"extra_read": ["/"], "extra_write": ["/proc"]}),
                ("+ read /sys", {"extra_read": ["/sys"]}),
                ("+ read /proc", {"extra_read": ["/proc"]}),
                ("+ read /sys /proc", {"extra_read": ["/sys", "/proc"]}),
                ("+ write /dev", {"extra_write": ["/dev"]}),
                ("+ read /etc", {"extra_read": ["/etc"]}),
                ("+ read /sys /proc /etc /run /var, write /dev/shm /dev",
                 {"extra_read": ["/sys", "/proc", "/etc", "/run", "/var"], "extra_write": ["/dev"]}),
                ("pidns+private /proc, read /proc, write /proc/self, netns",
                 {"pidns": True, "netns": True, "extra_read": ["/proc"], "extra_write": ["/proc/self"]})]
    results = []
    for name, kw in variants:
        res = in_child(lambda name=name, kw=kw: gpu_variant(base, name, source, **kw))
        results.append(res)
        print(json.dumps(res), flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forks", type=int, default=50)
    ap.add_argument("--imports", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--gpu", action="store_true", help="only the GPU variants (CUDA + a compiled Triton kernel)")
    ap.add_argument("--cuda-init", action="store_true",
                    help="confine this process with torch_policy, then initialise CUDA (run under strace to see "
                         "what is denied)")
    args = ap.parse_args()
    report: dict = {}
    if args.cuda_init:
        scratch = tempfile.mkdtemp(prefix="kw-sandbox-init-")
        confinement.use_scratch(scratch)
        print(landlock.apply(confinement.torch_policy(scratch)).summary(), flush=True)
        import torch

        torch.cuda.init()
        print("cuda init ok:", torch.cuda.get_device_name(0), flush=True)
        return
    if args.gpu:
        print(capabilities.probe().summary(), flush=True)
        report["gpu"] = gpu_main(tempfile.mkdtemp(prefix="kw-sandbox-gpu-"))
        # The judge's case: the worker has torch and triton imported (CUDA not initialised) when
        # it forks a child, so the child's imports are already done before it is confined.
        import torch
        import triton

        print("-- parent has torch and triton imported --", flush=True)
        report["gpu_parent_imported"] = gpu_main(tempfile.mkdtemp(prefix="kw-sandbox-gpu-"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
        return

    t0 = time.perf_counter()
    caps = capabilities.probe()
    report["probe_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    report["probe"] = caps.as_dict()
    print(f"probe ({report['probe_ms']} ms): {caps.summary()}")
    for k, v in caps.notes.items():
        print(f"  {k}: {v}")

    base = tempfile.mkdtemp(prefix="kw-sandbox-probe-")
    scratch = os.path.join(base, "scratch")
    os.makedirs(scratch)
    source = os.path.join(base, "cand_kernel.py")
    with open(source, "w") as f:
        f.write(KERNEL)
    t0 = time.perf_counter()
    policy = confinement.torch_policy(scratch)
    report["policy_build_us"] = round((time.perf_counter() - t0) * 1e6, 1)
    n_rules = sum(len(p) for p in (policy.read, policy.exec, policy.write, policy.devices))
    print(f"torch_policy: {n_rules} paths, built in {report['policy_build_us']} µs (in the worker, once)")

    variants = {
        "fork only (baseline)": (landlock.Policy(), "none"),
        "apply(torch_policy)": (policy, "landlock"),
        "apply(torch_policy, netns=True)": (confinement.torch_policy(scratch, netns=True), "landlock"),
        "apply(torch_policy) + PID ns + private /proc": (policy, "pidns"),
    }
    report["setup"] = {}
    for name, (pol, kind) in variants.items():
        if kind == "none":
            samples = []
            for _ in range(args.forks):
                t = time.perf_counter_ns()
                res = in_child(lambda: {"t": time.perf_counter_ns()})
                samples.append((res["t"] - t) / 1e3)
            res = stats_us(samples)
            name = "fork → child running (baseline, not apply)"
        else:
            res = setup_cost(args.forks, scratch, pol, pidns=(kind == "pidns"))
        report["setup"][name] = res
        print(f"{name}: {res}")

    runs: dict = {"unconfined": [], "confined": []}
    for i in range(args.imports):
        for label in (("unconfined", "confined") if i % 2 == 0 else ("confined", "unconfined")):
            sc = os.path.join(base, f"imp-{label}-{i}")
            os.makedirs(sc)
            runs[label].append(in_child(lambda sc=sc, label=label: import_and_run(sc if label == "confined" else None, source)))
    report["import_torch_fresh_child"] = {}
    for label, rs in runs.items():
        bad = [r for r in rs if not r.get("ok")]
        summary = {k: round(statistics.median(r[k] for r in rs if k in r), 3)
                   for k in ("policy_s", "apply_s", "import_s", "kernel_s")} if not bad else {"errors": bad}
        report["import_torch_fresh_child"][label] = summary
        print(f"import torch+triton and run a kernel (TRITON_INTERPRET=1), fresh child, {label}: {summary}")

    import torch  # noqa: F401 - now this process is a worker with torch and triton imported
    import triton
    import triton.language  # noqa: F401
    warm: dict = {"unconfined": [], "confined": []}
    for i in range(max(args.imports, 5)):
        for label in ("unconfined", "confined"):
            sc = os.path.join(base, f"warm-{label}-{i}")
            os.makedirs(sc)
            warm[label].append(in_child(lambda sc=sc, label=label: import_and_run(sc if label == "confined" else None, source)))
    report["kernel_torch_preimported"] = {}
    for label, rs in warm.items():
        summary = {k: round(statistics.median(r[k] for r in rs if k in r) * 1e3, 2) for k in ("policy_s", "apply_s", "kernel_s")}
        summary["all_ok"] = all(r.get("ok") for r in rs)
        report["kernel_torch_preimported"][label] = summary
        print(f"kernel in a child of a parent with torch imported, {label} (ms): {summary}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
