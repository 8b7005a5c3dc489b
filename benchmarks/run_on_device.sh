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
      timeout 200 python3 -m pytest tests -m gpu -v --timeout 190 -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;&
    throughput|all)
      timeout 200 python3 benchmarks/judge_throughput.py --variants 3 --per-device 1 4 --out "$OUT/throughput.json" 2>&1 | tail -8 ;;&
    cli|all)
      python3 -m kernelwright eval src/kernelwright/suites/builtin/triton_refs/softmax.py --task softmax 2>&1 | tee "$OUT/eval_softmax.txt"
      python3 -m kernelwright eval tests/candidates/vector_add/side_stream.py --task vector_add --json > "$OUT/eval_side_stream.json"; echo "exit $?" ;;&
    suites|all)
      # GEAK-eval data travels in the git-ignored .geak/ folder (carried, never committed)
      TB="add_value,add_example,vector_addition,softmax_triton1,matmul_kernel,layer_norm_triton,rms_norm_triton,rmsnorm_triton,isfinite_kernel,rowwise_quantization_triton,token_attn_reduceV,chunk_delta_fwd,flash_attn,cross_entropy1,swiglu_fwd,rotary_emb,embedding_triton_kernel,dropout_triton,int8_quantization,triton_matmul,log_softmax,seeded_dropout,relu_triton_kernel,sin_kernel,matrix_transpose,max_reduction,mean_reduction,kldiv_compute,fast_layernorm,triton_argmax"
      { timeout 170 python3 -m kernelwright judge-suite --suite builtin --candidates reference --out "$OUT/builtin.jsonl";
        timeout 220 python3 -m kernelwright judge-suite --suite tritonbench-revised --path .geak/GEAK-eval --candidates reference \
          --tasks "$TB" --workers-per-device 4 --timeout-scale 0.3 --out "$OUT/tb.jsonl";
        timeout 90 python3 -m kernelwright judge-suite --suite rocm --path .geak/GEAK-eval --candidates reference \
          --tasks naive_softmax,softmax,layernorm,test_add_kernel,rmsnorm_fwd --timeout-scale 0.3 --out "$OUT/rocm.jsonl";
      } > "$OUT/suites.log" 2>&1; tail -60 "$OUT/suites.log" ;;&
    precision|all)
      timeout 250 python3 benchmarks/timing_precision.py --blocks 10 --repeats 2 --out "$OUT/precision.json" 2>&1 | tail -40 ;;
  esac
done
