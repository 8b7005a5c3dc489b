"""What disturbs a timing turn: a tiny kernel is timed in blocks (as the judge times a perf case)
while other processes do what a suite run's other workers do outside the GPU lock, one kind of
activity at a time. A block is "disturbed" when its median is more than 1.5x the run's fastest
block median (the judge's retiming threshold, BLOCK_SPREAD_LIMIT).

In TritonBench A/A runs on the H200, 5 of 3,239 perf-case sides had one to three blocks of a
5-8 us kernel measured at 37-100 us (docs/benchmarks.md, ninth session). Suspects, each a mode:
  idle      nothing else runs (the baseline)
  contexts  processes that start, create a CUDA context (as every judge child does when forked,
            without holding the GPU lock) and exit, two at a time
  compile   processes compiling Triton kernels on every core (CPU only)
  copies    a process copying 256 MiB from the GPU to the host in a loop (before the ninth session's
            fix, a child encoded a test item's outputs this way after letting go of the lock)
  frees     a process allocating 4 GiB and giving it back to the driver (empty_cache) in a loop
            (before the same fix, children did this after letting go of the lock)
  kernels   a process launching kernels continuously (what the lock is for: the control)

On the H200 (docs/benchmarks.md, tenth session) no suspect moved a 7 us kernel's blocks by more than 7%
(another process's kernels, the control: 22%).

usage: python benchmarks/disturbance.py [--seconds 15] [--modes idle contexts ...] [--out FILE]
Needs a GPU; prints one line per mode and writes the block medians as JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SPREAD_LIMIT = 1.5
CALLS_PER_BLOCK = 34
PAD_CYCLES = 400_000  # about 200 us at the H200's clock

CONTEXT = "import torch; torch.cuda.init(); torch.empty(1, device='cuda'); torch.cuda.synchronize()"
KERNELS = ("import torch, time\nx = torch.randn(1 << 22, device='cuda')\nend = time.time() + {seconds}\n"
           "while time.time() < end:\n    x.mul_(1.0000001)\n    torch.cuda.synchronize()\n")
COPIES = ("import torch, time\nx = torch.randn(1 << 26, device='cuda')\nend = time.time() + {seconds}\n"
          "while time.time() < end:\n    x.cpu()\n")
FREES = ("import torch, time\nend = time.time() + {seconds}\n"
         "while time.time() < end:\n    x = torch.empty(1 << 32, dtype=torch.uint8, device='cuda')\n"
         "    del x\n    torch.cuda.empty_cache()\n")  # no kernel touches it: mapping and unmapping only
COMPILE = """
import os, time, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
@triton.jit
def k(x_ptr, n, B: tl.constexpr, S: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + o, mask=o < n)
    for _ in tl.static_range(S):
        x = x * 1.0001 + 0.5
    tl.store(x_ptr + o, x, mask=o < n)
end, i = time.time() + {seconds}, 0
target = GPUTarget("cuda", 90, 32)
while time.time() < end:
    i += 1
    triton.compile(triton.compiler.ASTSource(fn=k, signature={{"x_ptr": "*fp32", "n": "i32", "B": "constexpr", "S": "constexpr"}},
                   constexprs={{"B": 1024, "S": 8 + i % 64}}), target=target)
"""


def disturber(mode: str, seconds: float) -> list[subprocess.Popen]:
    env = dict(os.environ, TRITON_CACHE_DIR=f"/tmp/kw-disturbance-{os.getpid()}")
    if mode in ("kernels", "copies", "frees"):
        script = {"kernels": KERNELS, "copies": COPIES, "frees": FREES}[mode]
        return [subprocess.Popen([sys.executable, "-c", script.format(seconds=seconds)])]
    if mode == "compile":
        # @triton.jit reads its function's source, so the script must be a file (`python -c` fails)
        path = Path(env["TRITON_CACHE_DIR"] + ".py")
        path.write_text(COMPILE.format(seconds=seconds))
        return [subprocess.Popen([sys.executable, str(path)], env=env) for _ in range(os.cpu_count() or 2)]
    if mode == "contexts":
        loop = (f"import subprocess, sys, time\nend = time.time() + {seconds}\n"
                f"while time.time() < end:\n    subprocess.run([sys.executable, '-c', {CONTEXT!r}])\n")
        return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    return []


def time_blocks(seconds: float) -> list[float]:
    """Block medians (ms per call) of a ~5 us elementwise kernel, for `seconds`."""
    import torch

    x = torch.randn(2048, 16, device="cuda")
    w = torch.randn(16, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(100):
        (x * w).sum(dim=1)
    torch.cuda.synchronize()
    medians, stop = [], time.time() + seconds
    while time.time() < stop:
        times = []
        for _ in range(CALLS_PER_BLOCK):
            # The judge's pad: both kernels are queued before the start event fires. 20,000 cycles
            # (~10 us) were too short for two launches from Python, so the first run (tenth
            # session) timed host launch latency as well: idle blocks 32-44 us, blocks next to
            # another process's kernels 7.5 us. 200 us covers the launches.
            torch.cuda._sleep(PAD_CYCLES)
            start.record()
            (x * w).sum(dim=1)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        medians.append(statistics.median(times))
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0, help="per mode")
    modes = ["idle", "contexts", "compile", "copies", "frees", "kernels"]
    parser.add_argument("--modes", nargs="+", default=modes, choices=modes)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("disturbance.py needs a GPU")
    results = {}
    for mode in args.modes:
        others = disturber(mode, args.seconds + 5)
        time.sleep(2.0 if others else 0.0)  # let them get going
        medians = time_blocks(args.seconds)
        for proc in others:
            proc.kill()
            proc.wait()
        fastest = min(medians)
        disturbed = [m for m in medians if m > SPREAD_LIMIT * fastest]
        results[mode] = {"blocks": len(medians), "disturbed": len(disturbed), "fastest_ms": fastest,
                         "median_ms": statistics.median(medians), "worst_ms": max(medians), "medians": medians}
        print(f"{mode:9s} {len(medians):6d} blocks, {len(disturbed):5d} disturbed (>{SPREAD_LIMIT}x the fastest); "
              f"median {statistics.median(medians) * 1e3:.1f} us, fastest {fastest * 1e3:.1f}, "
              f"worst {max(medians) * 1e3:.1f}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
