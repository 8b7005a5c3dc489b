"""Seconds the judge spends moving and comparing one large output, on this machine's CPU.

A GEAK test function can return a GiB (ROCm's rmsnorm_fwd: 8192x65536 fp16, eight such cases):
each crosses a child -> worker pipe and is compared on the worker's single thread. This times
the pieces the judge runs for it, old and new where a piece was replaced:

    python benchmarks/data_path.py [--mib 512] [--dtype float16] [--repeats 2] [--json]

- encode: the child's message (one copy of the tensor into it);
- transfer: a writer thread's `send_bytes` and the worker's read, `recv_bytes` + copying decode
  (stock) against `wire.read_frame` + `decode(share=True)` (frame);
- compare: `compare_tensor` on bitwise-equal outputs, on outputs that differ by rounding everywhere
  (within tolerance), and on outputs with one element out of tolerance (the report).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from multiprocessing import Pipe

import torch

from kernelwright.judge.common import wire
from kernelwright.judge.worker.compare import compare_tensor


def timed(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def transfer(message: bytearray, framed: bool) -> None:
    ours, theirs = Pipe()
    sender = threading.Thread(target=theirs.send_bytes, args=(message,))
    sender.start()
    if framed:
        wire.decode(wire.read_frame(ours.fileno(), len(message) + 64), share=True)
    else:
        wire.decode(ours.recv_bytes())
    sender.join()
    ours.close()
    theirs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="output size in MiB (default 512)")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement (median kept)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    torch.set_num_threads(1)  # as in the worker, which compares on one thread
    dtype = getattr(torch, args.dtype)
    numel = (args.mib << 20) // torch.empty((), dtype=dtype).element_size()
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(numel, generator=gen).to(dtype)
    rounded = (ref.float() * (1 + 1e-3 * torch.randn(numel, generator=gen))).to(dtype)
    equal = ref.clone()
    one_bad = rounded.clone()
    one_bad[numel // 2] = 100.0
    message = wire.encode({"outputs": [ref]})

    seconds = {
        "encode": timed(lambda: wire.encode({"outputs": [ref]}), args.repeats),
        "transfer_stock": timed(lambda: transfer(message, framed=False), args.repeats),
        "transfer_frame": timed(lambda: transfer(message, framed=True), args.repeats),
        "compare_equal": timed(lambda: compare_tensor(equal, ref, 1e-3, 1e-2, "o"), args.repeats),
        "compare_rounding": timed(lambda: compare_tensor(rounded, ref, 1e-3, 1e-2, "o"), args.repeats),
        "compare_one_bad": timed(lambda: compare_tensor(one_bad, ref, 1e-3, 1e-2, "o"), 1),
    }
    result = {"mib": args.mib, "dtype": args.dtype, "seconds": {k: round(v, 3) for k, v in seconds.items()}}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.mib} MiB of {args.dtype} (median of {args.repeats}; one_bad once):")
    for name, value in result["seconds"].items():
        print(f"  {name:18s} {value:8.3f} s")


if __name__ == "__main__":
    main()
