#!/usr/bin/env bash
# Everything the GPU acceptance needs, in one device call (device time is scarce):
#   bash benchmarks/run_on_device.sh [tests|cli|throughput|suites|hang|precision|disturbance|kernelbench|lockcost|all]...
#   kernelbench: KB=PATH a KernelBench checkout (default .kb, git-excluded: never committed), its
#           level-1 problems 19, 23, 47 and 1 at their own sizes (benchmarks/judge_memory.py; about 8
#           minutes: ReLU and softmax take 2.5 each at 6 GiB).
#   suites: SUITES="tb rocm builtin" picks suites (every perf shape is timed unless
#           SUITE_FLAGS="--max-perf-cases N"), TB_LIMIT/ROCM_LIMIT/BUILTIN_LIMIT cap seconds,
#           WPD sets workers per GPU, TIMEOUT_SCALE scales the judge timeouts (default 1: the product defaults;
#           0.3 made three slow TritonBench references time out), SUITE_FLAGS adds judge-suite flags.
# Environment passed through to the judge: KERNELWRIGHT_TRACE=1 (a line per item, perf-size check,
# timing turn and verdict, with each task's longest shared hold), KERNELWRIGHT_NO_NUDGE=1 (no nudges
# for checks that run Python long without a launch), KERNELWRIGHT_WRITER_PATIENCE_S=S (how long a
# timing turn waits for a free moment before closing the turnstile; default 0.5),
# KERNELWRIGHT_TUNING_MS=W,R (autotuning budget per config at timing turns; default 3,12).
# Logs and JSON land in $OUT (or ./out when run elsewhere).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${*:-all}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
for step in $steps; do
  case $step in
    tests|all)
      timeout 420 python3 -m pytest tests -m gpu -v --timeout 200 -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;&
    throughput|all)
      timeout 200 python3 benchmarks/judge_throughput.py --variants 3 --per-device 1 4 --out "$OUT/throughput.json" 2>&1 | tail -8 ;;&
    cli|all)
      python3 -m kernelwright eval src/kernelwright/suites/builtin/triton_refs/softmax.py --task softmax 2>&1 | tee "$OUT/eval_softmax.txt"
      python3 -m kernelwright eval tests/candidates/vector_add/side_stream.py --task vector_add --json > "$OUT/eval_side_stream.json"; echo "exit $?" ;;&
    suites|all)
      # GEAK-eval data travels in the git-ignored .geak/ folder (carried, never committed).
      # A results file carried back in .results/ resumes an interrupted run (the runner is resumable).
      for spec in "tritonbench-revised tb ${TB_LIMIT:-540}" "rocm rocm ${ROCM_LIMIT:-300}" "builtin builtin ${BUILTIN_LIMIT:-240}"; do
        set -- $spec
        case " ${SUITES:-tb rocm builtin} " in *" $2 "*) ;; *) continue ;; esac
        [ -f ".results/$2.jsonl" ] && cp ".results/$2.jsonl" "$OUT/$2.jsonl"
        extra=(); [ "$1" = builtin ] || extra=(--path .geak/GEAK-eval)
        start=$SECONDS; timeout "$3" python3 -m kernelwright judge-suite --suite "$1" "${extra[@]}" \
          --candidates reference --workers-per-device "${WPD:-4}" --timeout-scale "${TIMEOUT_SCALE:-1}" ${SUITE_FLAGS:-} \
          --out "$OUT/$2.jsonl" > "$OUT/$2.log" 2>&1
        echo "exit $? after $((SECONDS - start)) s" >> "$OUT/$2.log"; tail -16 "$OUT/$2.log"
        python3 benchmarks/suite_profile.py "$OUT/$2.jsonl"
      done ;;&
    hang)
      # A reference that never finishes (chunk_retention_ops: Triton 3.6 compiles it for minutes): its
      # timeout verdict must carry the stack where it hung.
      timeout 200 python3 -m kernelwright judge-suite --suite tritonbench-revised --path .geak/GEAK-eval \
        --candidates reference --tasks chunk_retention_ops --timeout-scale 0.3 --out "$OUT/hang.jsonl" > "$OUT/hang.log" 2>&1
      python3 -c 'import json,sys; [print((v["detail"] + v.get("log_tail", ""))[-3000:]) for v in (json.loads(l)["verdict"] for l in open(sys.argv[1]))]' "$OUT/hang.jsonl" ;;
    disturbance)
      # What disturbs a timing turn (a tiny kernel timed in blocks while other processes create CUDA
      # contexts, compile, copy off the GPU, free memory, or launch kernels): the suspects behind the ninth
      # session's unsteady blocks.
      timeout 170 python3 benchmarks/disturbance.py --seconds 15 --out "$OUT/disturbance.json" 2>&1 | tail -8 ;;
    kernelbench)
      timeout 600 python3 benchmarks/judge_memory.py --device cuda --kernelbench "${KB:-.kb}" \
        --problems level1/19 level1/23 level1/47 level1/1 --time-limit 560 > "$OUT/memory_kb.log" 2>&1
      echo "exit $?" >> "$OUT/memory_kb.log"; tail -c 3000 "$OUT/memory_kb.log" ;;
    lockcost)
      # what the lock guard's look before each candidate request costs here (/proc is slow under gVisor)
      python3 benchmarks/lock_guard_cost.py --holders 8 --calls 200 --out "$OUT/lock_guard_cost.json" ;;
    precision|all)
      timeout 250 python3 benchmarks/timing_precision.py --blocks 10 --repeats 2 --out "$OUT/precision.json" 2>&1 | tail -40 ;;
  esac
done
