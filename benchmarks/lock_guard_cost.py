"""What the lock guard's look costs (issue 20, item 2; `judge/lockguard.py`): the time of one
`candidate_holders` call, the look a worker takes before each request to its candidate, with
`--holders` other processes holding this GPU's lock shared (other workers' checks in flight).
On the H200's gVisor the look, then inside the timing blocks' wall clock, added a median 5.6 ms
per block (docs/benchmarks.md, fourth session of 2026-12-02): this measures it directly.

usage: PYTHONPATH=src python benchmarks/lock_guard_cost.py [--holders 8] [--calls 200] [--out FILE]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

HOLD = ("import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_SH); "
        "print('held', flush=True); sys.stdin.read()")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holders", type=int, default=8, help="processes holding the lock shared meanwhile")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from kernelwright.judge.common import gpulock, lockholders
    from kernelwright.judge.worker import lockguard

    files = gpulock._open_lock_files()
    holders = []
    try:
        for _ in range(args.holders):
            p = subprocess.Popen([sys.executable, "-c", HOLD, gpulock.lock_base() + ".lock"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline().strip() == "held"
            holders.append(p)
        listed = lockholders.flocks_listed()
        times = []
        for _ in range(args.calls):
            start = time.perf_counter()
            found = lockguard.candidate_holders(cand_pid=-1, own={p.pid for p in holders})
            times.append((time.perf_counter() - start) * 1e3)
        assert found == [], found  # the holders are the worker's own (reference) children here
        times.sort()
        result = {"flocks_listed": listed, "holders": args.holders, "calls": args.calls,
                  "ms_median": round(statistics.median(times), 4), "ms_p90": round(times[int(0.9 * len(times))], 4),
                  "ms_max": round(times[-1], 4)}
    finally:
        for p in holders:
            p.stdin.close()
            p.wait(5)
        for f in files:
            f.close()
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
