#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time
# over its seed corpus (fuzz/corpus/<target>/, copied so the committed seeds stay as they
# are). A crash fails the run and leaves the reproducer in build-fuzz/crashes/<target>/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]    (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
jobs=$(nproc)
targets=(fuzz_trace_loader fuzz_npy fuzz_safetensors fuzz_gguf fuzz_ops fuzz_bundle)
# -O1 with line tables, as libFuzzer's documentation builds its targets: a crash's report
# names the lines, and the instrumented build compiles in far less time than at -O2 -g.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON \
  -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_SAMPLES=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus" "build-fuzz/crashes/$t"
  cp fuzz/corpus/"$t"/* "$corpus"/
  echo "== $t: ${seconds}s =="
  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
    "build-fuzz/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 \
    -artifact_prefix="build-fuzz/crashes/$t/" -print_final_stats=1 "$corpus" 2>&1 |
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY|INFO: Seed)' || true
  if ls "build-fuzz/crashes/$t"/* >/dev/null 2>&1; then
    echo "fuzz: $t found a crash: build-fuzz/crashes/$t/" >&2
    exit 1
  fi
done
echo "fuzz: no crash in ${#targets[@]} targets"
