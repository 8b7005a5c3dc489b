#!/usr/bin/env bash
# Everything the GPU acceptance needs, in one device call (device time is scarce):
#   bash benchmarks/run_on_device.sh [tests|throughput|precision|all]...
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
      timeout 300 python3 -m pytest tests -m gpu -v --timeout 280 -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;&
    throughput|all)
      timeout 330 python3 benchmarks/judge_throughput.py --variants 4 --per-device 1 4 --out "$OUT/throughput.json" 2>&1 | tail -8 ;;&
    cli|all)
      python3 -m kernelwright eval src/kernelwright/suites/builtin/triton_refs/softmax.py --task softmax 2>&1 | tee "$OUT/eval_softmax.txt"
      python3 -m kernelwright eval tests/candidates/vector_add/side_stream.py --task vector_add --json > "$OUT/eval_side_stream.json"; echo "exit $?" ;;&
    precision|all)
      timeout 250 python3 benchmarks/timing_precision.py --blocks 10 --repeats 2 --out "$OUT/precision.json" 2>&1 | tail -40 ;;
  esac
done
