// A KV cache write per decode step (update_slice) against the cache's capacity: in place,
// a step costs the update's size whatever the capacity; with the old cache still held (so
// the write goes into a copy) it costs the whole cache. Results: bench/RESULTS.md.
//
//   build-bench/bench/decode_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <vector>

#include "kiln/kiln.h"

namespace {

using kiln::Tensor;

constexpr int64_t kHeads = 8, kDim = 64;

// cache = update_slice(cache, step, 1, pos): the handle is replaced, so the write is in place.
void BM_CacheWriteInPlace(benchmark::State& state) {
  const int64_t capacity = state.range(0);
  Tensor cache = Tensor::zeros({kHeads, capacity, kDim}).eval();
  const Tensor step = Tensor::ones({kHeads, 1, kDim}).eval();
  int64_t pos = 0;
  for (auto _ : state) {
    cache = kiln::update_slice(cache, step, 1, pos);
    cache.eval();
    pos = (pos + 1) % capacity;
  }
  state.counters["cache_MiB"] = static_cast<double>(kHeads * capacity * kDim * 4) / (1 << 20);
}

// The same step while the previous cache is still held: each write copies the cache.
void BM_CacheWriteWithOldCacheHeld(benchmark::State& state) {
  const int64_t capacity = state.range(0);
  Tensor cache = Tensor::zeros({kHeads, capacity, kDim}).eval();
  const Tensor step = Tensor::ones({kHeads, 1, kDim}).eval();
  int64_t pos = 0;
  for (auto _ : state) {
    Tensor previous = cache;
    cache = kiln::update_slice(cache, step, 1, pos);
    cache.eval();
    pos = (pos + 1) % capacity;
  }
  state.counters["cache_MiB"] = static_cast<double>(kHeads * capacity * kDim * 4) / (1 << 20);
}

BENCHMARK(BM_CacheWriteInPlace)->Arg(256)->Arg(4096)->Arg(65536);
BENCHMARK(BM_CacheWriteWithOldCacheHeld)->Arg(256)->Arg(4096)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
