#include "llm/model_config.h"

#include <cmath>
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
// than ignored, so that such a model never runs with the wrong arithmetic. A sliding window is
// gemma3's alone here.
void refuse_unsupported(const MetadataReader& m, const ModelConfig& c) {
  const std::string& arch = c.architecture;
  for (const char* name : {".expert_count", ".attention.sliding_window", ".attn_logit_softcapping",
                           ".final_logit_softcapping", ".rope.scaling.attn_factor"}) {
    const std::string key = arch + name;
    const GgufValue* v = m.find(key);
    if (v == nullptr) continue;
    if (key.ends_with("expert_count") && v->as_int() == 0) continue;
    if (key.ends_with("sliding_window") && arch == "gemma3") continue;
    throw Error("[llm::Model::load] metadata '" + key + "' is not supported yet");
  }
}

// The head size: attention.key_length when the file has it (gemma3's heads are wider than
// embedding_length / head_count), else embedding_length / head_count. Values must be as wide
// as keys.
int64_t read_head_size(const MetadataReader& m, const ModelConfig& c) {
  const std::string a = c.architecture + ".";
  int64_t head_dim = 0;
  if (m.find(a + "attention.key_length")) {
    head_dim = m.positive(a + "attention.key_length");
  } else if (c.dim % c.heads != 0) {
    m.fail(a + "attention.head_count", std::to_string(c.heads),
           "a divisor of embedding_length " + std::to_string(c.dim));
  } else {
    head_dim = c.dim / c.heads;
  }
  if (const GgufValue* v = m.find(a + "attention.value_length"); v && v->as_int() != head_dim) {
    m.fail(a + "attention.value_length", std::to_string(v->as_int()),
           "the key length " + std::to_string(head_dim) + " (other sizes are not supported)");
  }
  if (head_dim % 2 != 0) m.fail(a + "attention.key_length", std::to_string(head_dim), "even");
  if (const GgufValue* rope_dim = m.find(a + "rope.dimension_count");
      rope_dim && rope_dim->as_int() != head_dim) {
    m.fail(a + "rope.dimension_count", std::to_string(rope_dim->as_int()),
           "the head size " + std::to_string(head_dim) + " (partial rotation is not supported)");
  }
  return head_dim;
}

// RoPE's base and linear scaling. Other scalings (YaRN, Llama 3's frequency factors) are
// refused.
RopeSpec read_rope(const MetadataReader& m, const std::string& arch) {
  RopeSpec rope;
  rope.base = m.number(arch + ".rope.freq_base", 10000.0);
  if (!(rope.base > 0)) m.fail(arch + ".rope.freq_base", std::to_string(rope.base), "> 0");
  const GgufValue* type = m.find(arch + ".rope.scaling.type");
  const std::string kind = type ? type->as_string() : "none";
  const double factor = m.number(arch + ".rope.scaling.factor", 1.0);
  if (kind == "linear") {
    if (!(factor > 0)) m.fail(arch + ".rope.scaling.factor", std::to_string(factor), "> 0");
    rope.scale = factor;
  } else if (kind != "none" || factor != 1.0) {
    throw Error("[llm::Model::load] metadata '" + arch + ".rope.scaling.type' is '" + kind +
                "' (factor " + std::to_string(factor) +
                "): only linear RoPE scaling is supported yet");
  }
  if (const GgufValue* old = m.find(arch + ".rope.scale_linear")) {
    if (!(old->as_double() > 0))
      m.fail(arch + ".rope.scale_linear", std::to_string(old->as_double()), "> 0");
    rope.scale = old->as_double();
  }
  return rope;
}

// Which layers of a gemma3 model slide: attention.sliding_window_pattern when the file has
// it (a period n, where every n-th layer sees everything, or one bool per layer), else every
// sixth layer sees everything, as Gemma 3 was trained (llama.cpp's rule for files without the
// key). Local layers turn with rope.freq_base_swa, 10000 by default, unscaled.
void read_sliding_window(const MetadataReader& m, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  c.sliding_window = m.positive(a + "attention.sliding_window");
  c.sliding_layers.assign(static_cast<size_t>(c.layers), false);
  const GgufValue* pattern = m.find(a + "attention.sliding_window_pattern");
  if (pattern != nullptr && pattern->type() == GgufValue::Type::kArray) {
    const auto& flags = pattern->as_array();
    if (static_cast<int64_t>(flags.size()) != c.layers) {
      m.fail(a + "attention.sliding_window_pattern", std::to_string(flags.size()) + " flags",
             "one per layer (" + std::to_string(c.layers) + ")");
    }
    for (size_t i = 0; i < flags.size(); ++i) c.sliding_layers[i] = flags[i].as_bool();
  } else {
    const int64_t period = pattern ? m.positive(a + "attention.sliding_window_pattern") : 6;
    for (int64_t i = 0; i < c.layers; ++i) {
      c.sliding_layers[static_cast<size_t>(i)] = i % period < period - 1;
    }
  }
  c.rope_local.base = m.number(a + "rope.freq_base_swa", 10000.0);
  if (!(c.rope_local.base > 0))
    m.fail(a + "rope.freq_base_swa", std::to_string(c.rope_local.base), "> 0");
}

// What sets an architecture apart from llama (llama.cpp's LLM_ARCH_QWEN2 and LLM_ARCH_GEMMA3
// graphs): qwen2 has biases on the q, k and v projections and turns the halves of a head;
// gemma3 scales the embedding by sqrt(dim), normalizes q and k per head and the sublayers'
// outputs, gates its MLP with GELU, and slides most layers' attention.
void set_architecture_traits(ModelConfig& c) {
  if (c.architecture == "qwen2") {
    c.rope_pairs = RopePairs::Halves;
    c.qkv_bias = true;
  } else if (c.architecture == "gemma3") {
    c.rope_pairs = RopePairs::Halves;
    c.activation = Activation::kGeluTanh;
    c.qk_norm = true;
    c.post_norms = true;
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
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "gemma3") {
    throw Error("[llm::Model::load] " + path + ": architecture '" + c.architecture +
                "' is not supported (supported: llama, qwen2, gemma3)");
  }
  set_architecture_traits(c);
  const std::string a = c.architecture + ".";
  refuse_unsupported(m, c);
  c.layers = m.positive(a + "block_count");
  c.dim = m.positive(a + "embedding_length");
  c.heads = m.positive(a + "attention.head_count");
  c.kv_heads =
      m.find(a + "attention.head_count_kv") ? m.positive(a + "attention.head_count_kv") : c.heads;
  c.hidden = m.positive(a + "feed_forward_length");
  c.context = m.positive(a + "context_length");
  if (c.heads % c.kv_heads != 0) {
    m.fail(a + "attention.head_count_kv", std::to_string(c.kv_heads),
           "a divisor of head_count " + std::to_string(c.heads));
  }
  c.head_dim = read_head_size(m, c);
  c.rope = read_rope(m, c.architecture);
  c.norm_eps = m.number(a + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.norm_eps >= 0))
    m.fail(a + "attention.layer_norm_rms_epsilon", std::to_string(c.norm_eps), ">= 0");
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (c.architecture == "gemma3") {
    c.embedding_scale = std::sqrt(static_cast<double>(c.dim));
    read_sliding_window(m, c);
    // Gemma 3 27B (62 layers) scales its scores by its query_pre_attn_scalar, dim / heads,
    // which no GGUF key carries; llama.cpp keys the rule on the layer count too.
    if (c.layers == 62) {
      c.attention_scale =
          1.0 / std::sqrt(static_cast<double>(c.dim) / static_cast<double>(c.heads));
    }
  }
  if (const GgufValue* scale = m.find(a + "attention.scale"))
    c.attention_scale = scale->as_double();
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
  const int64_t vocab = d.config.vocab, dim = c.dim, q = c.heads * c.head_dim,
                kv = c.kv_heads * c.head_dim;
  d.embedding = take("token_embd.weight", {vocab, dim});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    l.attention_norm = take(p + "attn_norm.weight", {dim});
    l.wq = take(p + "attn_q.weight", {q, dim});
    l.wk = take(p + "attn_k.weight", {kv, dim});
    l.wv = take(p + "attn_v.weight", {kv, dim});
    l.wo = take(p + "attn_output.weight", {dim, q});
    l.mlp_norm = take(p + "ffn_norm.weight", {dim});
    l.w_gate = take(p + "ffn_gate.weight", {c.hidden, dim});
    l.w_up = take(p + "ffn_up.weight", {c.hidden, dim});
    l.w_down = take(p + "ffn_down.weight", {dim, c.hidden});
    if (c.qkv_bias) {
      l.bq = take(p + "attn_q.bias", {q});
      l.bk = take(p + "attn_k.bias", {kv});
      l.bv = take(p + "attn_v.bias", {kv});
    }
    if (c.qk_norm) {
      l.q_norm = take(p + "attn_q_norm.weight", {c.head_dim});
      l.k_norm = take(p + "attn_k_norm.weight", {c.head_dim});
    }
    if (c.post_norms) {
      l.post_attention_norm = take(p + "post_attention_norm.weight", {dim});
      l.post_mlp_norm = take(p + "post_ffw_norm.weight", {dim});
    }
    d.layers.push_back(std::move(l));
  }
  d.output_norm = take("output_norm.weight", {dim});
  // Llama 3.1 and 3.2's RoPE scaling comes as one factor per pair of a head (llama.cpp's
  // converter computes them from the checkpoint's rope_scaling): it divides the layers'
  // angles.
  if (c.architecture == "llama" && file.tensors.count("rope_freqs.weight")) {
    for (float f :
         take("rope_freqs.weight", {c.head_dim / 2}).astype(DType::F32).to_vector<float>()) {
      if (!(f > 0)) {
        throw Error("[llm::Model::load] " + path + ": tensor 'rope_freqs.weight' holds " +
                    std::to_string(f) + ", expected factors > 0");
      }
      d.config.rope.divisors.push_back(f);
    }
  }
  d.output =
      file.tensors.count("output.weight") ? take("output.weight", {vocab, dim}) : d.embedding;
  for (const auto& [name, tensor] : file.tensors) {
    if (!used.count(name)) refuse_unused_tensor(path, name, c.architecture);
  }
  return d;
}

}  // namespace kiln::llm
