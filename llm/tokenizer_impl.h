// What a kiln::Tokenizer holds, shared by its readers: from_gguf (llm/tokenizer.cc) and
// from_tokenizer_json (llm/tokenizer_json.cc) fill a Tokenizer::Impl, and llm/tokenizer.cc
// encodes and decodes with it.
#ifndef KILN_LLM_TOKENIZER_IMPL_H_
#define KILN_LLM_TOKENIZER_IMPL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/tokenizer.h"
#include "llm/spm_tokenizer.h"
#include "llm/wordpiece.h"

namespace kiln {

// GPT-2's byte-level BPE, SentencePiece's BPE, or BERT's WordPiece.
enum class TokenizerModel { kGpt2, kSpm, kWordPiece };

// How byte-level BPE cuts text into pieces before merging (tokenizer.ggml.pre): "smollm"
// (every digit alone, then GPT-2's regex), "gpt-2" (GPT-2's regex), llama.cpp's "default",
// "llama-bpe" (Llama 3's regex: digits in threes) or "qwen2" (the same, every digit alone).
enum class PreTokenizer { kSmolLM, kGpt2, kDefault, kLlama3, kQwen2 };

struct Tokenizer::Impl {
  struct Merge {
    int32_t rank;
    int32_t id;  // of the merged token; -1 when the vocabulary lacks it
  };

  TokenizerModel model = TokenizerModel::kGpt2;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;                         // tokenizer.ggml.token_type's values
  std::vector<float> scores;                          // SentencePiece's merge priorities
  std::vector<std::string> bytes;                     // what each token decodes to
  std::unordered_map<std::string_view, int32_t> ids;  // views of `tokens`, which never moves
  std::array<int32_t, 256> byte_token{};              // the token spelling each byte alone, or -1
  std::unordered_map<uint64_t, Merge> merges;         // by (left id, right id)
  std::array<std::vector<int32_t>, 256> specials;     // by first byte, longest first
  PreTokenizer pre = PreTokenizer::kDefault;
  WordPieceOptions wordpiece;  // WordPiece only
  int32_t bos = -1, eos = -1, unknown = -1;
  bool add_bos = false;
  bool add_space_prefix = false;  // SentencePiece only
  bool ignore_merges = false;     // byte-level BPE: a piece that is a token is that token

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // The token types encode matches in the text before anything else.
  static bool is_special(int32_t type) {
    return type == kControlType || type == kUserDefinedType || type == kUnknownType;
  }

  void check_id(int32_t id, const char* what) const;
  // The special token that starts at text[i] (the longest of those that do), or -1.
  int32_t special_at(std::string_view text, size_t i, bool parse_special) const;
  void append_bytes(int32_t id, bool& run_start, std::string& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
};

// Throws kiln::Error("[Tokenizer] " + message).
[[noreturn]] void tokenizer_error(const std::string& message);

// Fills t.ids from t.tokens; a text at two ids is an error naming `key`.
void index_ids(Tokenizer::Impl& t, const std::string& key);

// Merge `left right` of rank `rank`, both tokens; `where` names it in errors.
void add_merge(Tokenizer::Impl& t, int32_t rank, std::string_view left, std::string_view right,
               const std::string& where);

// Fills t.bytes, t.byte_token and t.specials from the tokens, their types and the model.
void index_tokens(Tokenizer::Impl& t);

}  // namespace kiln

#endif  // KILN_LLM_TOKENIZER_IMPL_H_
