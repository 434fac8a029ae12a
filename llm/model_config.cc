#include "llm/model_config.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::llm {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Reads `<architecture>.<name>` (or a general key) from the metadata.
class MetadataReader {
 public:
  MetadataReader(const GgufFile& file, const std::string& path) : file_(file), path_(path) {}

  const GgufValue* find(const std::string& key) const {
    auto it = file_.metadata.find(key);
    return it == file_.metadata.end() ? nullptr : &it->second;
  }
  const GgufValue& need(const std::string& key) const {
    if (const GgufValue* v = find(key)) return *v;
    throw Error("[llm::Model::load] " + path_ + ": the metadata has no '" + key + "'");
  }
  int64_t positive(const std::string& key) const {
    const int64_t v = need(key).as_int();
    if (v <= 0) fail(key, std::to_string(v), "a positive integer");
    return v;
  }
  double number(const std::string& key, double fallback) const {
    const GgufValue* v = find(key);
    return v ? v->as_double() : fallback;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& value,
                         const std::string& expected) const {
    throw Error("[llm::Model::load] " + path_ + ": '" + key + "' is " + value + ", expected " +
                expected);
  }

 private:
  const GgufFile& file_;
  const std::string& path_;
};

// Keys that change the forward in ways Kiln does not implement yet: refused by name rather
// than ignored, so that such a model never runs with the wrong arithmetic.
void refuse_unsupported(const MetadataReader& m, const std::string& arch) {
  for (const char* name : {".rope.scaling.type", ".rope.scaling.factor", ".expert_count",
                           ".attention.sliding_window"}) {
    const std::string key = arch + name;
    const GgufValue* v = m.find(key);
    if (v == nullptr) continue;
    if (key.ends_with("scaling.type") && v->as_string() == "none") continue;
    if (key.ends_with("scaling.factor") && v->as_double() == 1.0) continue;
    if (key.ends_with("expert_count") && v->as_int() == 0) continue;
    throw Error("[llm::Model::load] metadata '" + key + "' is not supported yet");
  }
}

// Key and value sizes other than the head size (embedding_length / head_count): converters
// write them whenever a checkpoint names its head size, most often equal to it.
void check_head_sizes(const MetadataReader& m, const std::string& arch, int64_t head_dim) {
  for (const char* name : {".attention.key_length", ".attention.value_length"}) {
    const GgufValue* v = m.find(arch + name);
    if (v != nullptr && v->as_int() != head_dim) {
      m.fail(arch + name, std::to_string(v->as_int()),
             "the head size " + std::to_string(head_dim) + " (other sizes are not supported)");
    }
  }
}

// A tensor the forward would not read (a bias, RoPE frequency factors, an expert): refused,
// since running without it would give wrong logits.
[[noreturn]] void refuse_unused_tensor(const std::string& path, const std::string& name,
                                       const std::string& architecture) {
  throw Error("[llm::Model::load] " + path + ": tensor '" + name + "' is not used by the " +
              architecture + " architecture as Kiln implements it (not supported)");
}

}  // namespace

ModelConfig read_config(const GgufFile& file, const std::string& path) {
  const MetadataReader m(file, path);
  ModelConfig c;
  c.architecture = m.need("general.architecture").as_string();
  if (c.architecture != "llama" && c.architecture != "qwen2") {
    throw Error("[llm::Model::load] " + path + ": architecture '" + c.architecture +
                "' is not supported (supported: llama, qwen2)");
  }
  // What sets qwen2 apart from llama: biases on the q, k and v projections, and RoPE on the
  // halves of a head (llama.cpp's LLM_ARCH_QWEN2 graph).
  if (c.architecture == "qwen2") {
    c.rope_pairs = RopePairs::kHalves;
    c.qkv_bias = true;
  }
  const std::string a = c.architecture + ".";
  refuse_unsupported(m, c.architecture);
  c.layers = m.positive(a + "block_count");
  c.dim = m.positive(a + "embedding_length");
  c.heads = m.positive(a + "attention.head_count");
  c.kv_heads =
      m.find(a + "attention.head_count_kv") ? m.positive(a + "attention.head_count_kv") : c.heads;
  c.hidden = m.positive(a + "feed_forward_length");
  c.context = m.positive(a + "context_length");
  if (c.dim % c.heads != 0) {
    m.fail(a + "attention.head_count", std::to_string(c.heads),
           "a divisor of embedding_length " + std::to_string(c.dim));
  }
  if (c.heads % c.kv_heads != 0) {
    m.fail(a + "attention.head_count_kv", std::to_string(c.kv_heads),
           "a divisor of head_count " + std::to_string(c.heads));
  }
  c.head_dim = c.dim / c.heads;
  check_head_sizes(m, c.architecture, c.head_dim);
  if (c.head_dim % 2 != 0)
    m.fail(a + "embedding_length", std::to_string(c.dim), "an even head size");
  if (const GgufValue* rope_dim = m.find(a + "rope.dimension_count");
      rope_dim && rope_dim->as_int() != c.head_dim) {
    m.fail(a + "rope.dimension_count", std::to_string(rope_dim->as_int()),
           "the head size " + std::to_string(c.head_dim) + " (partial rotation is not supported)");
  }
  c.rope_base = m.number(a + "rope.freq_base", 10000.0);
  c.norm_eps = m.number(a + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.rope_base > 0)) m.fail(a + "rope.freq_base", std::to_string(c.rope_base), "> 0");
  if (!(c.norm_eps >= 0))
    m.fail(a + "attention.layer_norm_rms_epsilon", std::to_string(c.norm_eps), ">= 0");
  return c;
}

Model::Data read_weights(GgufFile& file, const ModelConfig& c, const std::string& path) {
  std::set<std::string> used;
  auto take = [&](const std::string& name, const std::vector<int64_t>& shape) -> Tensor {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      throw Error("[llm::Model::load] " + path + ": tensor '" + name + "' is missing (expected " +
                  shape_text(shape) + ")");
    }
    if (it->second.shape() != shape) {
      throw Error("[llm::Model::load] " + path + ": tensor '" + name + "' has shape " +
                  shape_text(it->second.shape()) + ", expected " + shape_text(shape));
    }
    used.insert(name);
    return it->second;
  };
  Model::Data d;
  d.config = c;
  const Tensor& embd =
      file.tensors.count("token_embd.weight") ? file.tensors.at("token_embd.weight") : Tensor();
  d.config.vocab = embd.defined() && embd.shape().size() == 2 ? embd.shape()[0] : 1;
  const int64_t vocab = d.config.vocab, dim = c.dim, kv = c.kv_heads * c.head_dim;
  d.embedding = take("token_embd.weight", {vocab, dim});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.attention_norm = take(p + "attn_norm.weight", {dim});
    l.wq = take(p + "attn_q.weight", {dim, dim});
    l.wk = take(p + "attn_k.weight", {kv, dim});
    l.wv = take(p + "attn_v.weight", {kv, dim});
    l.wo = take(p + "attn_output.weight", {dim, dim});
    l.mlp_norm = take(p + "ffn_norm.weight", {dim});
    l.w_gate = take(p + "ffn_gate.weight", {c.hidden, dim});
    l.w_up = take(p + "ffn_up.weight", {c.hidden, dim});
    l.w_down = take(p + "ffn_down.weight", {dim, c.hidden});
    if (c.qkv_bias) {
      l.bq = take(p + "attn_q.bias", {dim});
      l.bk = take(p + "attn_k.bias", {kv});
      l.bv = take(p + "attn_v.bias", {kv});
    }
    d.layers.push_back(std::move(l));
  }
  d.output_norm = take("output_norm.weight", {dim});
  d.output =
      file.tensors.count("output.weight") ? take("output.weight", {vocab, dim}) : d.embedding;
  for (const auto& [name, tensor] : file.tensors) {
    if (!used.count(name)) refuse_unused_tensor(path, name, c.architecture);
  }
  return d;
}

}  // namespace kiln::llm
