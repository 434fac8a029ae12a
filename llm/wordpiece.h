// WordPiece as Hugging Face's tokenizers runs it for BERT and all-MiniLM-L6-v2 (a
// tokenizer.json with normalizer "BertNormalizer", pre_tokenizer "BertPreTokenizer", model
// "WordPiece" and decoder "WordPiece"), over the text between special tokens, for
// kiln::Tokenizer (llm/tokenizer.cc).
#ifndef KILN_LLM_WORDPIECE_H_
#define KILN_LLM_WORDPIECE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

// What tokenizer.json says. Without a normalizer, the four normalizer options are false.
struct WordPieceOptions {
  bool clean_text = false;            // normalizer.clean_text
  bool handle_chinese_chars = false;  // normalizer.handle_chinese_chars
  bool strip_accents = false;         // normalizer.strip_accents (null: lowercase's value)
  bool lowercase = false;             // normalizer.lowercase
  std::string prefix = "##";          // model.continuing_subword_prefix
  int64_t max_chars_per_word = 100;   // model.max_input_chars_per_word
  int32_t unknown = -1;               // model.unk_token's id
  bool cleanup = false;               // decoder.cleanup
};

// Appends the ids of `text`, a run of text between special tokens:
//  1. Normalize (BertNormalizer), code point by code point: clean_text drops NUL, U+FFFD and
//     control, format, private-use and surrogate code points (Cc Cf Co Cs) and turns
//     whitespace into ' '; handle_chinese_chars puts spaces around CJK ideographs;
//     strip_accents decomposes (NFD) and drops nonspacing marks (Mn); lowercase lowercases.
//  2. Cut into words (BertPreTokenizer): whitespace separates words, and each punctuation
//     character (\p{P} or ASCII punctuation, "$" and "+" too) is a word of its own.
//  3. Each word becomes the longest token that begins it, then the longest "##" token that
//     continues it, and so on; a word that does not split so, or of more than
//     max_chars_per_word code points, is one unknown token.
void wordpiece_encode(std::string_view text,
                      const std::unordered_map<std::string_view, int32_t>& ids,
                      const WordPieceOptions& options, std::vector<int32_t>& out);

// What the token spelled `text` adds to decoded text, as the WordPiece decoder gives it after
// the first token: a continuation ("##ing") without its prefix, any other token after a space.
// With cleanup, the decoder's replacements follow (" ." is ".", also for "?", "!" and ",").
std::string wordpiece_token_bytes(std::string_view text, const WordPieceOptions& options);

}  // namespace kiln

#endif  // KILN_LLM_WORDPIECE_H_
