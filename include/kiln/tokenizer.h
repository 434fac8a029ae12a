// Text to token ids and back, from the tokenizer a GGUF file carries (tokenizer.ggml.*), as
// llama.cpp runs it: GPT-2-style byte-level BPE (tokenizer.ggml.model "gpt2": SmolLM2) or
// SentencePiece-style BPE with byte fallback ("llama": TinyLlama, Llama 2, Mistral, Gemma);
// or from a Hugging Face tokenizer.json, as its tokenizers package runs it: byte-level BPE
// (SmolLM2) or WordPiece (BERT, all-MiniLM-L6-v2).
//
//   kiln::Tokenizer tok = kiln::Tokenizer::from_gguf(kiln::load_gguf("SmolLM2.gguf"));
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n");
//   if (tok.add_bos()) ids.insert(ids.begin(), tok.bos());
//   kiln::Tokenizer::Decoder out(tok);
//   for (int32_t id : generated) std::cout << out.push(id);
//   std::cout << out.flush();
//
//   kiln::Tokenizer bert = kiln::Tokenizer::from_tokenizer_json("MiniLM/tokenizer.json");
//   std::vector<int32_t> words = bert.encode("Hello, world!");  // no [CLS] or [SEP]: add them
//   words.insert(words.begin(), bert.token_id("[CLS]"));
//   words.push_back(bert.token_id("[SEP]"));
//
// Encoding first finds the special tokens: control, user-defined and unknown tokens
// (tokenizer.ggml.token_type 3, 4 and 2; in tokenizer.json the added_tokens, control where
// "special" is true, else user-defined) found literally in the text become their ids, the
// leftmost match first, the longest where several start there. Each run of text between them
// is encoded on its own.
//
// "gpt2" encodes a run in two steps:
//  1. A pre-tokenizer (tokenizer.ggml.pre) cuts the text into pieces: "smollm" puts each
//     digit in a piece of its own, then applies GPT-2's regex ('s|'t|'re|'ve|'m|'ll|'d|
//     ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+); "gpt-2" applies GPT-2's regex
//     alone; "default" (also when the key is missing) is llama.cpp's fallback for unnamed
//     pre-tokenizers; "llama-bpe" (Llama 3; also "llama3", "llama-v3", "falcon3", and "dbrx"
//     and "smaug-bpe") applies (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
//     \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+, and "qwen2" (Qwen 2
//     and 2.5; also "deepseek-r1-qwen", "stablelm2") the same with \p{N} for \p{N}{1,3}. As in
//     llama.cpp, (?i) folds ASCII letters only and \s is Unicode's White_Space. Bytes that are
//     not UTF-8 each become U+FFFD, as in llama.cpp.
//  2. Each piece's bytes are spelled with GPT-2's byte-to-character table, and BPE merges
//     adjacent symbols, lowest tokenizer.ggml.merges rank first (leftmost on ties). For
//     "llama-bpe" and its aliases but "dbrx" and "smaug-bpe", a piece that is a token whole is
//     that token, merges or not (llama.cpp's and Hugging Face's ignore_merges).
//
// "llama" encodes a run as sentencepiece does (llm/spm_tokenizer.h):
//  1. With tokenizer.ggml.add_space_prefix (true when absent; Gemma's files say false), a
//     space goes before the run, so each run after a special token gets one too (llama.cpp's
//     rule). Every space becomes "▁" (U+2581).
//  2. Starting from one symbol per UTF-8 character, the adjacent pair whose concatenation is
//     the token of the highest tokenizer.ggml.scores merges (the leftmost on ties), until no
//     pair is a token.
//  3. A character the vocabulary lacks, or a byte that is not UTF-8, becomes its bytes' tokens
//     "<0xXX>" (byte fallback), or the unknown token (tokenizer.ggml.unknown_token_id) where
//     they are missing.
//
// WordPiece encodes a run as Hugging Face's BertNormalizer, BertPreTokenizer and WordPiece do
// (llm/wordpiece.h):
//  1. Normalize: drop control and format characters and turn whitespace into spaces
//     (clean_text), put spaces around CJK ideographs (handle_chinese_chars), decompose and drop
//     accents (strip_accents; null means lowercase's value), lowercase (lowercase). Kiln's
//     Unicode data is version 14 (Python's unicodedata: llm/unicode_categories.inc,
//     llm/unicode_fold.inc); the tokenizers package mixes older tables (its classes) with newer
//     ones (its lowercase), so some 560 code points, all assigned or reclassified since
//     Unicode 8, normalize or split differently.
//  2. Split into words at whitespace; each punctuation character is a word of its own.
//  3. Each word becomes the longest vocabulary token that begins it, then the longest
//     continuation ("##" and the text) after it, and so on; a word that does not split so, or
//     longer than max_input_chars_per_word characters, is the unknown token (unk_token).
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
  // Reads tokenizer.ggml.{model, tokens, token_type, bos_token_id, eos_token_id,
  // add_bos_token}; for "gpt2" also {pre, merges}; for "llama" also {scores, unknown_token_id,
  // add_space_prefix}. A model other than those two ("bert", "t5", ...), a missing tokens list,
  // a missing merges list ("gpt2") or scores array ("llama"), scores that are not one per
  // token, an unknown pre-tokenizer, a malformed merge or one naming a token the vocabulary
  // lacks, and duplicate tokens are errors naming the key.
  static Tokenizer from_gguf(const GgufFile& file);

  // Reads a Hugging Face tokenizer.json: model, normalizer, pre_tokenizer, decoder and
  // added_tokens. Two kinds are read:
  //  - model.type "BPE" with GPT-2's byte-level pre-tokenizer becomes the "gpt2" tokenizer
  //    above: pre_tokenizer ByteLevel (use_regex, as "gpt-2"), or a Sequence of Digits
  //    (individual_digits) and ByteLevel (SmolLM2's, as "smollm"), or a Sequence of a Split on
  //    GPT-2's regex and ByteLevel without use_regex ("gpt-2"); add_prefix_space false. The
  //    merges may be "left right" strings or ["left", "right"] pairs. No normalizer; the
  //    decoder ByteLevel or none.
  //  - model.type "WordPiece" with normalizer BertNormalizer (or none), pre_tokenizer
  //    BertPreTokenizer, decoder WordPiece (or none).
  // Any other model (Unigram, WordLevel), normalizer, pre-tokenizer or decoder, BPE's
  // byte_fallback, ignore_merges, dropout or subword affixes, and added tokens with lstrip,
  // rstrip or single_word (or normalized, where there is a normalizer) are errors that name the
  // key and its value; so are a file that cannot be read or parsed (naming the path), and ids
  // that no token or two tokens have. post_processor, truncation and padding are not read:
  // encode adds no [CLS], [SEP] or BOS and cuts nothing. bos() and eos() are -1 and add_bos()
  // false, since the file does not say them (tokenizer_config.json does): find the tokens a
  // model wants with token_id ("[CLS]", "[SEP]", "<|im_start|>").
  static Tokenizer from_tokenizer_json(const std::string& path);

  // The ids of `text`, without BOS or EOS: see add_bos(). With parse_special false, control
  // and unknown tokens are plain text; user-defined tokens are still matched (as llama.cpp
  // and Hugging Face's tokenizers do).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // The bytes of the tokens, in order. Control tokens decode to their text ("<|im_end|>"),
  // so that decode(encode(text)) == text for UTF-8 text; skip them before decoding to hide
  // them (is_control). With add_space_prefix ("llama"), the space that encode put before each
  // run of text is taken off again: a normal token that comes first, or right after a special
  // token, loses one leading space (as sentencepiece's decode drops the first "▁"). So ids
  // generated after a prompt decode without the space of their first word; a Decoder that
  // `continues` keeps it. An id outside [0, vocab_size()) is an error.
  //
  // WordPiece decodes as the WordPiece decoder of tokenizers does with skip_special_tokens
  // false: tokens joined by spaces, a continuation ("##ing") glued to the token before it
  // without its "##", and with the decoder's cleanup (true when absent) no space before ".",
  // "?", "!" and ",". Lowercasing and dropped accents stay lost. Unlike tokenizers, a
  // continuation that comes first loses its "##" too.
  std::string decode(const std::vector<int32_t>& ids) const;

  int64_t vocab_size() const;
  int32_t bos() const;  // tokenizer.ggml.bos_token_id; -1 when absent and for tokenizer.json
  int32_t eos() const;  // tokenizer.ggml.eos_token_id; -1 when absent and for tokenizer.json
  // tokenizer.ggml.add_bos_token: whether the model expects BOS before a prompt. When absent,
  // llama.cpp's default: true for "llama" and for "gpt2" with "llama-bpe" (or its aliases but
  // "dbrx" and "smaug-bpe"), else false for "gpt2"; false for tokenizer.json. encode
  // never adds it; the caller prepends bos().
  bool add_bos() const;
  // token_type 3 (CONTROL); in tokenizer.json an added token with "special" true, except the
  // unknown token (model.unk_token: "[UNK]").
  bool is_control(int32_t id) const;
  // The token as the vocabulary stores it ("Ġworld" or "▁world" for " world", "##ing");
  // decode({id}) gives its bytes (without the leading space, for "llama" with add_space_prefix).
  const std::string& token_text(int32_t id) const;
  int32_t token_id(std::string_view text) const;  // the inverse of token_text; -1 when absent

  struct Impl;  // the vocabulary, merges or scores, and tables (llm/tokenizer_impl.h)

  // Decodes ids one at a time for streaming output. push returns only whole UTF-8 characters:
  // the leading bytes of a character that the next tokens complete (an emoji spelled by
  // several byte tokens) are held until it is whole. Bytes that cannot start or continue a
  // character pass through at once. The concatenation of every push and the final flush is
  // decode(ids).
  //
  // `continues` says the ids continue text already shown (tokens generated after a prompt):
  // then the first token keeps its leading space, where decode of a whole text drops the space
  // that add_space_prefix (or WordPiece's decoder) put before it. It matters for "llama" and
  // WordPiece tokenizers only.
  class Decoder {
   public:
    explicit Decoder(const Tokenizer& tokenizer, bool continues = false);
    std::string push(int32_t id);
    std::string flush();  // the bytes still held, complete or not

   private:
    std::shared_ptr<const Impl> impl_;
    std::string held_;
    bool run_start_ = true;  // whether the next token may begin a run of text (see decode)
  };

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kiln

#endif  // KILN_TOKENIZER_H_
