"""Where a judge-suite run spent its time, and how close a reference-vs-reference run came to 1.0.

    python benchmarks/suite_profile.py RESULTS.jsonl [--json]

Reads the per-task JSONL that `kernelwright judge-suite` writes (it is never modified) and prints:
  * task outcomes (passed / failed by stage / not run) with the first line of every failure reason;
  * summed stage seconds (reference load, lock waits, call, correctness, performance), the
    exclusive chain (timing turns plus their drains: serial on a GPU) and, for
    the performance stage, the summed phases (spot check, warm-up, timing blocks, release) and
    the per-perf-case mean;
  * for a `--candidates reference` run: per-task speedups, the median and max |speedup - 1|, how
    many per-task 95% intervals cover 1.0, in how many perf cases the two sides' autotuners
    chose different configs, and in how many the calls wait for the GPU inside (host-synchronising).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    records = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            records[record["task"]] = record  # a resumed run may re-record a task: the last line wins
    return list(records.values())


def profile(records: list[dict]) -> dict:
    outcomes: Counter = Counter()
    failures = []
    stages: dict[str, float] = defaultdict(float)
    phases: dict[str, float] = defaultdict(float)
    child_phases: dict[str, float] = defaultdict(float)
    perf_cases = 0
    speedups = []
    holds = []
    for record in records:
        verdict = record.get("verdict")
        if not verdict:
            outcomes["not run"] += 1
            failures.append((record["task"], "not run", record.get("reason", "")))
            continue
        outcomes[verdict["stage"]] += 1
        if verdict["stage"] != "passed":
            failures.append((record["task"], verdict["stage"], (verdict.get("reason") or "").splitlines()[0][:200]))
        for name, seconds in (verdict.get("stage_seconds") or {}).items():
            if name == "longest_shared_hold":  # a maximum, not a sum (recorded since session 7)
                holds.append((seconds, record["task"]))
            else:
                stages[name] += seconds
        for case in verdict.get("cases", []):
            timing = case.get("timing") or {}
            if case.get("kind") == "performance" and timing.get("phase_s"):
                perf_cases += 1
                for name, seconds in timing["phase_s"].items():
                    phases[name] += seconds
                for name, seconds in (timing.get("child_phase_s") or {}).items():
                    child_phases[name] += seconds
        if verdict["stage"] == "passed" and verdict.get("speedup") is not None:
            low, high = verdict.get("speedup_ci95") or (None, None)
            # perf cases where the two sides' autotuners chose different configs (recorded since
            # the third session of 2026-12-01)
            apart = sum(1 for c in verdict.get("cases", []) if (c.get("timing") or {}).get("tuned")
                        and c["timing"]["tuned"].get("ref") != c["timing"]["tuned"].get("cand"))
            # perf cases whose calls wait for the GPU inside (recorded since the fourth session)
            host_sync = sum(1 for c in verdict.get("cases", []) if any(((c.get("timing") or {}).get("host_sync")
                                                                         or {}).values()))
            # perf cases timed again because one side's blocks landed far apart (since the ninth
            # session), and those whose blocks never agreed
            again = sum(1 for c in verdict.get("cases", []) if (c.get("timing") or {}).get("timed_again"))
            unsteady = sum(1 for c in verdict.get("cases", []) if (c.get("timing") or {}).get("unsteady"))
            speedups.append({"task": record["task"], "speedup": verdict["speedup"], "ci95": [low, high],
                             "covers_1": low is not None and low <= 1.0 <= high, "tuned_apart": apart,
                             "host_sync": host_sync, "timed_again": again, "unsteady": unsteady})
    deviations = [abs(s["speedup"] - 1.0) for s in speedups]
    finished = [r["finished_at"] for r in records if isinstance(r.get("finished_at"), (int, float))]
    return {
        # Timing turns and the drains before them run one after another on a GPU: on one GPU their
        # sum is a floor under the run's wall time, whatever the number of workers.
        "exclusive_chain_s": round(stages.get("performance", 0.0) + stages.get("wait_exclusive_drain", 0.0), 1),
        "first_to_last_finish_s": round(max(finished) - min(finished), 1) if len(finished) > 1 else None,
        "tasks": len(records),
        "outcomes": dict(outcomes),
        "failures": failures,
        "stage_seconds": {k: round(v, 1) for k, v in sorted(stages.items())},
        # the checks that kept the GPU shared longest without a look for a waiting timing turn
        "longest_shared_holds": [{"task": t, "seconds": round(x, 2)} for x, t in sorted(holds, reverse=True)[:8]],
        "perf_cases_timed": perf_cases,
        "perf_phase_seconds": {k: round(v, 1) for k, v in phases.items()},
        "perf_child_phase_seconds": {k: round(v, 1) for k, v in child_phases.items()},
        "perf_seconds_per_case": round(sum(phases.values()) / perf_cases, 3) if perf_cases else None,
        "speedups": speedups,
        "median_abs_dev": round(statistics.median(deviations), 4) if deviations else None,
        "max_abs_dev": round(max(deviations), 4) if deviations else None,
        "ci_covers_1": f"{sum(s['covers_1'] for s in speedups)}/{len(speedups)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = profile(load(args.results))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['tasks']} tasks: " + ", ".join(f"{k} {v}" for k, v in sorted(report["outcomes"].items())))
    for task, stage, reason in report["failures"]:
        print(f"  {task:40s} {stage:12s} {reason}")
    print("stage seconds (summed over tasks):", report["stage_seconds"])
    print(f"exclusive chain (timing turns + their drains, serial per GPU): {report['exclusive_chain_s']} s; "
          f"first to last task finished: {report['first_to_last_finish_s']} s")
    if report["longest_shared_holds"]:
        print("longest shared holds without a look for a timing turn:",
              ", ".join(f"{h['task']} {h['seconds']} s" for h in report["longest_shared_holds"]))
    print(f"perf cases timed: {report['perf_cases_timed']}, {report['perf_seconds_per_case']} s each; "
          f"phases {report['perf_phase_seconds']}")
    print("  inside the children:", report["perf_child_phase_seconds"])
    if report["speedups"]:
        worst = sorted(report["speedups"], key=lambda s: -abs(s["speedup"] - 1.0))[:8]
        print(f"speedup over {len(report['speedups'])} passed tasks: median |s-1| {report['median_abs_dev']}, "
              f"max {report['max_abs_dev']}, 95% CI covers 1.0 in {report['ci_covers_1']}")
        for s in worst:
            apart = f"  autotuned apart in {s['tuned_apart']} perf case(s)" if s.get("tuned_apart") else ""
            sync = f"  host-synchronising in {s['host_sync']} perf case(s)" if s.get("host_sync") else ""
            again = f"  timed again in {s['timed_again']} perf case(s)" if s.get("timed_again") else ""
            unsteady = f", unsteady in {s['unsteady']}" if s.get("unsteady") else ""
            print(f"  {s['task']:40s} {s['speedup']:.4f}  CI [{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]"
                  f"{apart}{sync}{again}{unsteady}")


if __name__ == "__main__":
    main()
