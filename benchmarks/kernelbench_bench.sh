#!/usr/bin/env bash
# `bench` on KernelBench level-1 problems at their own sizes, the scripted model answering each
# problem with the project's own candidate (benchmarks/kernelbench_candidates/), then a check that
# metrics.json agrees with results.jsonl (issue 34). Needs a KernelBench checkout (KB, default .kb:
# git-excluded, never committed) and the `llm` extra (openai).
#   KB=.kb bash benchmarks/kernelbench_bench.sh OUTDIR [extra bench flags, e.g. --shrink 0.001]
set -u
out=$1; shift
KB=${KB:-.kb}
script=$(mktemp --suffix=.json)
python3 - "$script" <<'PY'
import json, sys
rules = []
for pattern, name in [("level1/19_ReLU\\.py", "level1_19.py"), ("level1/23_Softmax\\.py", "level1_23.py"),
                      ("level1/47_Sum_reduction", "level1_47.py"), ("level1/1_Square_matrix", "level1_1.py")]:
    code = open(f"benchmarks/kernelbench_candidates/{name}").read()
    rules.append({"match": pattern, "content": f"```python\n{code}\n```",
                  "usage": {"input_tokens": 1000, "output_tokens": 500}})
json.dump({"rules": rules, "default": {"content": "ok"}}, open(sys.argv[1], "w"))
PY
python3 -m kernelwright.llm.testing.scripted_server --script "$script" --port 8765 & srv=$!
sleep 3
python3 -m kernelwright bench --suite kernelbench --path "$KB" \
  --tasks "${TASKS:-L1_1_Square_matrix_multiplication_,L1_19_ReLU,L1_47_Sum_reduction_over_a_dimension}" \
  --model openai-compatible/scripted --base-url http://127.0.0.1:8765/v1 --iterations 1 --runs 1 \
  --max-perf-cases 1 --out "$out" "$@"
echo "bench rc=$?"
kill $srv
python3 - "$out" <<'PY'
import json, sys, pathlib, statistics
d = pathlib.Path(sys.argv[1])
m = json.loads((d / "metrics.json").read_text())
res = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines() if l.strip()]
ms = m["per_runs"][-1]["metrics"]
passed = [r for r in res if r["passed_runs"] > 0]
sp = [r["best"]["speedup"] for r in passed if r["best"] and r["best"]["speedup"] is not None]
for r in res:
    b = r["best"] or {}
    print(r["task"], "passed_runs", r["passed_runs"], "kind", b.get("kind"), "speedup", b.get("speedup"), "ci", b.get("speedup_ci95"))
print("metrics:", {k: (v["value"], v["numerator"], v["denominator"]) for k, v in ms.items()})
ok = ms["execution accuracy"]["numerator"] == len(passed) and ms["execution accuracy"]["denominator"] == len(res)
if sp:
    ok = ok and abs(ms["GEAK speedup"]["value"] - statistics.mean(sp)) < 1e-9
print("metrics agree with results.jsonl:", ok, "| shrink:", m.get("shrink"))
sys.exit(0 if ok else 1)
PY
