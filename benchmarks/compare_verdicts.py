"""Do two judge-suite results files give the same verdicts? (status, stage and failure kind per task)

  python benchmarks/compare_verdicts.py BEFORE.jsonl AFTER.jsonl [--json out.json]

Used for "behaviour unchanged" checks: the same references judged by two trees (before and after a
redesign) or under two settings (sandbox on and off). Only the tasks both files finished are
compared; the others are listed, since a time limit can cut the two runs at different tasks.
Exit 0 when every compared task agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter


def outcomes(path: str) -> dict[str, tuple]:
    """task -> (record status, verdict status, stage, kind); the last line of a task wins (resume)."""
    found: dict[str, tuple] = {}
    with open(path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line
            v = rec.get("verdict") or {}
            found[rec["task"]] = (rec.get("status"), v.get("status"), v.get("stage"), v.get("kind"))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--json", default=None, help="write the comparison here")
    args = ap.parse_args()
    a, b = outcomes(args.before), outcomes(args.after)
    both = sorted(set(a) & set(b))
    differ = {t: {"before": a[t], "after": b[t]} for t in both if a[t] != b[t]}
    summary = Counter("passed" if b[t][1] == "passed" else f"{b[t][2]}/{b[t][3]}" for t in both)
    report = {"compared": len(both), "same": len(both) - len(differ), "differ": differ,
              "only_before": sorted(set(a) - set(b)), "only_after": sorted(set(b) - set(a)),
              "after_outcomes": dict(summary.most_common())}
    print(f"{len(both)} tasks in both files: {report['same']} the same, {len(differ)} differ")
    for task, d in differ.items():
        print(f"  {task}: before {d['before']} after {d['after']}")
    print(f"only before: {len(report['only_before'])}, only after: {len(report['only_after'])}")
    print("outcomes (after):", ", ".join(f"{k} {n}" for k, n in summary.most_common()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
