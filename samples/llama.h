// A Llama-style decoder on Kiln's public API: RMSNorm, rotary position embeddings (RoPE),
// grouped-query attention over a KV cache written with update_slice, and a SwiGLU MLP.
// Weights are seeded random (no small language model ships in a package here). Used by
// samples/text_generation.cc and checked step by step against the reference evaluator.
#ifndef KILN_SAMPLES_LLAMA_H_
#define KILN_SAMPLES_LLAMA_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace kiln::samples {

struct LlamaConfig {
  int64_t vocab = 256;  // byte-level: a token is a byte
  int64_t dim = 64;     // model width
  int64_t layers = 2;
  int64_t heads = 4;       // query heads
  int64_t kv_heads = 2;    // key/value heads; each serves heads / kv_heads query heads
  int64_t hidden = 176;    // SwiGLU width
  int64_t capacity = 128;  // the KV cache's length: prompt plus generated tokens
  double rope_theta = 10000.0;
  double eps = 1e-5;
  int64_t head_dim() const { return dim / heads; }
};

struct LlamaLayer {
  Tensor attention_norm, wq, wk, wv, wo;  // linear weights are [out, in] (PyTorch's layout)
  Tensor mlp_norm, w_gate, w_up, w_down;
};

struct LlamaWeights {
  LlamaConfig config;
  Tensor embedding;  // [vocab, dim]
  std::vector<LlamaLayer> layers;
  Tensor final_norm, output;  // output: [vocab, dim]
  // Tensor parallel (Megatron-LM), when set: this rank holds 1 / size() of every layer, by
  // head and by hidden feature. wq wk wv w_gate w_up hold their rows (column-parallel), wo and
  // w_down their columns (row-parallel, each followed by one all_reduce); norms, embedding
  // and output are whole.
  std::optional<distributed::Group> tensor_parallel;
  int64_t shards() const { return tensor_parallel ? tensor_parallel->size() : 1; }
};

// Seeded random weights, computed at once as loaded weights would be.
LlamaWeights random_llama_weights(const LlamaConfig& config, uint64_t seed);

// Per layer, keys and values [1, kv_heads, capacity, head_dim]; positions past `length`
// hold nothing yet.
struct KvCache {
  std::vector<Tensor> keys, values;
  int64_t length = 0;
};
// `shards`: the tensor-parallel group's size (each rank caches its kv_heads / shards heads).
KvCache empty_kv_cache(const LlamaConfig& config, int64_t shards = 1);

// Runs tokens [1, T] at positions cache.length ... + T - 1: writes their keys and values
// into the cache (cache.length grows by T) and returns the logits [1, T, vocab]. Lazy:
// evaluate the logits and the cache together (step_outputs).
Tensor llama_forward(const LlamaWeights& w, KvCache& cache, const Tensor& tokens);

// The logits and every cache tensor: what one decode step evaluates at once.
std::vector<Tensor> step_outputs(const Tensor& logits, const KvCache& cache);

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_LLAMA_H_
