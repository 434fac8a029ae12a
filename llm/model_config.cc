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
                           ".attention.sliding_window", ".attention.key_length"}) {
    const std::string key = arch + name;
    const GgufValue* v = m.find(key);
    if (v == nullptr) continue;
    if (key.ends_with("scaling.type") && v->as_string() == "none") continue;
    if (key.ends_with("scaling.factor") && v->as_double() == 1.0) continue;
    if (key.ends_with("expert_count") && v->as_int() == 0) continue;
    throw Error("[llm::Model::load] metadata '" + key + "' is not supported yet");
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
  if (c.architecture != "llama") {
    throw Error("[llm::Model::load] " + path + ": architecture '" + c.architecture +
                "' is not supported (supported: llama)");
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
    d.layers.push_back(
        {take(p + "attn_norm.weight", {dim}), take(p + "attn_q.weight", {dim, dim}),
         take(p + "attn_k.weight", {kv, dim}), take(p + "attn_v.weight", {kv, dim}),
         take(p + "attn_output.weight", {dim, dim}), take(p + "ffn_norm.weight", {dim}),
         take(p + "ffn_gate.weight", {c.hidden, dim}), take(p + "ffn_up.weight", {c.hidden, dim}),
         take(p + "ffn_down.weight", {dim, c.hidden})});
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
