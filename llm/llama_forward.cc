#include "llm/llama_forward.h"

#include <algorithm>
#include <cmath>

#include "kiln/kiln.h"
#include "llm/tensor_parallel.h"

namespace kiln::llm {
namespace {

// Attention reads the cache up to a multiple of this many positions (masking the ones not
// written yet), so that the decode steps of one stretch share their shapes and their plans:
// a new plan every kAttentionStride tokens (cached: once per stretch in a process), where reading
// exactly the filled length would build one per token, and reading the whole capacity would read it
// all on every step.
constexpr int64_t kAttentionStride = 64;

// Which of the cached positions from ... to - 1 each of the queries at start ... start +
// tokens - 1 sees: those at or before its own, and with a sliding `window`, fewer than `window`
// positions before it. A decode step's one query gets a row of 0 and -inf added to its scores,
// made on the host: a bias the same for every query row, which the attention kernel adds once
// per row of keys instead of evaluating a mask per score. A chunk of several queries compares
// positions.
Tensor attention_mask(int64_t start, int64_t tokens, int64_t from, int64_t to, int64_t window) {
  const int64_t keys = to - from;
  if (tokens == 1) {
    std::vector<float> bias(static_cast<size_t>(keys), -INFINITY);
    const int64_t first = window > 0 ? std::max(from, start - window + 1) : from;
    std::fill(bias.begin() + (first - from), bias.begin() + (start + 1 - from), 0.0f);
    return Tensor::from_vector(bias, {1, keys});
  }
  const Tensor query_pos =
      (Tensor::arange(tokens, DType::I64) + static_cast<double>(start)).reshape({tokens, 1});
  const Tensor key_pos =
      (Tensor::arange(keys, DType::I64) + static_cast<double>(from)).reshape({1, keys});
  const Tensor causal = key_pos <= query_pos;
  return window > 0 ? logical_and(causal, key_pos > query_pos - static_cast<double>(window))
                    : causal;
}

// How the layers of one kind (those that see every position, or those that slide) turn their
// queries and keys, and read the cache in one forward: the cached positions from ... to - 1,
// with the mask over them.
struct LayerView {
  RopeFactors rope;
  int64_t from = 0, to = 0;
  Tensor mask;
};

// What every layer of one forward shares, made once: the view of each kind of layer.
struct StepInputs {
  LayerView global, local;  // local: only when some layer slides
};

// A kind of layer's view for the tokens at `positions` [T, 1], which broadcast over heads
// [1, T, n, head_dim]. Its RoPE factors are made once per forward and read by every layer's
// queries and keys, so that the planner computes them once into two small tables.
LayerView layer_view(const ModelConfig& c, const RopeSpec& rope, int64_t window, int64_t capacity,
                     const Tensor& positions, int64_t start, int64_t tokens) {
  LayerView v;
  v.rope = rope_factors(positions, c.head_dim, c.rope_pairs, rope.base, rope.scale, DType::F32,
                        rope.divisors);
  v.to = std::min(capacity,
                  (start + tokens + kAttentionStride - 1) / kAttentionStride * kAttentionStride);
  // A sliding layer skips the stretches that no query of the forward sees any more.
  const int64_t first_seen = window > 0 ? std::max<int64_t>(0, start - window + 1) : 0;
  v.from = first_seen / kAttentionStride * kAttentionStride;
  v.mask = attention_mask(start, tokens, v.from, v.to, window);
  return v;
}

StepInputs step_inputs(const ModelConfig& c, int64_t capacity, int64_t start, int64_t tokens) {
  std::vector<int64_t> at(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) at[static_cast<size_t>(t)] = start + t;
  const Tensor positions = Tensor::from_vector(at, {tokens, 1});
  StepInputs in;
  in.global = layer_view(c, c.rope, 0, capacity, positions, start, tokens);
  if (c.sliding_window > 0) {
    in.local = layer_view(c, c.rope_local, c.sliding_window, capacity, positions, start, tokens);
  }
  return in;
}

// h W^T, plus b when the architecture has one.
Tensor project(const Tensor& h, const Tensor& w, const Tensor& b) {
  return b.defined() ? linear(h, w, b) : linear(h, w);
}

// [1, T, n * head_dim] -> [1, T, n, head_dim].
Tensor split_heads(const Tensor& x, int64_t n, int64_t head_dim) {
  return x.reshape({1, x.shape()[1], n, head_dim});
}

// [1, T, n, head_dim] heads, RMS-normalized each when the architecture says so (qk_norm).
Tensor normalize_heads(const Tensor& x, const Tensor& weight, double eps) {
  return weight.defined() ? rms_norm(x, weight, eps) : x;
}

Tensor attention(const Model::Data& m, const LayerWeights& l, KvCache& cache, size_t layer,
                 const Tensor& h, const StepInputs& in, int64_t start) {
  const ModelConfig& c = m.config;
  const LayerView& view = c.slides(layer) ? in.local : in.global;
  const int64_t tokens = h.shape()[1];
  auto heads = [&](const Tensor& w, const Tensor& b, const Tensor& norm, int64_t n) {
    return normalize_heads(split_heads(project(h, w, b), n, c.head_dim), norm, c.norm_eps);
  };
  const Tensor q = rope(heads(l.wq, l.bq, l.q_norm, c.heads), view.rope).permute({0, 2, 1, 3});
  const Tensor k = rope(heads(l.wk, l.bk, l.k_norm, c.kv_heads), view.rope).permute({0, 2, 1, 3});
  const Tensor v = heads(l.wv, l.bv, Tensor(), c.kv_heads).permute({0, 2, 1, 3});
  cache.keys[layer] = update_slice(cache.keys[layer], k, 2, start);
  cache.values[layer] = update_slice(cache.values[layer], v, 2, start);
  const Tensor context = scaled_dot_product_attention(
      q, cache.keys[layer].slice(2, view.from, view.to),
      cache.values[layer].slice(2, view.from, view.to), view.mask, false,
      c.attention_scale);  // [1, heads, T, head_dim]
  return sum_over_shards(
      m, linear(context.permute({0, 2, 1, 3}).reshape({1, tokens, c.heads * c.head_dim}), l.wo));
}

// GELU's tanh approximation, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as ggml and
// Gemma's checkpoints compute it.
Tensor gelu_tanh(const Tensor& x) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  return x * 0.5 * (tanh((x + x * x * x * 0.044715) * kSqrt2OverPi) + 1.0);
}

// down(act(gate(h)) * up(h)).
Tensor mlp(const Model::Data& m, const LayerWeights& l, const Tensor& h) {
  const Tensor gate = linear(h, l.w_gate);
  const Tensor active = m.config.activation == Activation::kGeluTanh ? gelu_tanh(gate) : silu(gate);
  return sum_over_shards(m, linear(active * linear(h, l.w_up), l.w_down));
}

// A sublayer's output as it joins the residual stream: RMS-normalized first when the
// architecture says so (post_norms).
Tensor post_norm(const ModelConfig& c, const Tensor& out, const Tensor& weight) {
  return c.post_norms ? rms_norm(out, weight, c.norm_eps) : out;
}

}  // namespace

KvCache empty_kv_cache(const Model::Data& m, int64_t capacity) {
  KvCache cache;
  cache.capacity = capacity;
  const ModelConfig& c = m.config;
  for (int64_t i = 0; i < c.layers; ++i) {
    cache.keys.push_back(Tensor::zeros({1, c.kv_heads, capacity, c.head_dim}).eval());
    cache.values.push_back(Tensor::zeros({1, c.kv_heads, capacity, c.head_dim}).eval());
  }
  return cache;
}

Tensor llama_forward(const Model::Data& m, KvCache& cache, const std::vector<int32_t>& ids,
                     int64_t start) {
  const ModelConfig& c = m.config;
  const auto tokens = static_cast<int64_t>(ids.size());
  const StepInputs in = step_inputs(c, cache.capacity, start, tokens);
  Tensor x = embedding(m.embedding, Tensor::from_vector(ids, {1, tokens}));  // [1, T, dim]
  if (c.embedding_scale != 1.0) x = x * c.embedding_scale;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWeights& l = m.layers[i];
    const Tensor a =
        attention(m, l, cache, i, rms_norm(x, l.attention_norm, c.norm_eps), in, start);
    x = x + post_norm(c, a, l.post_attention_norm);
    x = x + post_norm(c, mlp(m, l, rms_norm(x, l.mlp_norm, c.norm_eps)), l.post_mlp_norm);
  }
  const Tensor last = x.slice(1, tokens - 1, tokens);
  return linear(rms_norm(last, m.output_norm, c.norm_eps), m.output).reshape({c.vocab});
}

}  // namespace kiln::llm
