#include "samples/llama.h"

#include <cmath>
#include <string>

namespace kiln::samples {
namespace {

// cos and sin of RoPE's angles for positions start ... start + tokens - 1: [tokens,
// head_dim], each frequency twice (the rotate-half layout: dims i and i + head_dim / 2 turn
// together).
void rope_tables(const LlamaConfig& c, int64_t start, int64_t tokens, Tensor& cos_t,
                 Tensor& sin_t) {
  const int64_t half = c.head_dim() / 2;
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = static_cast<float>(
        std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim())));
  }
  const Tensor positions =
      (Tensor::arange(tokens) + static_cast<double>(start)).reshape({tokens, 1});
  const Tensor angles = positions * Tensor::from_vector(inv_freq, {1, half});
  const Tensor both = concat({angles, angles}, 1);
  cos_t = cos(both);
  sin_t = sin(both);
}

// x [1, heads, T, head_dim] turned by its positions' angles.
Tensor rope(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  const int64_t d = x.shape()[3], half = d / 2;
  const Tensor rotated = concat({-x.slice(3, half, d), x.slice(3, 0, half)}, 3);
  return x * cos_t + rotated * sin_t;
}

// [1, T, n * head_dim] -> [1, n, T, head_dim].
Tensor heads_first(const Tensor& x, int64_t n, int64_t head_dim) {
  return x.reshape({1, x.shape()[1], n, head_dim}).permute({0, 2, 1, 3});
}

// A row-parallel layer's partial result summed over the tensor-parallel ranks.
Tensor sum_over_shards(const LlamaWeights& w, const Tensor& partial) {
  return w.tensor_parallel
             ? distributed::all_reduce(partial, distributed::Reduction::kSum, *w.tensor_parallel)
             : partial;
}

Tensor attention(const LlamaWeights& w, const LlamaLayer& l, KvCache& cache, size_t layer,
                 const Tensor& h, const Tensor& cos_t, const Tensor& sin_t) {
  const LlamaConfig& c = w.config;
  const int64_t tokens = h.shape()[1], start = cache.length;
  // This rank's heads (all of them without tensor parallelism).
  const int64_t heads = c.heads / w.shards(), kv_heads = c.kv_heads / w.shards();
  const Tensor q = rope(heads_first(linear(h, l.wq), heads, c.head_dim()), cos_t, sin_t);
  const Tensor k = rope(heads_first(linear(h, l.wk), kv_heads, c.head_dim()), cos_t, sin_t);
  const Tensor v = heads_first(linear(h, l.wv), kv_heads, c.head_dim());
  cache.keys[layer] = update_slice(cache.keys[layer], k, 2, start);
  cache.values[layer] = update_slice(cache.values[layer], v, 2, start);
  // Attention reads the whole cache and masks the positions not yet written, so every decode
  // step has the same shapes and reuses one plan (slicing to the filled length would make a
  // new plan per step). Causal: the query at position start + i sees keys at positions
  // <= start + i (later ones are in the future or not written yet); start is a scalar, so a
  // new position builds no plan. The kv heads serve their query-head groups directly (GQA).
  const Tensor query_pos =
      (Tensor::arange(tokens, DType::I64) + static_cast<double>(start)).reshape({tokens, 1});
  const Tensor key_pos = Tensor::arange(c.capacity, DType::I64).reshape({1, c.capacity});
  const Tensor context = scaled_dot_product_attention(q, cache.keys[layer], cache.values[layer],
                                                      key_pos <= query_pos);  // [1, heads, T, d]
  return sum_over_shards(
      w, linear(context.permute({0, 2, 1, 3}).reshape({1, tokens, heads * c.head_dim()}), l.wo));
}

}  // namespace

LlamaWeights random_llama_weights(const LlamaConfig& config, uint64_t seed) {
  LlamaWeights w;
  w.config = config;
  auto matrix = [&](int64_t out, int64_t in) {
    return (Tensor::randn({out, in}, seed++) * (1.0 / std::sqrt(static_cast<double>(in)))).eval();
  };
  auto norm = [&] { return (Tensor::randn({config.dim}, seed++) * 0.05 + 1.0).eval(); };
  const int64_t kv = config.kv_heads * config.head_dim();
  w.embedding = Tensor::randn({config.vocab, config.dim}, seed++).eval();
  for (int64_t i = 0; i < config.layers; ++i) {
    w.layers.push_back({norm(), matrix(config.dim, config.dim), matrix(kv, config.dim),
                        matrix(kv, config.dim), matrix(config.dim, config.dim), norm(),
                        matrix(config.hidden, config.dim), matrix(config.hidden, config.dim),
                        matrix(config.dim, config.hidden)});
  }
  w.final_norm = norm();
  w.output = matrix(config.vocab, config.dim);
  return w;
}

KvCache empty_kv_cache(const LlamaConfig& c, int64_t shards) {
  KvCache cache;
  const int64_t kv_heads = c.kv_heads / shards;
  for (int64_t i = 0; i < c.layers; ++i) {
    cache.keys.push_back(Tensor::zeros({1, kv_heads, c.capacity, c.head_dim()}).eval());
    cache.values.push_back(Tensor::zeros({1, kv_heads, c.capacity, c.head_dim()}).eval());
  }
  return cache;
}

Tensor llama_forward(const LlamaWeights& w, KvCache& cache, const Tensor& tokens) {
  const LlamaConfig& c = w.config;
  const int64_t count = tokens.shape()[1];
  if (cache.length + count > c.capacity) {
    throw Error("llama_forward: " + std::to_string(cache.length + count) +
                " positions exceed the KV cache's capacity of " + std::to_string(c.capacity));
  }
  Tensor cos_t, sin_t;
  rope_tables(c, cache.length, count, cos_t, sin_t);
  Tensor x = embedding(w.embedding, tokens);  // [1, T, dim]
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LlamaLayer& l = w.layers[i];
    x = x + attention(w, l, cache, i, rms_norm(x, l.attention_norm, c.eps), cos_t, sin_t);
    const Tensor h = rms_norm(x, l.mlp_norm, c.eps);
    x = x + sum_over_shards(w, linear(silu(linear(h, l.w_gate)) * linear(h, l.w_up), l.w_down));
  }
  cache.length += count;
  return linear(rms_norm(x, w.final_norm, c.eps), w.output);
}

std::vector<Tensor> step_outputs(const Tensor& logits, const KvCache& cache) {
  std::vector<Tensor> out{logits};
  out.insert(out.end(), cache.keys.begin(), cache.keys.end());
  out.insert(out.end(), cache.values.begin(), cache.values.end());
  return out;
}

}  // namespace kiln::samples
