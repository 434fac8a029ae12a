#include "samples/minilm.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "nlohmann/json.hpp"

namespace kiln::samples {
namespace {

// "[2, 64]".
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// [batch, tokens, hidden] -> [batch, heads, tokens, hidden / heads].
Tensor split_heads(const Tensor& x, int64_t heads) {
  const std::vector<int64_t>& s = x.shape();
  return x.reshape({s[0], s[1], heads, s[2] / heads}).permute({0, 2, 1, 3});
}

// One BERT layer: self-attention then the feed-forward, each with a residual and a norm.
Tensor bert_layer(const MiniLM& m, const std::string& at, const Tensor& x, const Tensor& key_bias) {
  auto w = [&](const std::string& name) { return m.w(at + name); };
  const std::vector<int64_t>& s = x.shape();
  const Tensor q = split_heads(
      linear(x, w("attention.self.query.weight"), w("attention.self.query.bias")), m.heads);
  const Tensor k =
      split_heads(linear(x, w("attention.self.key.weight"), w("attention.self.key.bias")), m.heads);
  const Tensor v = split_heads(
      linear(x, w("attention.self.value.weight"), w("attention.self.value.bias")), m.heads);
  const int64_t head_dim = m.hidden / m.heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const Tensor p = softmax(matmul(q, k.transpose(2, 3)) * scale + key_bias, -1);
  const Tensor context = matmul(p, v).permute({0, 2, 1, 3}).reshape(s);
  const Tensor attended =
      linear(context, w("attention.output.dense.weight"), w("attention.output.dense.bias"));
  const Tensor h = layer_norm(attended + x, w("attention.output.LayerNorm.weight"),
                              w("attention.output.LayerNorm.bias"), m.eps);
  const Tensor up = gelu(linear(h, w("intermediate.dense.weight"), w("intermediate.dense.bias")));
  const Tensor down = linear(up, w("output.dense.weight"), w("output.dense.bias"));
  return layer_norm(down + h, w("output.LayerNorm.weight"), w("output.LayerNorm.bias"), m.eps);
}

}  // namespace

const Tensor& MiniLM::w(const std::string& name) const {
  const auto it = weights.find(name);
  if (it == weights.end()) throw Error("all-MiniLM-L6-v2: the weights have no '" + name + "'");
  return it->second;
}

MiniLM load_minilm(const std::string& dir) {
  std::ifstream config_file(dir + "/config.json");
  if (!config_file) throw Error("cannot read " + dir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file, nullptr, false);
  if (config.is_discarded() || !config.contains("num_hidden_layers")) {
    throw Error(dir + "/config.json is not a BERT config");
  }
  MiniLM m;
  m.layers = config.value("num_hidden_layers", 0);
  m.hidden = config.value("hidden_size", 0);
  m.heads = config.value("num_attention_heads", 1);
  m.eps = config.value("layer_norm_eps", 1e-12);
  m.weights = load_safetensors(dir + "/model.safetensors");
  return m;
}

MiniLM quantize_linear_weights(MiniLM m, DType format) {
  for (auto& [name, w] : m.weights) {
    const bool encoder = name.rfind("encoder.layer.", 0) == 0;
    const bool dense_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
                              w.ndim() == 2 && name.find("LayerNorm") == std::string::npos;
    if (encoder && dense_weight) w = w.astype(format);
  }
  return m;
}

Tensor embed_tokens(const MiniLM& m, const Tensor& ids) {
  const Tensor positions = Tensor::arange(ids.shape()[1], DType::I64);
  const Tensor x =
      embedding(m.w("embeddings.word_embeddings.weight"), ids) +
      embedding(m.w("embeddings.position_embeddings.weight"), positions) +
      take(m.w("embeddings.token_type_embeddings.weight"), Tensor::zeros({}, DType::I64), 0);
  return layer_norm(x, m.w("embeddings.LayerNorm.weight"), m.w("embeddings.LayerNorm.bias"), m.eps);
}

PaddedRows pad_rows(const std::vector<std::vector<int64_t>>& rows) {
  size_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.size());
  std::vector<int64_t> flat(rows.size() * longest, 0);
  std::vector<float> keep(rows.size() * longest, 0.0f);
  for (size_t b = 0; b < rows.size(); ++b) {
    std::copy(rows[b].begin(), rows[b].end(), flat.begin() + b * longest);
    std::fill_n(keep.begin() + b * longest, rows[b].size(), 1.0f);
  }
  const std::vector<int64_t> shape{static_cast<int64_t>(rows.size()),
                                   static_cast<int64_t>(longest)};
  return {Tensor::from_vector(flat, shape), Tensor::from_vector(keep, shape)};
}

Tensor embed_sentences(const MiniLM& m, const std::vector<std::vector<int64_t>>& rows) {
  const PaddedRows padded = pad_rows(rows);
  return embed_padded(m, padded.ids, padded.mask);
}

Compiled compile_embed_padded(const MiniLM& model) {
  return compile([&model](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{embed_padded(model, in[0], in[1])};
  });
}

Tensor embed_padded(const MiniLM& m, const Tensor& ids, const Tensor& mask) {
  if (ids.shape().size() != 2 || ids.shape() != mask.shape()) {
    throw Error("all-MiniLM-L6-v2: ids " + shape_text(ids.shape()) + " and mask " +
                shape_text(mask.shape()) + " must be [sentences, tokens], the same shape");
  }
  const int64_t tokens = ids.shape()[1];
  Tensor x = embed_tokens(m, ids);
  // Padding keys get -1e9 before the softmax: exp underflows to exactly 0 for them.
  const Tensor key_bias = ((mask - 1.0f) * 1e9f).reshape({ids.shape()[0], 1, 1, tokens});
  for (int64_t l = 0; l < m.layers; ++l) {
    x = bert_layer(m, "encoder.layer." + std::to_string(l) + ".", x, key_bias);
  }
  // Mean over the real tokens, then unit length.
  const Tensor pooled = sum(x * mask.unsqueeze(2), {1}) / sum(mask, {1}, true);
  return pooled / sqrt(sum(square(pooled), {1}, true));
}

}  // namespace kiln::samples
