// A GPT-style transformer block written against Kiln's public API only: pre-norm causal
// self-attention and a GELU MLP, each with a residual connection. Used by the
// transformer_block sample and checked against the reference evaluator by a test.
#ifndef KILN_SAMPLES_TRANSFORMER_BLOCK_H_
#define KILN_SAMPLES_TRANSFORMER_BLOCK_H_

#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/kiln.h"

namespace kiln::samples {

struct BlockWeights {
  int64_t d_model = 0;
  int64_t heads = 0;
  Tensor ln1_weight, ln1_bias;
  Tensor w_qkv, b_qkv;    // [D, 3D], [3D]: queries, keys and values side by side
  Tensor w_proj, b_proj;  // [D, D], [D]
  Tensor ln2_weight, ln2_bias;
  Tensor w_fc, b_fc;    // [D, 4D], [4D]
  Tensor w_out, b_out;  // [4D, D], [D]
};

// Small random weights from one seed (computed at once, as loaded weights would be).
inline BlockWeights random_block_weights(int64_t d_model, int64_t heads, uint64_t seed) {
  BlockWeights w;
  w.d_model = d_model;
  w.heads = heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_model));
  auto matrix = [&](int64_t rows, int64_t cols) {
    return (Tensor::randn({rows, cols}, seed++) * scale).eval();
  };
  auto vector = [&](int64_t n, double mean) {
    return (Tensor::randn({n}, seed++) * 0.02 + mean).eval();
  };
  w.ln1_weight = vector(d_model, 1.0);
  w.ln1_bias = vector(d_model, 0.0);
  w.w_qkv = matrix(d_model, 3 * d_model);
  w.b_qkv = vector(3 * d_model, 0.0);
  w.w_proj = matrix(d_model, d_model);
  w.b_proj = vector(d_model, 0.0);
  w.ln2_weight = vector(d_model, 1.0);
  w.ln2_bias = vector(d_model, 0.0);
  w.w_fc = matrix(d_model, 4 * d_model);
  w.b_fc = vector(4 * d_model, 0.0);
  w.w_out = matrix(4 * d_model, d_model);
  w.b_out = vector(d_model, 0.0);
  return w;
}

// [T, T] Bool: true where query t may attend to key s (s <= t).
inline Tensor causal_mask(int64_t t) {
  Tensor query = Tensor::arange(t, DType::I64).reshape({t, 1});
  Tensor key = Tensor::arange(t, DType::I64).reshape({1, t});
  return key <= query;
}

// Splits [B, T, D] into heads: [B, H, T, D/H].
inline Tensor split_heads(const Tensor& x, int64_t heads) {
  const std::vector<int64_t>& s = x.shape();
  return x.reshape({s[0], s[1], heads, s[2] / heads}).permute({0, 2, 1, 3});
}

// x: [B, T, D] -> [B, T, D].
inline Tensor transformer_block(const Tensor& x, const BlockWeights& w) {
  const int64_t batch = x.shape()[0], tokens = x.shape()[1], d = w.d_model;
  const int64_t head_dim = d / w.heads;

  // Causal self-attention.
  Tensor h = layer_norm(x, w.ln1_weight, w.ln1_bias);
  Tensor qkv = matmul(h, w.w_qkv) + w.b_qkv;  // [B, T, 3D]
  Tensor q = split_heads(qkv.slice(2, 0, d), w.heads);
  Tensor k = split_heads(qkv.slice(2, d, 2 * d), w.heads);
  Tensor v = split_heads(qkv.slice(2, 2 * d, 3 * d), w.heads);
  Tensor scores = matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor masked = where(causal_mask(tokens), scores,
                        Tensor::full({1}, -std::numeric_limits<double>::infinity()));
  Tensor attended = matmul(softmax(masked, -1), v);  // [B, H, T, D/H]
  Tensor merged = attended.permute({0, 2, 1, 3}).reshape({batch, tokens, d});
  Tensor x1 = x + matmul(merged, w.w_proj) + w.b_proj;

  // GELU MLP.
  Tensor h2 = layer_norm(x1, w.ln2_weight, w.ln2_bias);
  Tensor up = gelu(matmul(h2, w.w_fc) + w.b_fc);
  return x1 + matmul(up, w.w_out) + w.b_out;
}

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_TRANSFORMER_BLOCK_H_
