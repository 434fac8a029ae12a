// SentencePiece-style BPE (tokenizer.ggml.model "llama": TinyLlama, Llama 2, Mistral, Gemma)
// over the text between special tokens, for kiln::Tokenizer (llm/tokenizer.cc). The rules are
// llama.cpp's llm_tokenizer_spm, which are the sentencepiece library's BPE encoder.
#ifndef KILN_LLM_SPM_TOKENIZER_H_
#define KILN_LLM_SPM_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
inline constexpr int32_t kNormalType = 1, kUnknownType = 2, kControlType = 3, kUserDefinedType = 4,
                         kUnusedType = 5, kByteType = 6;

// SentencePiece's space, U+2581 "▁": tokens spell " world" as "▁world".
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// What the encoder reads of a vocabulary, which the Tokenizer owns.
struct SpmVocab {
  const std::unordered_map<std::string_view, int32_t>& ids;  // every token by its text
  const std::vector<int32_t>& types;                         // tokenizer.ggml.token_type
  const std::vector<float>& scores;                          // tokenizer.ggml.scores
  const std::array<int32_t, 256>& byte_tokens;               // "<0xXX>" by byte, or -1
  int32_t unknown;        // for text with neither a token nor byte tokens; -1 when none
  bool add_space_prefix;  // tokenizer.ggml.add_space_prefix
};

// Appends the ids of `text`, a non-empty run of text between special tokens:
//  1. With add_space_prefix, a space goes in front; then every space becomes "▁".
//  2. Each UTF-8 character is a symbol. The adjacent pair whose concatenation is the token of
//     the highest score merges (the leftmost of equal ones), until no pair is a token.
//  3. Each symbol is its token. A character the vocabulary lacks is its bytes' tokens "<0xXX>"
//     (byte fallback) or, in a vocabulary without them, the unknown token, one for each run.
// As in sentencepiece, merges only make normal, user-defined and unused tokens, so that no text
// turns into a control token, and a symbol merged into an unused token is given as the two
// symbols it was made of.
void spm_encode(std::string_view text, const SpmVocab& vocab, std::vector<int32_t>& out);

}  // namespace kiln

#endif  // KILN_LLM_SPM_TOKENIZER_H_
