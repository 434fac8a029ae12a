#!/usr/bin/env bash
# Run ON THE GPU MACHINE, after scripts/gpu-build.sh built build-gpu on a build machine (it
# says what to copy over):
#   scripts/gpu-check.sh
# Each step has its own time limit (the second argument of its `step` line below, 20 to
# 150 s), and the steps share a budget, GPU_CHECK_BUDGET (default 400 s), so that a whole
# check ends within about that budget. GPU_CHECK_STEPS names the steps to run (default: all,
# in this order); GPU_CHECK_QUICK=1 runs the first four only:
#   info         the GPU, the CUDA libraries found, and `kiln info`
#   tests        the whole suite with KILN_DEVICE=cuda and KILN_CUDA_SYNC=1 (a faulting
#                kernel is named), in GPU_CHECK_SHARDS processes at once (gtest sharding, one
#                disk cache), so that NVRTC's cold compiles use every core; left out: the
#                tests that run the tool and samples by their build paths, and the CPU-only
#                checks of generated code (host emulation, NVRTC machine code), which CI runs
#   differential the differential test's random programs, in as many slices at once
#   tests-generated, differential-generated  the same with KILN_CUBLASLT=0: every matmul
#                runs Kiln's generated kernel (tensor-core mma for f16/bf16), which
#                cuBLASLt otherwise replaces
#   bench-quick  Kiln's GPU benchmarks at small sizes
#   torch-quick  the same workloads in PyTorch eager and torch.compile, with the copy and
#                cuBLAS ceilings, at small sizes
#   bench, torch the benchmarks at full size (bench-generated: Kiln's with KILN_CUBLASLT=0)
#   compile      the NVRTC compile benchmark (every core)
#   memcheck     the kernel families' tests under compute-sanitizer's memcheck: an access
#                out of bounds in a generated kernel, on the hardware
# A step's limit is its own or what is left of the budget, whichever is less; a step with
# under 10 s left is skipped. Each step prints its summary as it ends; the logs are kept
# under $OUT (or ./gpu-check-out), the summaries in summary.txt, repeated at the end; the
# steps' logs end up in one archive, logs.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}"
# Outside $OUT: thousands of cubins would come back with the logs.
export KILN_CACHE_DIR="${TMPDIR:-/tmp}/kiln-gpu-check-cache"
if [[ -n ${GPU_CHECK_QUICK:-} ]]; then
  steps=${GPU_CHECK_STEPS:-info tests bench-quick torch-quick}
else
  all="info tests differential tests-generated differential-generated bench-quick torch-quick"
  steps=${GPU_CHECK_STEPS:-$all bench bench-generated torch compile memcheck}
fi
budget=${GPU_CHECK_BUDGET:-400}
shards=${GPU_CHECK_SHARDS:-12}
shard_dir="${TMPDIR:-/tmp}/kiln-gpu-check-shards"
# GPU_CHECK_DEVICE=cpu tries the script's own steps on a machine without a GPU.
device=${GPU_CHECK_DEVICE:-cuda}

differential='Differential.RandomProgramsMatchTheReferenceEvaluator'
not_on_gpu="ToolTest.*:SamplesTest.*:SentenceEmbeddingsTest.*:DebugOutput.*:InstallTest.*:*Emulat*"
not_on_gpu+=":MachineCode.*:CudaCodegen.*:$differential"

# The driver, NVRTC and cuBLASLt: Kiln opens libcuda.so.1, libnvrtc.so.13 and
# libcublasLt.so.13 by name, and where the dynamic linker's cache lacks one (a driver mounted
# under /usr/local/nvidia, a toolkit under /usr/local/cuda-13.0, PyTorch's wheels), its
# folder goes on LD_LIBRARY_PATH.
for lib in libcuda.so.1 libnvrtc.so.13 libcublasLt.so.13; do
  ldconfig -p 2>/dev/null | grep -q "$lib" && continue
  found=$(find /usr/local/nvidia /usr/local/cuda* /usr/lib /opt -name "$lib" -print -quit \
    2>/dev/null)
  [[ -n $found ]] && LD_LIBRARY_PATH="$(dirname "$found"):$LD_LIBRARY_PATH"
done
export LD_LIBRARY_PATH
# NCCL, for the tests of Kiln's collectives on one GPU: PyTorch's wheel has one.
if [[ -z ${KILN_NCCL_LIBRARY:-} ]]; then
  found=$(find /usr/local/cuda* /usr/lib /opt -name libnccl.so.2 -print -quit 2>/dev/null)
  [[ -n $found ]] && export KILN_NCCL_LIBRARY=$found
fi

# kiln_tests in $shards processes at once, for step NAME, with the settings VAR=VALUE given,
# each process's log in $shard_dir/NAME. HOW splits the work: "shards" gives each process a
# gtest shard of the suite (KILN_CUDA_SYNC=1: a faulting kernel is named); "slices" gives
# each a slice of the differential test's 3000 random programs (KILN_DIFFERENTIAL_SLICE).
in_processes() {
  local name=$1 how=$2 pids=() i rc=0 filter split
  shift 2
  rm -rf "${shard_dir:?}/$name" && mkdir -p "$shard_dir/$name"
  # Cut off by the step's limit, the processes stop too.
  trap 'kill "${pids[@]}" 2>/dev/null; exit 124' TERM
  for ((i = 0; i < shards; i++)); do
    if [[ $how == shards ]]; then
      filter="-$not_on_gpu"
      split=(GTEST_TOTAL_SHARDS="$shards" GTEST_SHARD_INDEX="$i" KILN_CUDA_SYNC=1)
    else
      filter=$differential
      split=(KILN_DIFFERENTIAL_SLICE="$i/$shards")
    fi
    env "${split[@]}" KILN_DEVICE="$device" "$@" build-gpu/tests/kiln_tests \
      --gtest_filter="$filter" >"$shard_dir/$name/$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  return $rc
}
# `timeout` runs programs, not shell functions: the tests steps call this script again.
if [[ ${1:-} == --in-processes ]]; then
  shift
  in_processes "$@"
  exit
fi

summary="$out/summary.txt"
: >"$summary"

# Step NAME's shard logs as one, and what they say together: tests passed, skipped and
# failed, and in a shard that was cut off, the test it had started.
summarize_tests() {
  local name=$1 log="$out/$1.txt" f
  for f in "$shard_dir/$name"/*.log; do
    echo "#### shard $(basename "$f" .log)"
    cat "$f"
  done >"$log"
  grep -h '^differential:' "$log"
  awk '/^\[  PASSED  \]/ {passed += $4} /^\[  SKIPPED \] [0-9]/ {skipped += $4}
       END {print "passed " passed+0 ", skipped " skipped+0}' "$log"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v ' ms)$' | sort -u | head -40
  grep -E '^\[  SKIPPED \] [A-Za-z]' "$log" | grep -v ' ms)$' | sort -u | head -20
  for f in "$shard_dir/$name"/*.log; do
    grep -q '^\[==========\] .* ran' "$f" ||
      echo "shard $(basename "$f" .log) cut off in: $(grep -E '^\[ RUN ' "$f" | tail -1)"
  done
}

# The lines of step NAME's log worth reading.
summarize() {
  local log="$out/$1.txt"
  case $1 in
    info) cat "$log" ;;
    tests* | differential*) summarize_tests "$1" ;;
    compile) grep median "$log" ;;
    memcheck)
      grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY|Invalid|out of bounds' "$log" | head -20
      ;;
    *) tail -16 "$log" ;;
  esac
}

# step NAME LIMIT COMMAND...: runs COMMAND into $out/NAME.txt for at most LIMIT seconds (or
# what is left of the budget), then prints its summary.
step() {
  local name=$1 limit=$2
  shift 2
  [[ " $steps " == *" $name "* ]] || return 0
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

step info 30 bash -c 'nvidia-smi --format=csv \
    --query-gpu=name,memory.total,driver_version,clocks.max.sm
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH KILN_NCCL_LIBRARY=${KILN_NCCL_LIBRARY:-}"; nproc
  # A CPU quota (cgroup v2: quota and period in microseconds) caps parallel compiles below
  # what nproc promises.
  echo "cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"
  build-gpu/kiln info'
step tests 150 "$0" --in-processes tests shards
step differential 150 "$0" --in-processes differential slices
# The generated matmul kernels (tensor-core mma for f16/bf16) where cuBLASLt would take them.
step tests-generated 150 "$0" --in-processes tests-generated shards KILN_CUBLASLT=0
step differential-generated 150 "$0" --in-processes differential-generated slices \
  KILN_CUBLASLT=0
step bench-quick 40 env KILN_DEVICE=$device build-gpu/bench/gpu_bench --quick
step torch-quick 60 python3 bench/gpu_torch_bench.py --quick
step bench 60 env KILN_DEVICE=$device build-gpu/bench/gpu_bench
step bench-generated 60 env KILN_DEVICE=$device KILN_CUBLASLT=0 build-gpu/bench/gpu_bench
step torch 120 python3 bench/gpu_torch_bench.py
step compile 20 build-gpu/bench/compile_bench --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true
sanitizer=$(command -v compute-sanitizer ||
  ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
families='Elementwise.*:Reduction.*:NN.*:NN/*:Attention.*:Matmul.*:Gemm.*:View.*:Take*:Embedding.*'
families+=':UpdateSlice.*:Concat.*:Cumsum.*:Topk.*:ScanSelect.*:Triangle.*:TransformerBlock.*'
step memcheck 120 env KILN_DEVICE=$device "${sanitizer:-compute-sanitizer}" --tool memcheck \
  --error-exitcode 3 build-gpu/tests/kiln_tests \
  --gtest_filter="$families"

(cd "$out" && tar -czf logs.tar.gz --remove-files $(ls ./*.txt | grep -v summary.txt))
echo "---- summary (${SECONDS} s) ----"
cat "$summary"
