#!/usr/bin/env bash
# Run ON THE LENT GPU MACHINE, in one device call, after scripts/gpu-build.sh here:
#   run(command="scripts/gpu-check.sh", carry=["build-gpu"], timeout_s=...)
# 1. kiln info (devices, NVRTC, cache), 2. the whole test suite with KILN_DEVICE=cuda
# (differential, kernel-count, compile, custom-op tests on the GPU; the tests that run the
# tool and samples by their build paths, and the host emulation of kernels, are left out),
# 3. Kiln's GPU benchmarks and the NVRTC compile benchmark, 4. the same
# workloads in PyTorch eager and torch.compile with the copy and cuBLAS ceilings.
# Everything is logged under $OUT (or ./gpu-check-out); the end of the output is a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR="$out/kiln-cache"
quick=${GPU_CHECK_QUICK:-}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" 2>&1
build-gpu/kiln info >"$out/info.txt" 2>&1
echo "== tests (KILN_DEVICE=cuda) =="
KILN_DEVICE=cuda timeout 300 build-gpu/tests/kiln_tests \
  --gtest_filter='-ToolTest.*:SamplesTest.*:DebugOutput.*:InstallTest.*:CudaEmulationTest.*' \
  >"$out/tests.txt" 2>&1
tests_rc=$?
echo "== kiln benchmarks =="
KILN_DEVICE=cuda timeout 180 build-gpu/bench/gpu_bench ${quick:+--quick} >"$out/kiln_bench.txt" 2>&1
bench_rc=$?
echo "== compile benchmarks (NVRTC on every core) =="
timeout 120 build-gpu/bench/compile_bench --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true >"$out/compile_bench.txt" 2>&1
compile_rc=$?
echo "== torch benchmarks =="
timeout 240 python3 bench/gpu_torch_bench.py ${quick:+--quick} >"$out/torch_bench.txt" 2>&1
torch_rc=$?

echo "---- summary ----"
cat "$out/gpu.txt" "$out/info.txt"
echo "tests exit $tests_rc:"; grep -E '^\[  (PASSED|FAILED) |tests? ran' "$out/tests.txt" | tail -15
echo "kiln bench exit $bench_rc:"; tail -12 "$out/kiln_bench.txt"
echo "compile bench exit $compile_rc:"; grep median "$out/compile_bench.txt"
echo "torch bench exit $torch_rc:"; tail -16 "$out/torch_bench.txt"
