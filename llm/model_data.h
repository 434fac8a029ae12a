// What a loaded model is: its configuration from the GGUF metadata and its weights as the
// file stores them. Shared, read-only, by every Session of the model.
#ifndef KILN_LLM_MODEL_DATA_H_
#define KILN_LLM_MODEL_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/llm.h"
#include "kiln/tensor.h"
#include "kiln/tokenizer.h"

namespace kiln::llm {

// Which dims of a head RoPE turns together: GGUF's llama files pair 2i with 2i + 1 (the
// converter permutes W_q and W_k's rows for it); qwen2 keeps the checkpoint's i with
// i + head_dim / 2 (ggml's "neox" mode).
enum class RopePairs { kAdjacent, kHalves };

// The numbers a forward needs, read from `<architecture>.*` metadata keys (docs/llm.md).
struct ModelConfig {
  std::string architecture;
  RopePairs rope_pairs = RopePairs::kAdjacent;
  bool qkv_bias = false;  // qwen2: W_q, W_k and W_v each add a bias
  int64_t layers = 0;
  int64_t dim = 0;       // embedding_length: the residual stream's width
  int64_t heads = 0;     // attention.head_count: query heads
  int64_t kv_heads = 0;  // attention.head_count_kv: each serves heads / kv_heads query heads
  int64_t head_dim = 0;  // dim / heads
  int64_t hidden = 0;    // feed_forward_length: the gated MLP's width
  int64_t vocab = 0;     // token_embd's rows
  int64_t context = 0;   // context_length
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
};

// One transformer block's weights; projections are [out, in] as GGUF stores them.
struct LayerWeights {
  Tensor attention_norm, wq, wk, wv, wo;
  Tensor mlp_norm, w_gate, w_up, w_down;
  Tensor bq, bk, bv;  // undefined unless the architecture has them (qkv_bias)
};

struct Model::Data {
  ModelConfig config;
  Device device;
  Tensor embedding;  // [vocab, dim]
  std::vector<LayerWeights> layers;
  Tensor output_norm;
  Tensor output;                       // [vocab, dim]: the embedding itself when the file ties them
  std::optional<Tokenizer> tokenizer;  // none when the file has none, or one Kiln cannot read
  std::string tokenizer_error;         // why there is none
  std::string chat_template;           // tokenizer.chat_template, or empty
  std::vector<int32_t> end_of_turn;    // ids that end a generated turn
};

// The model's tokenizer, or a kiln::Error from `caller` saying why it has none.
const Tokenizer& tokenizer_of(const Model::Data& model, const std::string& caller);

// `text` encoded as a prompt: BOS first when the model asks for it and the prompt begins the
// sequence (`at_start`).
std::vector<int32_t> prompt_ids(const Model::Data& model, std::string_view text, bool at_start,
                                const std::string& caller);

}  // namespace kiln::llm

#endif  // KILN_LLM_MODEL_DATA_H_
