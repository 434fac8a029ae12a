// SmolLM2-135M-Instruct (Q4_1, scripts/fetch-smollm2.sh) through kiln::llm: a decode step
// after a 16-token prompt, sampling one token at a temperature, and prefills of 128 and 512
// tokens, in tokens per second.
//
//   scripts/fetch-smollm2.sh && build/bench/llm_bench [--benchmark_repetitions=5]
//
// KILN_SMOLLM2 names the .gguf file; else the cache folder the script fills is used.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "samples/model_cache.h"

namespace {

std::string model_path() {
  if (const char* file = std::getenv("KILN_SMOLLM2")) return file;
  return kiln::samples::model_cache_dir() +
         "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
}

const kiln::llm::Model& model() {
  static const kiln::llm::Model m = kiln::llm::Model::load(model_path());
  return m;
}

std::vector<int32_t> prompt(int64_t n) {
  std::vector<int32_t> ids{1};
  for (int64_t i = 1; i < n; ++i) ids.push_back(static_cast<int32_t>(100 + (i * 7919) % 40000));
  return ids;
}

// One decode step (its logits read back, as sampling would) after a 16-token prompt; the
// Session starts again before its cache of 512 positions fills.
void BM_SmolLM2Decode(benchmark::State& state) {
  kiln::llm::Session session(model(), 512);
  kiln::Tensor logits = session.prefill(prompt(16));
  for (int i = 0; i < 4; ++i) logits = session.step(7);  // plans and kernels made here
  for (auto _ : state) {
    if (session.position() == session.max_tokens()) {
      state.PauseTiming();
      session.reset();
      (void)session.prefill(prompt(16));
      state.ResumeTiming();
    }
    logits = session.step(253);
    benchmark::DoNotOptimize(logits.to_vector<float>());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLM2Decode)->Unit(benchmark::kMillisecond)->UseRealTime();

// Session::sample at temperature 0.8 over the 49152 logits of a prompt's last position: the
// host's share of a sampled (not greedy) decode step.
void BM_SmolLM2Sample(benchmark::State& state) {
  kiln::llm::Session session(model(), 64);
  const kiln::Tensor logits = session.prefill(prompt(16));
  kiln::llm::Sampling sampling;
  sampling.temperature = 0.8;
  sampling.seed = 3;
  for (auto _ : state) benchmark::DoNotOptimize(session.sample(logits, sampling));
}
BENCHMARK(BM_SmolLM2Sample)->Unit(benchmark::kMillisecond);

void BM_SmolLM2Prefill(benchmark::State& state) {
  const std::vector<int32_t> ids = prompt(state.range(0));
  kiln::llm::Session session(model(), 512);
  (void)session.prefill(ids).to_vector<float>();  // plans and kernels made here
  for (auto _ : state) {
    state.PauseTiming();
    session.reset();
    state.ResumeTiming();
    benchmark::DoNotOptimize(session.prefill(ids).to_vector<float>());
  }
  state.counters["tok/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * state.range(0)), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmolLM2Prefill)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
