// Text generation with kiln::llm on a Llama-architecture model with seeded random weights
// (samples/random_llama.h: no trained model ships with Kiln): byte tokens in, greedy
// decoding, then top-k sampling at a temperature; tokens per second. The same Session runs
// a real GGUF model (`kiln generate`, samples/chat.cc).
//
//   build/samples/text_generation [--tokens N] [--top-k K] [--temperature T] [prompt]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/llm.h"
#include "samples/random_llama.h"

namespace {

// Prefills the prompt, then generates `count` tokens one decode step at a time; reports the
// rate and the plans built by the decode steps after the second (none: every step has the
// same shapes, and the position is a kernel parameter).
std::vector<int32_t> generate(const kiln::llm::Model& model, const std::vector<int32_t>& prompt,
                              int64_t count, const kiln::llm::Sampling& sampling,
                              double* tokens_per_second, int64_t* late_plans) {
  kiln::llm::Session session(model, static_cast<int64_t>(prompt.size()) + count);
  kiln::Tensor logits = session.prefill(prompt);
  std::vector<int32_t> out;
  const auto start = std::chrono::steady_clock::now();
  int64_t plans_after_second = kiln::stats().plans_built;
  for (int64_t i = 0; i < count; ++i) {
    if (i == 2) plans_after_second = kiln::stats().plans_built;
    const int32_t token = session.sample(logits, sampling);
    out.push_back(token);
    if (i + 1 == count) break;
    logits = session.step(token);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *tokens_per_second = static_cast<double>(count) / s;
  *late_plans = kiln::stats().plans_built - plans_after_second;
  return out;
}

std::string printable(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s += (t >= 32 && t < 127) ? static_cast<char>(t) : '.';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t count = 24;
    int top_k = 8;
    double temperature = 0.8;
    std::string prompt = "Kiln";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--tokens" && i + 1 < argc) {
        count = std::atoll(argv[++i]);
      } else if (arg == "--top-k" && i + 1 < argc) {
        top_k = std::atoi(argv[++i]);
      } else if (arg == "--temperature" && i + 1 < argc) {
        temperature = std::atof(argv[++i]);
      } else {
        prompt = arg;
      }
    }
    kiln::samples::RandomLlamaShape shape;
    shape.context = static_cast<int64_t>(prompt.size()) + count;
    const kiln::llm::Model model = kiln::samples::load_random_llama(shape, 7);
    std::printf(
        "Llama-architecture model, random weights: %lld layers, dim %lld, %lld query heads "
        "sharing %lld key/value heads, KV cache of %lld positions\n",
        static_cast<long long>(shape.layers), static_cast<long long>(shape.dim),
        static_cast<long long>(shape.heads), static_cast<long long>(shape.kv_heads),
        static_cast<long long>(shape.context));
    std::vector<int32_t> ids;  // bytes, as unsigned: UTF-8 beyond ASCII is 128 to 255
    for (unsigned char byte : prompt) ids.push_back(byte);
    kiln::llm::Sampling sampled_with;
    sampled_with.temperature = temperature;
    sampled_with.top_k = top_k;
    sampled_with.seed = 1;
    double greedy_rate = 0, sampled_rate = 0;
    int64_t late_plans = 0, sampled_late_plans = 0;
    const std::vector<int32_t> greedy =
        generate(model, ids, count, kiln::llm::Sampling{}, &greedy_rate, &late_plans);
    const std::vector<int32_t> sampled =
        generate(model, ids, count, sampled_with, &sampled_rate, &sampled_late_plans);
    std::printf("prompt \"%s\", %lld tokens each:\n", prompt.c_str(),
                static_cast<long long>(count));
    std::printf("  greedy:      \"%s\"  %.0f tokens/s\n", printable(greedy).c_str(), greedy_rate);
    std::printf("  top-%d, T=%.2f: \"%s\"  %.0f tokens/s\n", top_k, temperature,
                printable(sampled).c_str(), sampled_rate);
    std::printf("plans built by decode steps after the second: %lld\n",
                static_cast<long long>(late_plans) + static_cast<long long>(sampled_late_plans));
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
