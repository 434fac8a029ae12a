// all-MiniLM-L6-v2 (samples/minilm.h) with its real weights at batch 8 x 64 tokens and
// 1 x 16: Kiln's side of the comparison with ONNX Runtime and PyTorch that
// bench/minilm_compare.py runs on the same weights and token ids. Results: bench/RESULTS.md.
//
//   scripts/fetch-minilm.sh
//   build/bench/minilm_bench --benchmark_repetitions=11 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "samples/minilm.h"
#include "samples/model_cache.h"

namespace {

std::string model_dir() {
  if (const char* dir = std::getenv("KILN_MINILM_DIR")) return dir;
  return kiln::samples::model_cache_dir() + "/all-MiniLM-L6-v2";
}

// The token ids bench/minilm_compare.py feeds ONNX Runtime and PyTorch: [CLS] ... [SEP] with
// a fixed pattern in between, every row full (no padding).
std::vector<std::vector<int64_t>> token_rows(int64_t batch, int64_t seq) {
  std::vector<std::vector<int64_t>> rows(batch, std::vector<int64_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      rows[b][s] = s == 0 ? 101 : s == seq - 1 ? 102 : 1000 + ((b * seq + s) * 37) % 29000;
    }
  }
  return rows;
}

// The model, loaded once for every benchmark; null (the benchmark skipped) when it has not
// been fetched.
const kiln::samples::MiniLM* loaded_model(benchmark::State& state) {
  const std::string dir = model_dir();
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    state.SkipWithError(("no model in " + dir + ": run scripts/fetch-minilm.sh").c_str());
    return nullptr;
  }
  static const kiln::samples::MiniLM model = kiln::samples::load_minilm(dir);
  return &model;
}

void BM_MiniLM(benchmark::State& state) {
  const kiln::samples::MiniLM* loaded = loaded_model(state);
  if (loaded == nullptr) return;
  const kiln::samples::MiniLM& model = *loaded;
  const auto rows = token_rows(state.range(0), state.range(1));
  kiln::samples::embed_sentences(model, rows).eval();  // plans and kernels, once
  for (auto _ : state) kiln::samples::embed_sentences(model, rows).eval();
}

BENCHMARK(BM_MiniLM)->Args({8, 64})->Args({1, 16})->Unit(benchmark::kMillisecond);

// The same forward through kiln::compile, as an application serving requests of one shape
// would run it: after the first call records and plans it, each call binds the new ids and
// mask to the recorded plan instead of recording ~300 ops again.
void BM_MiniLMCompiled(benchmark::State& state) {
  const kiln::samples::MiniLM* loaded = loaded_model(state);
  if (loaded == nullptr) return;
  const kiln::samples::MiniLM& model = *loaded;
  const kiln::samples::PaddedRows padded =
      kiln::samples::pad_rows(token_rows(state.range(0), state.range(1)));
  kiln::Compiled encoder = kiln::samples::compile_embed_padded(model);
  encoder({padded.ids, padded.mask})[0].eval();  // records, plans and compiles, once
  for (auto _ : state) encoder({padded.ids, padded.mask})[0].eval();
}

BENCHMARK(BM_MiniLMCompiled)->Args({8, 64})->Args({1, 16})->Unit(benchmark::kMillisecond);

// The compiled forward with the encoder's linear weights quantized to Q8_0 at load time
// (sentence_embeddings --weights q8_0): each linear a quantized matrix product.
void BM_MiniLMQ8Compiled(benchmark::State& state) {
  const kiln::samples::MiniLM* loaded = loaded_model(state);
  if (loaded == nullptr) return;
  static const kiln::samples::MiniLM model =
      kiln::samples::quantize_linear_weights(*loaded, kiln::DType::Q8_0);
  const kiln::samples::PaddedRows padded =
      kiln::samples::pad_rows(token_rows(state.range(0), state.range(1)));
  kiln::Compiled encoder = kiln::samples::compile_embed_padded(model);
  encoder({padded.ids, padded.mask})[0].eval();
  for (auto _ : state) encoder({padded.ids, padded.mask})[0].eval();
}

BENCHMARK(BM_MiniLMQ8Compiled)->Args({8, 64})->Args({1, 16})->Unit(benchmark::kMillisecond);

// The first stage alone: three embedding gathers, their sum and a layer norm (one fused
// kernel), on the same token ids.
void BM_MiniLMEmbedding(benchmark::State& state) {
  const kiln::samples::MiniLM* loaded = loaded_model(state);
  if (loaded == nullptr) return;
  const kiln::samples::MiniLM& model = *loaded;
  const auto rows = token_rows(state.range(0), state.range(1));
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const kiln::Tensor ids = kiln::Tensor::from_vector(flat, {state.range(0), state.range(1)});
  kiln::samples::embed_tokens(model, ids).eval();
  for (auto _ : state) kiln::samples::embed_tokens(model, ids).eval();
}

BENCHMARK(BM_MiniLMEmbedding)->Args({8, 64})->Args({1, 16})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
