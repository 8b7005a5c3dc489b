#!/usr/bin/env bash
# Issues 19 and 33, prepared for a machine of kind nvidia-h200-x2 (not lent so far): judge-suite and bench
# on two GPUs against one, in one device call; judge-suite with --executor ray (needs ray in
# /tmp/site: carry its wheel) and with --gpus 1. Carry .whl (openai & co., rank-bm25) and .geak (GEAK-eval):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD/src; OUT=$OUT bash benchmarks/two_gpu.sh
# Writes $OUT/two_gpu.txt (wall times and ratios) and the results files; verdicts on 2 GPUs must
# equal those on 1 (up to timing noise in speedups): compare the .jsonl files' stages.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-$PWD/src} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/two_gpu.txt"
run() {  # label, env prefix, command...
  local label=$1; shift; local start=$SECONDS
  env "$@" > "$OUT/$label.log" 2>&1
  echo "$label: exit $? after $((SECONDS - start)) s" | tee -a "$OUT/two_gpu.txt"
}
TB="python3 -m kernelwright judge-suite --suite tritonbench-revised --path .geak/GEAK-eval --candidates reference --max-perf-cases 6"
run tb_2gpu CUDA_VISIBLE_DEVICES=0,1 $TB --out "$OUT/tb_2gpu.jsonl"
run tb_1gpu CUDA_VISIBLE_DEVICES=0 $TB --out "$OUT/tb_1gpu.jsonl"
# issue 33: the same suite through Ray (a local Ray on this host: one actor per GPU), and --gpus
run tb_ray2 CUDA_VISIBLE_DEVICES=0,1 $TB --executor ray --out "$OUT/tb_ray2.jsonl"
run tb_gpus1 CUDA_VISIBLE_DEVICES=0,1 $TB --gpus 1 --out "$OUT/tb_gpus1.jsonl"
BENCH="python3 benchmarks/bench_overlap.py --delay 5 --runs 4 --iterations 3 --llm-concurrency 64 --extra --max-perf-cases 1"
run bench_2gpu CUDA_VISIBLE_DEVICES=0,1 $BENCH --out "$OUT/bench_2gpu"
run bench_1gpu CUDA_VISIBLE_DEVICES=0 $BENCH --out "$OUT/bench_1gpu"
python3 - "$OUT" <<'PY' | tee -a "$OUT/two_gpu.txt"
import json, sys
out = sys.argv[1]
def stages(p):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    return {r["task"]: (r.get("verdict") or {}).get("stage", r["status"]) for r in rows}
try:
    a, b = stages(f"{out}/tb_2gpu.jsonl"), stages(f"{out}/tb_1gpu.jsonl")
    print("TritonBench verdicts differ on:", sorted(t for t in a if a.get(t) != b.get(t)) or "none")
    for other in ("tb_ray2", "tb_gpus1"):
        c = stages(f"{out}/{other}.jsonl")
        print(f"{other} verdicts differ from 2 GPUs on:", sorted(t for t in a if a.get(t) != c.get(t)) or "none")
except OSError as e:
    print("missing results:", e)
for n in ("bench_2gpu", "bench_1gpu"):
    try:
        r = json.load(open(f"{out}/{n}/bench_overlap.json"))
        print(n, "wall", r["wall_s"], "s, judge idle", r["judge"].get("idle_fraction"))
    except OSError as e:
        print("missing", n, e)
PY
