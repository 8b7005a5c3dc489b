#!/usr/bin/env bash
# The same TritonBench-revised references judged by several trees or settings, then compared
# (status, stage, failure kind per task): the "behaviour unchanged" check of a redesign.
#   RUNS="before=.before/src after=src" LIMIT=240 bash benchmarks/same_verdicts.sh
# Each run is NAME=SRC[:EXTRA FLAGS, commas for spaces], e.g. "strict=src:--sandbox,strict".
# The tasks: every other one of the suite by name (TASKS=all for every task), one perf case each.
# Needs GEAK-eval in .geak/GEAK-eval (git-ignored, carried). Results and logs land in $OUT.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
dir=.geak/GEAK-eval/geak_eval/data/TritonBench/data/TritonBench_G_v1
if [ "${TASKS:-half}" = half ]; then
  TASKS=$(ls "$dir"/*.py | xargs -n1 basename | sed 's/\.py$//' | grep -v '^__init__$' | sort | awk 'NR%2==1' | paste -sd,)
fi
task_args=(); [ "$TASKS" = all ] || task_args=(--tasks "$TASKS")
first=""
for run in ${RUNS:-before=.before/src after=src}; do
  name=${run%%=*}; rest=${run#*=}; src=${rest%%:*}; flags=""
  [ "$rest" != "$src" ] && flags=${rest#*:}; flags=${flags//,/ }
  start=$SECONDS
  PYTHONPATH=$PWD/$src timeout "${LIMIT:-240}" python3 -m kernelwright judge-suite --suite tritonbench-revised \
    --path .geak/GEAK-eval --candidates reference --workers-per-device "${WPD:-8}" --max-perf-cases 1 \
    "${task_args[@]}" $flags --out "$OUT/$name.jsonl" > "$OUT/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s, $(wc -l < "$OUT/$name.jsonl") tasks" | tee -a "$OUT/same_verdicts.txt"
  if [ -z "$first" ]; then first=$name; else
    python3 benchmarks/compare_verdicts.py "$OUT/$first.jsonl" "$OUT/$name.jsonl" --json "$OUT/$first-vs-$name.json" \
      | tee -a "$OUT/same_verdicts.txt"
  fi
done
