#!/usr/bin/env bash
# Run on a build machine (no GPU needed): builds what scripts/gpu-check.sh runs on a GPU
# machine, which may have no package registry. Release build with libstdc++ and libgcc
# linked statically and GoogleTest static; the other shared libraries the binaries need
# (Abseil, Highway, Google Benchmark, zlib, and the reference LAPACK and BLAS that
# kiln::linalg opens) are copied into build-gpu/lib, which gpu-check.sh puts on
# LD_LIBRARY_PATH. Copy the source tree and what gpu-check.sh runs to the GPU machine
# (all of build-gpu is far larger): build-gpu/tests/kiln_tests, build-gpu/bench/gpu_bench,
# build-gpu/bench/compile_bench, build-gpu/kiln, build-gpu/lib and
# build-gpu/samples/eager_demo. There, link the source folder the tests were built in and run
# the check:
#   [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
#   scripts/gpu-check.sh
# All of its steps take about 270 s on an H200 (2026-12-04; docs/cuda.md), within the
# check's default budget of 400 s (GPU_CHECK_BUDGET). Build and run the CPU tests first: the
# GPU machine is for what only it can check.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build build-gpu -j"$(nproc)" --target kiln_tests kiln_tool gpu_bench compile_bench \
  soak_bench mlp_inference transformer_block eager_demo
mkdir -p build-gpu/lib
for bin in build-gpu/tests/kiln_tests build-gpu/bench/gpu_bench build-gpu/bench/compile_bench \
  build-gpu/kiln build-gpu/samples/eager_demo; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux)' |
    while read -r lib; do cp -Lu "$lib" build-gpu/lib/; done
done
# kiln::linalg opens LAPACK with dlopen (jit/api/lapack.h), so ldd does not list it: the
# reference LAPACK and BLAS (about 11 MB with their Fortran runtime, against OpenBLAS's 36)
# go along, found there as liblapack.so.3.
for lib in /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3 /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 \
  /usr/lib/x86_64-linux-gnu/libgfortran.so.5 /usr/lib/x86_64-linux-gnu/libquadmath.so.0; do
  if [[ ! -e "$lib" ]]; then
    echo "gpu-build: $lib is missing (scripts/install-deps.sh installs liblapack3 and libblas3)" >&2
    exit 1
  fi
  cp -Lu "$lib" build-gpu/lib/
done
strip build-gpu/tests/kiln_tests build-gpu/bench/gpu_bench build-gpu/bench/compile_bench \
  build-gpu/kiln build-gpu/samples/eager_demo
du -sh build-gpu/tests/kiln_tests build-gpu/bench/gpu_bench build-gpu/lib
