// A decode step against the KV cache's capacity. The cache write (update_slice): in place,
// a step costs the update's size whatever the capacity; with the old cache still held (so
// the write goes into a copy) it costs the whole cache. Then a whole step of kiln::llm on a
// small random model (samples/random_llama.h). Results: bench/RESULTS.md.
//
//   build-bench/bench/decode_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "samples/random_llama.h"

namespace {

using kiln::Tensor;

constexpr int64_t kHeads = 8, kDim = 64;

// One decode step per iteration: cache = update_slice(cache, step, 1, pos). When
// `hold_previous`, the previous cache is still referenced, so the write goes into a copy;
// otherwise the handle is replaced and the write is in place.
void cache_writes(benchmark::State& state, bool hold_previous) {
  const int64_t capacity = state.range(0);
  Tensor cache = Tensor::zeros({kHeads, capacity, kDim}).eval();
  const Tensor step = Tensor::ones({kHeads, 1, kDim}).eval();
  int64_t pos = 0;
  for (auto _ : state) {
    const Tensor previous = hold_previous ? cache : Tensor();
    cache = kiln::update_slice(cache, step, 1, pos);
    cache.eval();
    pos = (pos + 1) % capacity;
  }
  state.counters["cache_MiB"] = static_cast<double>(kHeads * capacity * kDim * 4) / (1 << 20);
}

void BM_CacheWriteInPlace(benchmark::State& state) { cache_writes(state, false); }
void BM_CacheWriteWithOldCacheHeld(benchmark::State& state) { cache_writes(state, true); }

// A whole decode step of kiln::llm on the random model of samples/text_generation
// (samples/random_llama.h: 2 layers, dim 64, 4 query heads over 2 key/value heads) against
// its cache's capacity: attention reads the positions written so far, in stretches of 64,
// so the capacity costs memory, not time. Steps run from position 1 to the capacity, then
// the Session starts again.
void BM_LlamaDecodeStep(benchmark::State& state) {
  const int64_t capacity = state.range(0);
  kiln::samples::RandomLlamaShape shape;
  shape.context = capacity;
  const kiln::llm::Model model = kiln::samples::load_random_llama(shape, 7);
  kiln::llm::Session session(model, capacity);
  (void)session.prefill({42});
  for (auto _ : state) {
    if (session.position() == capacity) {
      state.PauseTiming();
      session.reset();
      (void)session.prefill({42});
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(session.step(42).to_vector<float>());
  }
}

BENCHMARK(BM_CacheWriteInPlace)->Arg(256)->Arg(4096)->Arg(65536);
BENCHMARK(BM_CacheWriteWithOldCacheHeld)->Arg(256)->Arg(4096)->Arg(65536);
BENCHMARK(BM_LlamaDecodeStep)->Arg(64)->Arg(512)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
