#include "samples/random_llama.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "kiln/kiln.h"

namespace kiln::samples {

GgufFile random_llama_gguf(const RandomLlamaShape& s, uint64_t seed) {
  GgufFile f;
  auto u32 = [](int64_t v) { return GgufValue::integer(GgufValue::Type::kU32, v); };
  f.metadata["general.architecture"] = GgufValue::string("llama");
  f.metadata["llama.block_count"] = u32(s.layers);
  f.metadata["llama.embedding_length"] = u32(s.dim);
  f.metadata["llama.attention.head_count"] = u32(s.heads);
  f.metadata["llama.attention.head_count_kv"] = u32(s.kv_heads);
  f.metadata["llama.feed_forward_length"] = u32(s.hidden);
  f.metadata["llama.context_length"] = u32(s.context);
  f.metadata["llama.rope.dimension_count"] = u32(s.dim / s.heads);
  f.metadata["llama.rope.freq_base"] = GgufValue::floating(GgufValue::Type::kF32, 10000.0);
  f.metadata["llama.attention.layer_norm_rms_epsilon"] =
      GgufValue::floating(GgufValue::Type::kF32, 1e-5);
  // Scaled by 1 / sqrt(in) so that activations keep their size through the layers.
  auto matrix = [&](int64_t out, int64_t in) {
    return (Tensor::randn({out, in}, seed++) * (1.0 / std::sqrt(static_cast<double>(in))))
        .astype(s.matrices)
        .eval();
  };
  auto norm = [&] { return (Tensor::randn({s.dim}, seed++) * 0.05 + 1.0).eval(); };
  const int64_t kv = s.kv_heads * (s.dim / s.heads);
  f.tensors["token_embd.weight"] = Tensor::randn({s.vocab, s.dim}, seed++).eval();
  f.tensors["output_norm.weight"] = norm();
  f.tensors["output.weight"] = matrix(s.vocab, s.dim);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    f.tensors[p + "attn_norm.weight"] = norm();
    f.tensors[p + "attn_q.weight"] = matrix(s.dim, s.dim);
    f.tensors[p + "attn_k.weight"] = matrix(kv, s.dim);
    f.tensors[p + "attn_v.weight"] = matrix(kv, s.dim);
    f.tensors[p + "attn_output.weight"] = matrix(s.dim, s.dim);
    f.tensors[p + "ffn_norm.weight"] = norm();
    f.tensors[p + "ffn_gate.weight"] = matrix(s.hidden, s.dim);
    f.tensors[p + "ffn_up.weight"] = matrix(s.hidden, s.dim);
    f.tensors[p + "ffn_down.weight"] = matrix(s.dim, s.hidden);
  }
  return f;
}

llm::Model load_random_llama(const RandomLlamaShape& shape, uint64_t seed) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_random_llama_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  save_gguf(path, random_llama_gguf(shape, seed));
  llm::Model model = llm::Model::load(path);
  std::filesystem::remove(path);
  return model;
}

}  // namespace kiln::samples
