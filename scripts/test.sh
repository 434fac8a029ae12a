#!/usr/bin/env bash
# Builds Kiln and runs the whole test suite twice: an optimized build, then one under
# AddressSanitizer and UndefinedBehaviorSanitizer (any report fails the run); then the
# threaded tests under ThreadSanitizer and each fuzz target for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
# Each phase's heading says how long the run has taken so far: CI has a time budget.
phase() { printf '== %s (at %dm%02ds) ==\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

# Line tables only (-g1): what a failure's stack trace and a sanitizer report print, at two
# thirds of the compile time of full debug information (-g), which the three builds below
# would otherwise spend most of a cold run on. A build for a debugger uses the defaults.
line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_DEBUG="-g1")

phase "build and test (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_TESTS=ON "${line_tables[@]}" >/dev/null
cmake --build build -j"$jobs"
# Every kernel the suite plans is also rendered as CUDA C++ into build/recorded_kernels ...
rm -rf build/recorded_kernels
KILN_RECORD_CUDA_DIR="$PWD/build/recorded_kernels" ctest --test-dir build --output-on-failure -j"$jobs"

# ... and checked by NVRTC for sm_80 and sm_90: the CUDA path cannot rot unseen. The suite
# compiles every family in every dtype to cubins and reads their machine code; here each
# of the ~2,500 kernels it planned goes through NVRTC's front end (what a renderer's mistake
# breaks), batched so that the preamble they share is parsed once per 48 kernels (36 s,
# where one at a time took 179 s), and one in sixteen all the way to cubins (59 s; all of
# them would be 18 minutes on 2 cores).
phase "every planned kernel through NVRTC's front end, one in sixteen to cubins, sm_80 and sm_90"
build/kiln compile-cuda build/recorded_kernels --arch 80,90 --check syntax
build/kiln compile-cuda build/recorded_kernels --arch 80,90 --every 16

phase "build and test under ASan + UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON "${line_tables[@]}" >/dev/null
cmake --build build-asan -j"$jobs"
# scripts/lsan.supp: leaks inside third-party libraries (each explained there), not Kiln's.
# intercept_tls_get_addr=0: GCC 12's LeakSanitizer guesses the bounds of a dlopen'd
# library's thread-local block from the bytes before it (a glibc 2.19 header) whenever the
# block sits 16 bytes past a page boundary; under glibc 2.36 those bytes are garbage, and
# its tracer then crashed scanning "DTLS 9 at 0x1833-0x2000002935" after a test that ran
# NVRTC (CustomKernel.CompilesForSm80AndSm90, 2026-12-05, in one clone and not another:
# it depends on where malloc puts the block). Without the interception LSan skips dynamic
# TLS, which holds no Kiln allocation.
# The tests whose time is NVRTC's and ptxas's (what CUDA C++ compiles to: cubins, SASS, the
# declared Params) ran above; NVRTC is not instrumented and its output does not depend on
# Kiln's instrumentation, so here they would only double the longest part of the run. The
# kernels they render are rendered under the sanitizers by the CUDA emulation tests.
nvrtc_bound='^MachineCode[.]|^CudaCodegen[.](EveryFamily|PackedParameters|EachIndexWidth|SixteenBit|PointwiseKernels)|[.]Kernels?(UsingIt)?Compiles?ForSm80AndSm90$|^CustomKernel[.]CompilesForSm80AndSm90$'
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions="$PWD/scripts/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "$nvrtc_bound"

# The tests that run several threads (or processes) at once, under ThreadSanitizer: any
# data race in the shared caches, the worker pool or a compiled function fails the run.
phase "threaded tests under TSan"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE_THREAD=ON \
  "${line_tables[@]}" >/dev/null
cmake --build build-tsan -j"$jobs" --target kiln_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/tests/kiln_tests \
  --gtest_filter='Concurrency*:Compile*:CubinCache*:FaultInjection*:Custom*:LlmThreads*:TokenizerModelTest.*Threads*'

# Each libFuzzer target for a bounded time over its committed seed corpus (docs/reliability.md).
phase "fuzz targets, 30 s each"
scripts/fuzz.sh 30
phase "done"
