#!/usr/bin/env bash
# Run ON THE LENT GPU MACHINE, in one device call, after scripts/gpu-build.sh here:
#   run(command="scripts/gpu-check.sh", carry=["build-gpu"], timeout_s=600)
# A lent GPU gives a command at most 600 s, and a session 900 s of device time with the
# machine's start counted, so the steps share a budget of about 450 s (GPU_CHECK_BUDGET),
# which leaves time to rerun a part. The quick steps come first, so that a run cut short
# still says the most:
#   info         the GPU and `kiln info`
#   smoke        the op tests on the GPU with KILN_CUDA_SYNC=1 (a faulting kernel is named)
#   bench-quick  Kiln's GPU benchmarks at small sizes
#   torch-quick  the same workloads in PyTorch eager and torch.compile, with the copy and
#                cuBLAS ceilings, at small sizes
#   (GPU_CHECK_QUICK=1 stops here, after about 210 s)
#   tests        the rest of the suite with KILN_DEVICE=cuda (the tests that run the tool and
#                samples by their build paths, and the host emulation of kernels, left out)
#   bench, torch the benchmarks at full size
#   compile      the NVRTC compile benchmark (every core)
# A step's limit is its own or what is left of the budget, whichever is less; a step with
# under 10 s left is skipped. Each step prints its summary as it ends; the logs are kept
# under $OUT (or ./gpu-check-out), the summaries in summary.txt, repeated at the end.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}"
# Outside $OUT: thousands of cubins would come back with the logs.
export KILN_CACHE_DIR="${TMPDIR:-/tmp}/kiln-gpu-check-cache"
quick=${GPU_CHECK_QUICK:-}
budget=${GPU_CHECK_BUDGET:-450}
summary="$out/summary.txt"
: >"$summary"

smoke_tests='Elementwise.*:Reduction.*:NN.*:Gemm.*:Matmul.*:Attention.*:CompileTest.*:KernelCount.*'
not_on_gpu='ToolTest.*:SamplesTest.*:DebugOutput.*:InstallTest.*:CudaEmulationTest.*'

# The lines of step NAME's log worth reading.
summarize() {
  local log="$out/$1.txt"
  case $1 in
    info) cat "$log" ;;
    smoke | tests)
      grep -E '^\[  (PASSED|FAILED) |tests? ran' "$log" | tail -15
      # Where a run that was cut off stopped.
      grep -E '^\[ RUN ' "$log" | tail -1 | sed 's/^/last started: /'
      ;;
    compile) grep median "$log" ;;
    *) tail -16 "$log" ;;
  esac
}

# step NAME LIMIT COMMAND...: runs COMMAND into $out/NAME.txt for at most LIMIT seconds (or
# what is left of the budget), then prints its summary.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if ((left < 10)); then
    echo "== $name: skipped (${left} s of the ${budget} s budget left) ==" | tee -a "$summary"
    return
  fi
  ((limit > left)) && limit=$left
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$? verdict
  case $rc in
    0) verdict="ok" ;;
    124 | 137) verdict="TIMED OUT at its ${limit} s limit" ;;
    *) verdict="exit $rc" ;;
  esac
  {
    echo "== $name: $verdict, $((SECONDS - start)) s (${SECONDS} s of ${budget} s used) =="
    summarize "$name"
  } | tee -a "$summary"
}

step info 20 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  build-gpu/kiln info'
step smoke 90 env KILN_DEVICE=cuda KILN_CUDA_SYNC=1 build-gpu/tests/kiln_tests \
  --gtest_filter="$smoke_tests"
step bench-quick 40 env KILN_DEVICE=cuda build-gpu/bench/gpu_bench --quick
step torch-quick 60 python3 bench/gpu_torch_bench.py --quick
if [[ -z $quick ]]; then
  step tests 120 env KILN_DEVICE=cuda build-gpu/tests/kiln_tests \
    --gtest_filter="-$not_on_gpu:$smoke_tests"
  step bench 50 env KILN_DEVICE=cuda build-gpu/bench/gpu_bench
  step torch 50 python3 bench/gpu_torch_bench.py
  step compile 20 build-gpu/bench/compile_bench --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true
fi

echo "---- summary (${SECONDS} s) ----"
cat "$summary"
