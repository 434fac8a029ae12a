// A small Llama-architecture GGUF model with random f32 weights, for the kiln::llm tests.
#ifndef KILN_TESTS_LLM_SMALL_LLAMA_H_
#define KILN_TESTS_LLM_SMALL_LLAMA_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "kiln/io.h"
#include "kiln/kiln.h"

namespace kiln::testing {

// A small model of the Llama family with random f32 weights, for save_gguf: architecture
// "llama" (W_q and W_k as GGUF's converter leaves them, rotated in adjacent pairs) or "qwen2"
// (with q, k and v biases). vocab 96, width 32, 4 query heads on 2 key/value heads, MLP
// width 48, 2 layers, a context of 512.
inline GgufFile small_model(const std::string& architecture, bool tied) {
  const int64_t vocab = 96, dim = 32, heads = 4, kv_heads = 2, hidden = 48, layers = 2;
  GgufFile f;
  f.metadata["general.architecture"] = GgufValue::string(architecture);
  const std::string a = architecture + ".";
  auto u32 = [](int64_t v) { return GgufValue::integer(GgufValue::Type::kU32, v); };
  f.metadata[a + "block_count"] = u32(layers);
  f.metadata[a + "embedding_length"] = u32(dim);
  f.metadata[a + "attention.head_count"] = u32(heads);
  f.metadata[a + "attention.head_count_kv"] = u32(kv_heads);
  f.metadata[a + "feed_forward_length"] = u32(hidden);
  f.metadata[a + "context_length"] = u32(512);
  f.metadata[a + "rope.dimension_count"] = u32(dim / heads);
  f.metadata[a + "rope.freq_base"] = GgufValue::floating(GgufValue::Type::kF32, 500.0);
  f.metadata[a + "attention.layer_norm_rms_epsilon"] =
      GgufValue::floating(GgufValue::Type::kF32, 1e-5);
  uint64_t seed = 11;
  auto matrix = [&](int64_t out, int64_t in) {
    return (Tensor::randn({out, in}, seed++) * (1.0 / std::sqrt(static_cast<double>(in)))).eval();
  };
  auto norm = [&] { return (Tensor::rand({dim}, seed++) * 0.5 + 0.75).eval(); };
  const int64_t kv = kv_heads * dim / heads;
  f.tensors["token_embd.weight"] = Tensor::randn({vocab, dim}, seed++).eval();
  if (!tied) f.tensors["output.weight"] = matrix(vocab, dim);
  f.tensors["output_norm.weight"] = norm();
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    f.tensors[p + "attn_norm.weight"] = norm();
    f.tensors[p + "attn_q.weight"] = matrix(dim, dim);
    f.tensors[p + "attn_k.weight"] = matrix(kv, dim);
    f.tensors[p + "attn_v.weight"] = matrix(kv, dim);
    f.tensors[p + "attn_output.weight"] = matrix(dim, dim);
    f.tensors[p + "ffn_norm.weight"] = norm();
    f.tensors[p + "ffn_gate.weight"] = matrix(hidden, dim);
    f.tensors[p + "ffn_up.weight"] = matrix(hidden, dim);
    f.tensors[p + "ffn_down.weight"] = matrix(dim, hidden);
    if (architecture == "qwen2") {
      f.tensors[p + "attn_q.bias"] = (Tensor::randn({dim}, seed++) * 0.5).eval();
      f.tensors[p + "attn_k.bias"] = (Tensor::randn({kv}, seed++) * 0.5).eval();
      f.tensors[p + "attn_v.bias"] = (Tensor::randn({kv}, seed++) * 0.5).eval();
    }
  }
  return f;
}

inline GgufFile small_llama(bool tied) { return small_model("llama", tied); }

}  // namespace kiln::testing

#endif  // KILN_TESTS_LLM_SMALL_LLAMA_H_
