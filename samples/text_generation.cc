// Text generation with a Llama-style decoder (samples/llama.h: RoPE, RMSNorm, SwiGLU,
// grouped-query attention, a KV cache written with update_slice) on seeded random
// weights: byte tokens in, greedy decoding, then top-k sampling; tokens per second.
//
//   build/samples/text_generation [--tokens N] [--top-k K] [--temperature T] [prompt]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "samples/llama.h"

namespace {

using kiln::Tensor;
using kiln::samples::KvCache;
using kiln::samples::LlamaWeights;

// The last position's logits [vocab] of logits [1, T, vocab].
Tensor last_logits(const Tensor& logits) {
  const int64_t t = logits.shape()[1], vocab = logits.shape()[2];
  return logits.slice(1, t - 1, t).reshape({vocab});
}

// Picks the next token: the most likely (top_k == 0), else one of the top_k most likely,
// drawn by their softmax at `temperature`.
int64_t pick_token(const Tensor& logits, int64_t top_k, double temperature, std::mt19937_64& rng) {
  const Tensor last = last_logits(logits);
  if (top_k == 0) return kiln::argmax(last, 0).to_vector<int64_t>()[0];
  const kiln::TopK best = kiln::topk(last, top_k);
  const Tensor probs = kiln::softmax(best.values * (1.0 / temperature));
  kiln::eval({probs, best.indices});
  const std::vector<float> p = probs.to_vector<float>();
  const std::vector<int64_t> ids = best.indices.to_vector<int64_t>();
  std::discrete_distribution<size_t> draw(p.begin(), p.end());
  return ids[draw(rng)];
}

// Prefills the prompt, then generates `count` tokens one decode step at a time; reports
// the rate and the plans built by the decode steps after the second (none: every step has
// the same shapes, and the position is a scalar).
std::vector<int64_t> generate(const LlamaWeights& w, const std::vector<int64_t>& prompt,
                              int64_t count, int64_t top_k, double temperature, uint64_t seed,
                              double* tokens_per_second, int64_t* late_plans) {
  std::mt19937_64 rng(seed);
  KvCache cache = kiln::samples::empty_kv_cache(w.config);
  const auto n = static_cast<int64_t>(prompt.size());
  Tensor logits = kiln::samples::llama_forward(w, cache, Tensor::from_vector(prompt, {1, n}));
  kiln::eval(kiln::samples::step_outputs(logits, cache));
  std::vector<int64_t> out;
  const auto start = std::chrono::steady_clock::now();
  int64_t plans_after_second = kiln::stats().plans_built;
  for (int64_t i = 0; i < count; ++i) {
    if (i == 2) plans_after_second = kiln::stats().plans_built;
    const int64_t token = pick_token(logits, top_k, temperature, rng);
    out.push_back(token);
    if (i + 1 == count) break;
    logits =
        kiln::samples::llama_forward(w, cache, Tensor::from_vector(std::vector{token}, {1, 1}));
    kiln::eval(kiln::samples::step_outputs(logits, cache));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *tokens_per_second = static_cast<double>(count) / s;
  *late_plans = kiln::stats().plans_built - plans_after_second;
  return out;
}

std::string printable(const std::vector<int64_t>& tokens) {
  std::string s;
  for (int64_t t : tokens) s += (t >= 32 && t < 127) ? static_cast<char>(t) : '.';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t count = 24, top_k = 8;
    double temperature = 0.8;
    std::string prompt = "Kiln";
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--tokens" && i + 1 < argc) {
        count = std::atoll(argv[++i]);
      } else if (arg == "--top-k" && i + 1 < argc) {
        top_k = std::atoll(argv[++i]);
      } else if (arg == "--temperature" && i + 1 < argc) {
        temperature = std::atof(argv[++i]);
      } else {
        prompt = arg;
      }
    }
    kiln::samples::LlamaConfig config;
    config.capacity = static_cast<int64_t>(prompt.size()) + count;
    const LlamaWeights w = kiln::samples::random_llama_weights(config, 7);
    std::printf(
        "Llama-style decoder, random weights: %lld layers, dim %lld, %lld query heads sharing "
        "%lld key/value heads, KV cache of %lld positions\n",
        static_cast<long long>(config.layers), static_cast<long long>(config.dim),
        static_cast<long long>(config.heads), static_cast<long long>(config.kv_heads),
        static_cast<long long>(config.capacity));
    const std::vector<int64_t> tokens(prompt.begin(), prompt.end());
    double greedy_rate = 0, sampled_rate = 0;
    int64_t late_plans = 0, sampled_late_plans = 0;
    const std::vector<int64_t> greedy =
        generate(w, tokens, count, 0, 1.0, 1, &greedy_rate, &late_plans);
    const std::vector<int64_t> sampled =
        generate(w, tokens, count, top_k, temperature, 1, &sampled_rate, &sampled_late_plans);
    std::printf("prompt \"%s\", %lld tokens each:\n", prompt.c_str(),
                static_cast<long long>(count));
    std::printf("  greedy:      \"%s\"  %.0f tokens/s\n", printable(greedy).c_str(), greedy_rate);
    std::printf("  top-%lld, T=%.2f: \"%s\"  %.0f tokens/s\n", static_cast<long long>(top_k),
                temperature, printable(sampled).c_str(), sampled_rate);
    std::printf("plans built by decode steps after the second: %lld\n",
                static_cast<long long>(late_plans) + static_cast<long long>(sampled_late_plans));
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
