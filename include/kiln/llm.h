// Running language models from GGUF files: kiln::llm (library target kiln::llm).
//
//   kiln::llm::Model model = kiln::llm::Model::load("SmolLM2-135M-Instruct.Q4_1.gguf");
//   kiln::llm::Session session(model, 512);
//   kiln::Tensor logits = session.prefill({1, 504, 3458});  // F32 [vocab]
//   int32_t next = session.sample(logits, {});                // greedy
//   logits = session.step(next);
//
// The model is built from the file's metadata alone (docs/llm.md lists the keys); its
// weights stay as the file stores them (block-quantized weights are multiplied in place,
// docs/quantization.md) and are shared by every Session made from it.
#ifndef KILN_LLM_H_
#define KILN_LLM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/tensor.h"
#include "kiln/tokenizer.h"

namespace kiln::llm {

// How Session::sample picks a token. temperature 0 is greedy (the first of the largest
// logits); otherwise the repeat penalty, then top-k, then top-p (the smallest set of most
// likely tokens whose probabilities reach top_p) shape the distribution that a draw seeded by
// `seed` samples from. The same seed and the same logits give the same tokens.
struct Sampling {
  double temperature = 0;
  int top_k = 0;  // 0: every token
  double top_p = 1;
  double repeat_penalty = 1;  // as llama.cpp: a seen token's logit / penalty (* when negative)
  uint64_t seed = 0;
};

class Model {
 public:
  // Reads the GGUF file (mapped, not copied). An architecture, tensor or metadata key that is
  // missing or unsupported is a kiln::Error naming it; so is a device other than the CPU, for
  // now. A tokenizer Kiln cannot read leaves the model usable with token ids (tokenizer()
  // then says why).
  static Model load(const std::string& gguf_path, Device device = default_device());
  // This rank's share of the model for tensor parallelism over `group` (Megatron-LM style,
  // docs/llm.md): the rank keeps its heads' rows of W_q, W_k, W_v and their columns of W_o,
  // its MLP features' rows of W_gate, W_up and their columns of W_down, copied (the rest
  // of the file is never read; block-quantized columns of W_o and W_down are decoded to
  // f32); one all_reduce per attention and one per MLP sums the ranks' parts. Every rank of
  // the group loads the same file and runs the same Session calls with the same ids, and
  // every rank gets the whole logits. A group size that does not divide the key/value heads
  // or the MLP width is a kiln::Error.
  static Model load(const std::string& gguf_path, const distributed::Group& tensor_parallel,
                    Device device = default_device());

  std::string architecture() const;  // general.architecture: "llama", "qwen2" or "gemma3"
  int64_t vocab_size() const;
  int64_t context_length() const;  // the positions the model was trained for
  // The file's tokenizer (tokenizer.ggml.*); a kiln::Error when the file has none, or one
  // Kiln cannot read (tokenizer.ggml.model other than "gpt2" and "llama").
  const Tokenizer& tokenizer() const;
  // `text` encoded as a prompt: BOS first when the model asks for it
  // (tokenizer.ggml.add_bos_token) and the prompt begins the sequence (`at_start`), as
  // Session::generate encodes its prompt.
  std::vector<int32_t> prompt_ids(std::string_view text, bool at_start = true) const;
  // One user message in the model's chat template (tokenizer.chat_template), the assistant's
  // turn opened: ChatML templates (<|im_start|>) are recognized, with the default system
  // message the template writes when none is given, and Gemma's (<start_of_turn>), which has
  // no system turn. Another template, or none, is a kiln::Error. A later turn of the same
  // conversation (first_turn false) closes the assistant's answer, whose end-of-turn token generate
  // does not run, and has no system turn.
  std::string chat_prompt(std::string_view user_message, bool first_turn = true) const;

  struct Data;  // the configuration and the weights (llm/model_data.h)

 private:
  friend class Session;
  explicit Model(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  std::shared_ptr<const Data> data_;
};

// One sequence and its KV cache. Sessions of one model share its weights; each Session is
// used by one thread at a time, and Sessions may run on different threads at once.
class Session {
 public:
  // A KV cache of max_tokens positions (0: the model's context length).
  explicit Session(const Model& model, int64_t max_tokens = 0);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs ids at positions position() ... position() + ids.size() - 1, writing their keys and
  // values into the cache; the F32 logits [vocab] of the last one. An id outside the
  // vocabulary, or positions past max_tokens, are a kiln::Error that leaves the Session as it
  // was; a failure while computing leaves it reset.
  Tensor prefill(const std::vector<int32_t>& ids);
  Tensor step(int32_t id);  // prefill({id})
  // Picks a token from logits [vocab] (the repeat penalty looks at every id run so far).
  int32_t sample(const Tensor& logits, const Sampling& s);

  // Encodes prompt (BOS first when the model asks for it and the cache is empty), prefills
  // it, then samples and runs up to max_new_tokens tokens. It stops early at an end-of-turn
  // token (the tokenizer's EOS, <|im_end|>, <|eot_id|>, <end_of_turn>, <|endoftext|>),
  // when on_piece returns false, or when the cache is full. on_piece gets the text as it
  // comes, in whole UTF-8 characters; the result is all of it. End-of-turn tokens are not
  // part of the text. The last token sampled is not run: the cache ends before it, so a
  // later step(last) or generate continues from there.
  std::string generate(std::string_view prompt, int max_new_tokens, const Sampling& s,
                       const std::function<bool(std::string_view piece)>& on_piece = {});
  // What the last generate did: its prompt's tokens and prefill time, then the tokens it
  // sampled and the time from the first sample to the last.
  struct Generation {
    int64_t prompt_tokens = 0, new_tokens = 0;
    double prefill_seconds = 0, decode_seconds = 0;
  };
  Generation last_generation() const;

  int64_t position() const;  // tokens in the cache
  int64_t max_tokens() const;
  void reset();  // an empty cache, as a new Session

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::llm

#endif  // KILN_LLM_H_
