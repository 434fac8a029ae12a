// Text to token ids and back, from the tokenizer a GGUF file carries (tokenizer.ggml.*):
// GPT-2-style byte-level BPE, as llama.cpp runs it (tokenizer.ggml.model "gpt2").
//
//   kiln::Tokenizer tok = kiln::Tokenizer::from_gguf(kiln::load_gguf("SmolLM2.gguf"));
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n");
//   if (tok.add_bos()) ids.insert(ids.begin(), tok.bos());
//   kiln::Tokenizer::Decoder out(tok);
//   for (int32_t id : generated) std::cout << out.push(id);
//   std::cout << out.flush();
//
// Encoding runs in three steps:
//  1. Control, user-defined and unknown tokens (tokenizer.ggml.token_type 3, 4 and 2) found
//     literally in the text become their ids: the leftmost match first, the longest where
//     several start there. The text between them goes on to steps 2 and 3.
//  2. A pre-tokenizer (tokenizer.ggml.pre) cuts the text into pieces: "smollm" puts each
//     digit in a piece of its own, then applies GPT-2's regex ('s|'t|'re|'ve|'m|'ll|'d|
//     ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+); "gpt-2" applies GPT-2's regex
//     alone; "default" (also when the key is missing) is llama.cpp's fallback for unnamed
//     pre-tokenizers. Bytes that are not UTF-8 each become U+FFFD, as in llama.cpp.
//  3. Each piece's bytes are spelled with GPT-2's byte-to-character table, and BPE merges
//     adjacent symbols, lowest tokenizer.ggml.merges rank first (leftmost on ties).
//
// A Tokenizer is immutable: copies share it, and encode and decode may run on several
// threads at once. Every failure is a kiln::Error whose message starts with "[Tokenizer]".
#ifndef KILN_TOKENIZER_H_
#define KILN_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

struct GgufFile;  // kiln/io.h

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model, pre, tokens, token_type, merges, bos_token_id, eos_token_id,
  // add_bos_token}. A missing tokens or merges list, a model other than "gpt2" (SentencePiece
  // "llama" is not supported yet), an unknown pre-tokenizer, a malformed merge or one naming
  // a token the vocabulary lacks, and duplicate tokens are errors naming the key.
  static Tokenizer from_gguf(const GgufFile& file);

  // The ids of `text`, without BOS or EOS: see add_bos(). With parse_special false, control
  // and unknown tokens are plain text; user-defined tokens are still matched (as llama.cpp
  // and Hugging Face's tokenizers do).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // The bytes of the tokens, in order. Control tokens decode to their text ("<|im_end|>"),
  // so that decode(encode(text)) == text for UTF-8 text; skip them before decoding to hide
  // them (is_control). An id outside [0, vocab_size()) is an error.
  std::string decode(const std::vector<int32_t>& ids) const;

  int64_t vocab_size() const;
  int32_t bos() const;  // tokenizer.ggml.bos_token_id; -1 when absent
  int32_t eos() const;  // tokenizer.ggml.eos_token_id; -1 when absent
  // tokenizer.ggml.add_bos_token (false when absent): whether the model expects BOS before a
  // prompt. encode never adds it; the caller prepends bos().
  bool add_bos() const;
  bool is_control(int32_t id) const;  // token_type 3 (CONTROL)
  // The token as the vocabulary stores it ("Ġworld" for " world"); decode({id}) gives its bytes.
  const std::string& token_text(int32_t id) const;
  int32_t token_id(std::string_view text) const;  // the inverse of token_text; -1 when absent

  struct Impl;  // the vocabulary, merges and tables (llm/tokenizer.cc)

  // Decodes ids one at a time for streaming output. push returns only whole UTF-8 characters:
  // the leading bytes of a character that the next tokens complete (an emoji spelled by
  // several byte tokens) are held until it is whole. Bytes that cannot start or continue a
  // character pass through at once. The concatenation of every push and the final flush is
  // decode(ids).
  class Decoder {
   public:
    explicit Decoder(const Tokenizer& tokenizer);
    std::string push(int32_t id);
    std::string flush();  // the bytes still held, complete or not

   private:
    std::shared_ptr<const Impl> impl_;
    std::string held_;
  };

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln

#endif  // KILN_TOKENIZER_H_
