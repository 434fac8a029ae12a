// Time to first result: one process's first call of a model, then its later calls. Run in
// fresh processes by bench/first_call.py, which sets the state (an empty cache folder, or one
// an earlier process filled) and the compile mode (KILN_CPU_JIT); results: bench/RESULTS.md.
//
//   build/bench/first_call_bench pointwise|minilm [SAVE_BUNDLE]|minilm-bundle BUNDLE|smollm2
//
// pointwise: tanh(exp(x * 0.5 + 1) * x - x * x) + 0.25 over 2M floats, a kernel the CPU
// compiles into a loop.
// minilm: all-MiniLM-L6-v2 (scripts/fetch-minilm.sh) on 8 sentences of 64 tokens, through
// kiln::compile; with SAVE_BUNDLE it then saves the compiled function there, which
// minilm-bundle loads (docs/bundles.md) and calls.
// smollm2: SmolLM2-135M-Instruct Q4_1 (scripts/fetch-smollm2.sh), a 16-token prefill then a
// decode step. Prints one line: `first <ms> second <ms> later <median ms of 10 calls> load
// <ms>`, the load (reading the weights) not counted in the calls.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "samples/minilm.h"
#include "samples/model_cache.h"

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double time_call(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return ms_since(start);
}

// The first call, the second, and the median of the ten after.
void report(double load_ms, const std::function<void()>& call) {
  const double first = time_call(call), second = time_call(call);
  std::vector<double> later;
  for (int i = 0; i < 10; ++i) later.push_back(time_call(call));
  std::sort(later.begin(), later.end());
  std::printf("first %.2f second %.2f later %.2f load %.2f\n", first, second, later[5], load_ms);
}

// tanh(exp(x * 0.5 + 1) * x - x * x) + 0.25 over 2M floats: one pointwise kernel, large
// enough for a compiled loop.
void pointwise() {
  const kiln::Tensor x = kiln::Tensor::rand({1 << 21}, 7).eval();
  report(0, [&] { (kiln::tanh(kiln::exp(x * 0.5 + 1.0) * x - x * x) + 0.25).eval(); });
}

// Eight 64-token rows of WordPiece ids (the same every run), padded.
kiln::samples::PaddedRows minilm_input() {
  std::vector<std::vector<int64_t>> rows(8, std::vector<int64_t>(64));
  for (size_t b = 0; b < rows.size(); ++b) {
    for (size_t s = 0; s < 64; ++s) {
      rows[b][s] = s == 0    ? 101
                   : s == 63 ? 102
                             : 1000 + static_cast<int64_t>((b * 64 + s) * 37 % 29000);
    }
  }
  return kiln::samples::pad_rows(rows);
}

// The encoder through kiln::compile, as an application runs it; with `save_to`, the compiled
// function is then saved there as a bundle.
void minilm(const std::string& save_to) {
  const std::string dir = kiln::samples::model_cache_dir() + "/all-MiniLM-L6-v2";
  const auto start = std::chrono::steady_clock::now();
  const kiln::samples::MiniLM model = kiln::samples::load_minilm(dir);
  kiln::Compiled embed = kiln::samples::compile_embed_padded(model);
  const double load = ms_since(start);
  const kiln::samples::PaddedRows in = minilm_input();
  kiln::eval({in.ids, in.mask});
  report(load, [&] { embed({in.ids, in.mask})[0].eval(); });
  if (!save_to.empty()) kiln::save_compiled(embed, save_to);
}

// The same encoder from a bundle that `minilm <dir>` saved: no model files, no recording,
// planning or kernel generation. The load (reading the bundle) is not counted in the calls.
void minilm_bundle(const std::string& bundle) {
  const auto start = std::chrono::steady_clock::now();
  kiln::Compiled embed = kiln::load_compiled(bundle);
  const double load = ms_since(start);
  const kiln::samples::PaddedRows in = minilm_input();
  kiln::eval({in.ids, in.mask});
  report(load, [&] { embed({in.ids, in.mask})[0].eval(); });
}

void smollm2() {
  const char* file = std::getenv("KILN_SMOLLM2");
  const std::string path = file != nullptr ? file
                                           : kiln::samples::model_cache_dir() +
                                                 "/SmolLM2-135M-Instruct/"
                                                 "SmolLM2-135M-Instruct.Q4_1.gguf";
  const auto start = std::chrono::steady_clock::now();
  const kiln::llm::Model model = kiln::llm::Model::load(path);
  const double load = ms_since(start);
  std::vector<int32_t> prompt = {1};
  for (int32_t i = 1; i < 16; ++i) prompt.push_back(100 + (i * 7919) % 40000);
  kiln::llm::Session session(model, 64);
  report(load, [&] {
    session.reset();
    (void)session.prefill(prompt);
    (void)session.step(253).to_vector<float>();
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  try {
    if (which == "pointwise") {
      pointwise();
    } else if (which == "minilm") {
      minilm(argc > 2 ? argv[2] : "");
    } else if (which == "minilm-bundle" && argc > 2) {
      minilm_bundle(argv[2]);
    } else if (which == "smollm2") {
      smollm2();
    } else {
      std::fprintf(stderr,
                   "usage: first_call_bench pointwise|minilm [SAVE_BUNDLE]|minilm-bundle "
                   "BUNDLE|smollm2\n");
      return 2;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "first_call_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
