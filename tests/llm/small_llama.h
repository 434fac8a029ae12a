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
// "llama" (W_q and W_k as GGUF's converter leaves them, rotated in adjacent pairs), "qwen2"
// (with q, k and v biases) or "gemma3". vocab 96, width 32, 4 query heads on 2 key/value
// heads, MLP width 48, 2 layers, a context of 512. gemma3's heads are 16 wide (not 32 / 4),
// its first layer slides over a window of 5 positions with a RoPE base of its own, and its
// second layer's RoPE is scaled linearly.
inline GgufFile small_model(const std::string& architecture, bool tied) {
  const int64_t vocab = 96, dim = 32, heads = 4, kv_heads = 2, hidden = 48, layers = 2;
  const bool gemma = architecture == "gemma3";
  const int64_t head_dim = gemma ? 16 : dim / heads;
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
  f.metadata[a + "rope.dimension_count"] = u32(head_dim);
  f.metadata[a + "rope.freq_base"] = GgufValue::floating(GgufValue::Type::kF32, 500.0);
  f.metadata[a + "attention.layer_norm_rms_epsilon"] =
      GgufValue::floating(GgufValue::Type::kF32, 1e-5);
  if (gemma) {
    f.metadata[a + "attention.key_length"] = u32(head_dim);
    f.metadata[a + "attention.value_length"] = u32(head_dim);
    f.metadata[a + "attention.sliding_window"] = u32(5);
    f.metadata[a + "attention.sliding_window_pattern"] =
        GgufValue::array(GgufValue::Type::kBool, {GgufValue::integer(GgufValue::Type::kBool, 1),
                                                  GgufValue::integer(GgufValue::Type::kBool, 0)});
    f.metadata[a + "rope.freq_base_swa"] = GgufValue::floating(GgufValue::Type::kF32, 100.0);
    f.metadata[a + "rope.scaling.type"] = GgufValue::string("linear");
    f.metadata[a + "rope.scaling.factor"] = GgufValue::floating(GgufValue::Type::kF32, 2.0);
  }
  uint64_t seed = 11;
  auto matrix = [&](int64_t out, int64_t in) {
    return (Tensor::randn({out, in}, seed++) * (1.0 / std::sqrt(static_cast<double>(in)))).eval();
  };
  auto norm = [&](int64_t n) { return (Tensor::rand({n}, seed++) * 0.5 + 0.75).eval(); };
  const int64_t q = heads * head_dim, kv = kv_heads * head_dim;
  f.tensors["token_embd.weight"] = Tensor::randn({vocab, dim}, seed++).eval();
  if (!tied) f.tensors["output.weight"] = matrix(vocab, dim);
  f.tensors["output_norm.weight"] = norm(dim);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    f.tensors[p + "attn_norm.weight"] = norm(dim);
    f.tensors[p + "attn_q.weight"] = matrix(q, dim);
    f.tensors[p + "attn_k.weight"] = matrix(kv, dim);
    f.tensors[p + "attn_v.weight"] = matrix(kv, dim);
    f.tensors[p + "attn_output.weight"] = matrix(dim, q);
    f.tensors[p + "ffn_norm.weight"] = norm(dim);
    f.tensors[p + "ffn_gate.weight"] = matrix(hidden, dim);
    f.tensors[p + "ffn_up.weight"] = matrix(hidden, dim);
    f.tensors[p + "ffn_down.weight"] = matrix(dim, hidden);
    if (architecture == "qwen2") {
      f.tensors[p + "attn_q.bias"] = (Tensor::randn({q}, seed++) * 0.5).eval();
      f.tensors[p + "attn_k.bias"] = (Tensor::randn({kv}, seed++) * 0.5).eval();
      f.tensors[p + "attn_v.bias"] = (Tensor::randn({kv}, seed++) * 0.5).eval();
    }
    if (gemma) {
      f.tensors[p + "attn_q_norm.weight"] = norm(head_dim);
      f.tensors[p + "attn_k_norm.weight"] = norm(head_dim);
      f.tensors[p + "post_attention_norm.weight"] = norm(dim);
      f.tensors[p + "post_ffw_norm.weight"] = norm(dim);
    }
  }
  return f;
}

inline GgufFile small_llama(bool tied) { return small_model("llama", tied); }

}  // namespace kiln::testing

#endif  // KILN_TESTS_LLM_SMALL_LLAMA_H_
