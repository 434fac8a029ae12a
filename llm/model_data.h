// What a loaded model is: its configuration from the GGUF metadata and its weights as the
// file stores them. Shared, read-only, by every Session of the model.
#ifndef KILN_LLM_MODEL_DATA_H_
#define KILN_LLM_MODEL_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/llm.h"
#include "kiln/nn.h"
#include "kiln/tensor.h"
#include "kiln/tokenizer.h"

namespace kiln::llm {

// The gated MLP's activation: down(act(gate(x)) * up(x)).
enum class Activation {
  kSilu,      // llama, qwen2 (SwiGLU)
  kGeluTanh,  // gemma3 (GeGLU with GELU's tanh approximation)
};

// How one layer's RoPE turns its positions: angle = position / scale * base^(-2j / head_dim).
struct RopeSpec {
  double base = 10000.0;
  double scale = 1.0;  // linear RoPE scaling's factor (rope.scaling.type "linear")
  // Llama 3's frequency factors (rope_freqs.weight): pair j's angle is divided by
  // divisors[j]. Empty: none.
  std::vector<double> divisors;
};

// The numbers a forward needs, read from `<architecture>.*` metadata keys (docs/llm.md).
struct ModelConfig {
  std::string architecture;
  // Which dims of a head RoPE turns together: GGUF's llama files pair 2i with 2i + 1 (the
  // converter permutes W_q's and W_k's rows for it); qwen2 and gemma3 keep the checkpoint's i
  // with i + head_dim / 2 (ggml's "neox" mode).
  RopePairs rope_pairs = RopePairs::Adjacent;
  Activation activation = Activation::kSilu;
  bool qkv_bias = false;    // qwen2: W_q, W_k and W_v each add a bias
  bool qk_norm = false;     // gemma3: each head's q and k are RMS-normalized before RoPE
  bool post_norms = false;  // gemma3: the attention's and the MLP's outputs are RMS-normalized
                            // before they join the residual stream
  int64_t layers = 0;
  int64_t dim = 0;       // embedding_length: the residual stream's width
  int64_t heads = 0;     // attention.head_count: query heads
  int64_t kv_heads = 0;  // attention.head_count_kv: each serves heads / kv_heads query heads
  int64_t head_dim = 0;  // attention.key_length, or dim / heads
  int64_t hidden = 0;    // feed_forward_length: the gated MLP's width
  int64_t vocab = 0;     // token_embd's rows
  int64_t context = 0;   // context_length
  double norm_eps = 1e-5;
  double embedding_scale = 1.0;  // gemma3: the embedded tokens are multiplied by sqrt(dim)
  double attention_scale = 0;    // the scores' factor: 1 / sqrt(head_dim) unless a model says
  RopeSpec rope;                 // the layers that see every position
  // Sliding-window attention (gemma3): a layer with sliding_layers[i] set lets a query see
  // only the `sliding_window` positions up to its own, and turns them with `rope_local`.
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // empty: no layer slides
  RopeSpec rope_local;

  bool slides(size_t layer) const { return layer < sliding_layers.size() && sliding_layers[layer]; }
};

// One transformer block's weights; projections are [out, in] as GGUF stores them.
struct LayerWeights {
  Tensor attention_norm, wq, wk, wv, wo;
  Tensor mlp_norm, w_gate, w_up, w_down;
  Tensor bq, bk, bv;      // undefined unless the architecture has them (qkv_bias)
  Tensor q_norm, k_norm;  // [head_dim], when qk_norm
  Tensor post_attention_norm, post_mlp_norm;  // [dim], when post_norms
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
  // Set when this process holds one rank's share of the layers of a group of two or more
  // (llm/tensor_parallel.h): the configuration's heads and MLP width are then the rank's.
  std::optional<distributed::Group> tensor_parallel;
};

// The model's tokenizer, or a kiln::Error from `caller` saying why it has none.
const Tokenizer& tokenizer_of(const Model::Data& model, const std::string& caller);

// `text` encoded as a prompt: BOS first when the model asks for it and the prompt begins the
// sequence (`at_start`).
std::vector<int32_t> prompt_ids(const Model::Data& model, std::string_view text, bool at_start,
                                const std::string& caller);

}  // namespace kiln::llm

#endif  // KILN_LLM_MODEL_DATA_H_
