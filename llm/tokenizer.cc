#include "kiln/tokenizer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/io.h"
#include "llm/spm_tokenizer.h"
#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"
#include "llm/wordpiece.h"

namespace kiln {
namespace {

using unicode::append_utf8;
using unicode::decode_utf8;
using unicode::is_continuation;
using unicode::kLetter;
using unicode::kNumber;
using unicode::kPunctuation;
using unicode::kWhitespace;
using unicode::sequence_length;

// ---- GPT-2's byte-level alphabet ----

// GPT-2 spells every byte with a printable character so that its vocabulary holds no spaces or
// control bytes: the printable bytes of Latin-1 (! to ~, ¡ to ¬, ® to ÿ) stand for
// themselves, and the other 68 bytes, in order, for U+0100 onwards (space is U+0120 "Ġ").
bool byte_stands_for_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
  std::array<char32_t, 256> chars;   // the character spelling each byte
  std::array<int16_t, 0x144> bytes;  // the byte each character below U+0144 spells, or -1
};

ByteAlphabet make_byte_alphabet() {
  ByteAlphabet a;
  a.bytes.fill(-1);
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    a.chars[b] = byte_stands_for_itself(b) ? b : next++;
    a.bytes[a.chars[b]] = static_cast<int16_t>(b);
  }
  return a;
}

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet = make_byte_alphabet();
  return alphabet;
}

// The byte that character `c` of a token spells; -1 when it spells none.
int byte_of_char(char32_t c) { return c < 0x144 ? byte_alphabet().bytes[c] : -1; }

// ---- Pre-tokenizers ----

// One step of a pre-tokenizer. Each cuts every piece further, keeping the text between its
// matches as pieces too (llama.cpp's unicode_regex_split).
enum class Split {
  kEachNumber,       // \p{N}: every digit a piece of its own
  kGpt2,             // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kPunctuationRuns,  // [\p{P}\$\+<=>\^~\|]+
  kNumberRuns,       // \p{N}+
  kDigitTriples,     // [0-9][0-9][0-9]
  kLlama3,           // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                     //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,            // the same with \p{N} for \p{N}{1,3}
};

std::vector<Split> splits(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::kSmolLM:
      return {Split::kEachNumber, Split::kGpt2};
    case PreTokenizer::kGpt2:
      return {Split::kGpt2};
    case PreTokenizer::kDefault:
      return {Split::kPunctuationRuns, Split::kGpt2, Split::kNumberRuns, Split::kDigitTriples};
    case PreTokenizer::kLlama3:
      return {Split::kLlama3};
    case PreTokenizer::kQwen2:
      return {Split::kQwen2};
  }
  return {};
}

// The text being cut: its code points and their classes (the flags above).
struct Text {
  std::u32string chars;
  std::vector<uint8_t> flags;
};

// GPT-2's regex reads each code point as one of four classes, in this order of precedence.
enum class Gpt2Class { kLetter, kNumber, kSpace, kOther };

Gpt2Class gpt2_class(uint8_t flags) {
  if (flags & kLetter) return Gpt2Class::kLetter;
  if (flags & kNumber) return Gpt2Class::kNumber;
  if (flags & kWhitespace) return Gpt2Class::kSpace;
  return Gpt2Class::kOther;
}

char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

// The end of the contraction 's|'t|'re|'ve|'m|'ll|'d at `i`, or `i` when none starts there.
// `any_case` reads (?i:...) as llama.cpp does: ASCII letters of either case, and nothing else
// (Oniguruma, under Hugging Face's tokenizers, also takes U+017F "ſ" for "s").
size_t contraction_end(const std::u32string& s, size_t i, size_t end, bool any_case) {
  if (s[i] != '\'' || i + 1 >= end) return i;
  auto letter = [&](size_t k) -> char32_t {
    if (k >= end) return 0;
    return any_case ? ascii_lower(s[k]) : s[k];
  };
  const char32_t a = letter(i + 1), b = letter(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

// The end of GPT-2's regex match at `i` in the piece that ends at `end`. The piece's end acts
// as the end of the text, as in llama.cpp's hand-written matcher.
size_t gpt2_match(const Text& t, size_t i, size_t end) {
  const std::u32string& s = t.chars;
  // 's|'t|'re|'ve|'m|'ll|'d, lowercase only
  if (const size_t e = contraction_end(s, i, end, false); e > i) return e;
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class.
  const size_t first = s[i] == ' ' ? i + 1 : i;
  if (first < end && gpt2_class(t.flags[first]) != Gpt2Class::kSpace) {
    const Gpt2Class c = gpt2_class(t.flags[first]);
    size_t e = first + 1;
    while (e < end && gpt2_class(t.flags[e]) == c) ++e;
    return e;
  }
  // \s+(?!\S) leaves the last of several spaces to the word after them; \s+ takes the rest.
  size_t e = i;
  while (e < end && gpt2_class(t.flags[e]) == Gpt2Class::kSpace) ++e;
  if (e - i > 1 && e < end) return e - 1;
  return std::max(e, i + 1);
}

bool is_line_break(char32_t c) { return c == '\r' || c == '\n'; }

// The end of Llama 3's regex match at `i` in the piece that ends at `end`, as llama.cpp's
// hand-written matcher for it finds it; Qwen 2's regex is the same with `max_digits` 1. \s is
// the White_Space property (llama.cpp's whitespace class), and everything that is not a letter,
// a number or whitespace counts as [^\s\p{L}\p{N}], unassigned code points too.
size_t llama3_match(const Text& t, size_t i, size_t end, size_t max_digits) {
  const std::u32string& s = t.chars;
  auto cls = [&](size_t k) { return gpt2_class(t.flags[k]); };
  if (const size_t e = contraction_end(s, i, end, true); e > i) return e;
  // [^\r\n\p{L}\p{N}]?\p{L}+: a word takes the one character before it unless that is a digit
  // or a line break, so " hello", "$hello" and "(hello" are single pieces.
  const bool may_lead = cls(i) != Gpt2Class::kNumber && !is_line_break(s[i]);
  if (cls(i) == Gpt2Class::kLetter ||
      (may_lead && i + 1 < end && cls(i + 1) == Gpt2Class::kLetter)) {
    size_t e = i + 1;
    while (e < end && cls(e) == Gpt2Class::kLetter) ++e;
    return e;
  }
  // \p{N}{1,3}: a run of digits in pieces of max_digits, counted from its start.
  if (cls(i) == Gpt2Class::kNumber) {
    size_t e = i + 1;
    while (e < end && e - i < max_digits && cls(e) == Gpt2Class::kNumber) ++e;
    return e;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*': punctuation and symbols, a space before them, and the line
  // breaks after them.
  const size_t first = s[i] == ' ' ? i + 1 : i;
  if (first < end && cls(first) == Gpt2Class::kOther) {
    size_t e = first + 1;
    while (e < end && cls(e) == Gpt2Class::kOther) ++e;
    while (e < end && is_line_break(s[e])) ++e;
    return e;
  }
  // Whitespace: up to its last line break (\s*[\r\n]+); without one, all but the last of
  // several spaces when something follows, which the word after takes (\s+(?!\S)); else all.
  size_t e = i, after_break = i;
  for (; e < end && cls(e) == Gpt2Class::kSpace; ++e) {
    if (is_line_break(s[e])) after_break = e + 1;
  }
  if (after_break > i) return after_break;
  if (e - i > 1 && e < end) return e - 1;
  return std::max(e, i + 1);
}

bool is_punctuation_run_char(char32_t c, uint8_t flags) {
  return (flags & kPunctuation) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
         c == '^' || c == '~' || c == '|';
}

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }

// The end of `split`'s match at `i` in the piece ending at `end`, or `i` when none starts
// there.
size_t match_at(Split split, const Text& t, size_t i, size_t end) {
  const std::u32string& s = t.chars;
  size_t e = i;
  switch (split) {
    case Split::kEachNumber:
      return (t.flags[i] & kNumber) ? i + 1 : i;
    case Split::kGpt2:
      return gpt2_match(t, i, end);
    case Split::kPunctuationRuns:
      while (e < end && is_punctuation_run_char(s[e], t.flags[e])) ++e;
      return e;
    case Split::kNumberRuns:
      while (e < end && (t.flags[e] & kNumber)) ++e;
      return e;
    case Split::kDigitTriples:
      return i + 3 <= end && is_ascii_digit(s[i]) && is_ascii_digit(s[i + 1]) &&
                     is_ascii_digit(s[i + 2])
                 ? i + 3
                 : i;
    case Split::kLlama3:
      return llama3_match(t, i, end, 3);
    case Split::kQwen2:
      return llama3_match(t, i, end, 1);
  }
  return i;
}

// Cuts each piece into the matches of `split`, leftmost first, and the text between them.
std::vector<size_t> apply(Split split, const Text& t, const std::vector<size_t>& ends) {
  std::vector<size_t> out;
  size_t begin = 0;
  for (size_t end : ends) {
    size_t gap = begin;  // start of text not matched yet
    for (size_t i = begin; i < end;) {
      const size_t e = match_at(split, t, i, end);
      if (e == i) {
        ++i;
        continue;
      }
      if (gap < i) out.push_back(i);
      out.push_back(e);
      gap = i = e;
    }
    if (gap < end) out.push_back(end);
    begin = end;
  }
  return out;
}

// ---- Reading the metadata ----

[[noreturn]] void fail(const std::string& message) { tokenizer_error(message); }

bool is_integer(GgufValue::Type t) {
  using T = GgufValue::Type;
  return t != T::kF32 && t != T::kF64 && t != T::kString && t != T::kArray && t != T::kBool;
}

const GgufValue* find(const GgufFile& file, const std::string& key) {
  auto it = file.metadata.find(key);
  return it == file.metadata.end() ? nullptr : &it->second;
}

const GgufValue& need(const GgufFile& file, const std::string& key, const std::string& expected) {
  if (const GgufValue* v = find(file, key)) return *v;
  fail("the metadata has no '" + key + "' (expected " + expected + ")");
}

void check_type(const GgufValue& v, const std::string& key, bool ok, const std::string& expected) {
  if (ok) return;
  std::string stored = gguf_type_name(v.type());
  if (v.type() == GgufValue::Type::kArray) {
    stored += " of " + std::string(gguf_type_name(v.element_type()));
  }
  fail("'" + key + "' is " + stored + ", expected " + expected);
}

std::string string_value(const GgufValue& v, const std::string& key) {
  check_type(v, key, v.type() == GgufValue::Type::kString, "a string");
  return v.as_string();
}

const std::vector<GgufValue>& string_array(const GgufValue& v, const std::string& key) {
  check_type(v, key,
             v.type() == GgufValue::Type::kArray && v.element_type() == GgufValue::Type::kString,
             "an array of strings");
  return v.as_array();
}

}  // namespace

// ---- The tokenizer ----

[[noreturn]] void tokenizer_error(const std::string& message) {
  throw Error("[Tokenizer] " + message);
}

void Tokenizer::Impl::check_id(int32_t id, const char* what) const {
  if (id < 0 || id >= static_cast<int64_t>(tokens.size())) {
    fail(std::string(what) + ": id " + std::to_string(id) + " is outside the vocabulary [0, " +
         std::to_string(tokens.size()) + ")");
  }
}

int32_t Tokenizer::Impl::special_at(std::string_view text, size_t i, bool parse_special) const {
  for (int32_t id : specials[static_cast<unsigned char>(text[i])]) {
    if (!parse_special && types[id] != kUserDefinedType) continue;
    if (text.substr(i).starts_with(tokens[id])) return id;
  }
  return -1;
}

// Appends what `id` decodes to. Special tokens cut the text into runs, and with
// add_space_prefix encode puts a space before each run; decode takes it off again: one
// leading space of a normal token at the start (`run_start`) or right after a special token.
// WordPiece puts a space before every token but continuations: the first token loses it.
void Tokenizer::Impl::append_bytes(int32_t id, bool& run_start, std::string& out) const {
  const std::string& b = bytes[id];
  const bool wordpiece = model == TokenizerModel::kWordPiece;
  const bool prefixed = wordpiece || (add_space_prefix && types[id] == kNormalType);
  out.append(b, run_start && prefixed && b.starts_with(' ') ? 1 : 0);
  run_start = !wordpiece && is_special(types[id]);
}

namespace {

// A symbol of a word being merged: a token (or -1) spelling bytes [begin, end) of the word,
// linked to its neighbours; a symbol merged into its left neighbour has begin == end.
struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t begin, end;
};

// A pair of adjacent symbols that a merge joins; stale once either symbol has changed.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t left_id, right_id;
  int32_t merged;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

// Text without special tokens: pre-tokenized, then each piece merged on its own.
void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (model == TokenizerModel::kSpm) {
    spm_encode(text, {ids, types, scores, byte_token, unknown, add_space_prefix}, out);
    return;
  }
  if (model == TokenizerModel::kWordPiece) {
    wordpiece_encode(text, ids, wordpiece, out);
    return;
  }
  Text t;
  t.chars = decode_utf8(text);
  t.flags.resize(t.chars.size());
  for (size_t i = 0; i < t.chars.size(); ++i) t.flags[i] = unicode::flags(t.chars[i]);
  std::vector<size_t> ends{t.chars.size()};
  for (Split split : splits(pre)) ends = apply(split, t, ends);
  size_t begin = 0;
  std::string piece;
  for (size_t end : ends) {
    piece.clear();
    for (size_t i = begin; i < end; ++i) append_utf8(t.chars[i], piece);
    encode_piece(piece, out);
    begin = end;
  }
}

// BPE over one piece: start from one symbol per byte, and join the adjacent pair with the
// lowest merge rank (the leftmost among equals) until no merge applies.
void Tokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    // Llama 3's vocabulary holds tokens that its merges do not reach: llama.cpp (and Hugging
    // Face's ignore_merges) take a piece that is a token whole as that token.
    std::string spelled;
    for (char c : piece) append_utf8(byte_alphabet().chars[static_cast<unsigned char>(c)], spelled);
    if (auto it = ids.find(spelled); it != ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_token[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1,
                  static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol &a = symbols[left], &b = symbols[a.next];
    if (a.id < 0 || b.id < 0) return;
    auto it = merges.find(pair_key(a.id, b.id));
    if (it != merges.end()) queue.push({it->second.rank, left, a.id, b.id, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& a = symbols[c.left];
    if (a.begin == a.end || a.id != c.left_id || a.next < 0) continue;
    Symbol& b = symbols[a.next];
    if (b.id != c.right_id) continue;
    a.id = c.merged;
    a.end = b.end;
    b.begin = b.end;
    a.next = b.next;
    if (a.next >= 0) symbols[a.next].prev = c.left;
    consider(a.prev);
    consider(c.left);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    // A symbol the vocabulary lacks (a merge's result, or a byte): its bytes, as llama.cpp
    // gives (it keeps only the bytes whose character is ASCII; every byte that has a token is
    // kept here).
    for (uint32_t k = s.begin; k < s.end; ++k) {
      const int32_t id = byte_token[static_cast<unsigned char>(piece[k])];
      if (id >= 0) out.push_back(id);
    }
  }
}

namespace {

// A tokenizer.ggml.pre value and what llama.cpp (llama-vocab.cpp) makes of it.
struct PreTokenizerName {
  const char* name;
  PreTokenizer pre;
  bool llama3;  // llama.cpp's Llama 3 type: ignore_merges, and BOS wanted unless the file says
};

// Only names whose regexes are exactly these: "dbrx" and "smaug-bpe" have Llama 3's regex but
// not its ignore_merges or BOS; "chatglm-bpe" has it too but drops the BOS token.
constexpr PreTokenizerName kPreTokenizers[] = {
    {"smollm", PreTokenizer::kSmolLM, false},          {"gpt-2", PreTokenizer::kGpt2, false},
    {"default", PreTokenizer::kDefault, false},        {"llama-bpe", PreTokenizer::kLlama3, true},
    {"llama3", PreTokenizer::kLlama3, true},           {"llama-v3", PreTokenizer::kLlama3, true},
    {"falcon3", PreTokenizer::kLlama3, true},          {"dbrx", PreTokenizer::kLlama3, false},
    {"smaug-bpe", PreTokenizer::kLlama3, false},       {"qwen2", PreTokenizer::kQwen2, false},
    {"deepseek-r1-qwen", PreTokenizer::kQwen2, false}, {"stablelm2", PreTokenizer::kQwen2, false},
};

PreTokenizerName read_pre_tokenizer(const GgufFile& file) {
  const GgufValue* v = find(file, "tokenizer.ggml.pre");
  // llama.cpp's choice, with a warning
  if (v == nullptr) return {"default", PreTokenizer::kDefault, false};
  const std::string name = string_value(*v, "tokenizer.ggml.pre");
  std::string known;
  for (const PreTokenizerName& p : kPreTokenizers) {
    if (name == p.name) return p;
    known += known.empty() ? p.name : std::string(", ") + p.name;
  }
  fail("tokenizer.ggml.pre is '" + name +
       "', a pre-tokenizer Kiln does not know (supported: " + known + ")");
}

TokenizerModel read_model(const GgufFile& file) {
  const std::string key = "tokenizer.ggml.model";
  const std::string model = string_value(need(file, key, "\"gpt2\" or \"llama\""), key);
  if (model == "gpt2") return TokenizerModel::kGpt2;
  if (model == "llama") return TokenizerModel::kSpm;
  fail(key + " is '" + model +
       "', a tokenizer Kiln does not support (supported: 'gpt2', byte-level BPE, and 'llama', "
       "SentencePiece BPE)");
}

void read_tokens(const GgufFile& file, Tokenizer::Impl& t) {
  const std::string key = "tokenizer.ggml.tokens";
  for (const GgufValue& v : string_array(need(file, key, "an array of strings"), key)) {
    t.tokens.push_back(v.as_string());
  }
  index_ids(t, key);
  t.types.assign(t.tokens.size(), kNormalType);  // when the file gives no types
  const std::string types_key = "tokenizer.ggml.token_type";
  if (const GgufValue* v = find(file, types_key)) {
    check_type(*v, types_key, v->type() == GgufValue::Type::kArray && is_integer(v->element_type()),
               "an array of integers");
    const std::vector<GgufValue>& types = v->as_array();
    if (types.size() < t.tokens.size()) {
      fail(types_key + " has " + std::to_string(types.size()) +
           " entries, expected one per token (" + std::to_string(t.tokens.size()) + ")");
    }
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      t.types[i] = static_cast<int32_t>(types[i].as_int());
    }
  }
}

// SentencePiece merges by score, so a "llama" vocabulary without scores cannot encode.
void read_scores(const GgufFile& file, Tokenizer::Impl& t) {
  const std::string key = "tokenizer.ggml.scores";
  const GgufValue& v =
      need(file, key, "an array of f32, one per token, which SentencePiece (\"llama\") needs");
  using T = GgufValue::Type;
  check_type(v, key,
             v.type() == T::kArray && (v.element_type() == T::kF32 || v.element_type() == T::kF64),
             "an array of floats");
  if (v.as_array().size() != t.tokens.size()) {
    fail(key + " has " + std::to_string(v.as_array().size()) +
         " entries, expected one per token (" + std::to_string(t.tokens.size()) + ")");
  }
  for (const GgufValue& s : v.as_array()) t.scores.push_back(static_cast<float>(s.as_double()));
}

int32_t token_of(const Tokenizer::Impl& t, std::string_view text) {
  auto it = t.ids.find(text);
  return it == t.ids.end() ? -1 : it->second;
}

// Merge `line` ("left right") of rank `rank`. The first space after the first byte separates
// the two, as llama.cpp reads them.
void add_merge_line(Tokenizer::Impl& t, int32_t rank, const std::string& line) {
  const std::string where = "tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + line + "'";
  const size_t space = line.find(' ', 1);
  if (space == std::string::npos) fail(where + " has no space: expected \"left right\"");
  const std::string_view view = line;
  add_merge(t, rank, view.substr(0, space), view.substr(space + 1), where);
}

void read_merges(const GgufFile& file, Tokenizer::Impl& t) {
  const std::string key = "tokenizer.ggml.merges";
  const auto& merges = string_array(need(file, key, "an array of strings \"left right\""), key);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    add_merge_line(t, static_cast<int32_t>(rank), merges[rank].as_string());
  }
}

int32_t read_special_id(const GgufFile& file, const std::string& key, size_t vocab) {
  const GgufValue* v = find(file, key);
  if (v == nullptr) return -1;
  check_type(*v, key, is_integer(v->type()), "an integer");
  const int64_t id = v->as_int();
  if (id < 0 || id >= static_cast<int64_t>(vocab)) {
    fail(key + " is " + std::to_string(id) + ", expected an id below the vocabulary size " +
         std::to_string(vocab));
  }
  return static_cast<int32_t>(id);
}

// A SentencePiece token's text with each "▁" a space again.
std::string spm_unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const bool space = text.substr(i).starts_with(kSpmSpace);
    out += space ? ' ' : text[i];
    i += space ? kSpmSpace.size() : 1;
  }
  return out;
}

bool read_bool(const GgufFile& file, const std::string& key, bool when_absent) {
  const GgufValue* v = find(file, key);
  if (v == nullptr) return when_absent;
  check_type(*v, key, v->type() == GgufValue::Type::kBool, "a bool");
  return v->as_bool();
}

// tokenizer.ggml.unknown_token_id, or where it is absent the token of type unknown, the one
// sentencepiece uses; -1 when there is none.
int32_t read_unknown_id(const GgufFile& file, const Tokenizer::Impl& t) {
  const int32_t id = read_special_id(file, "tokenizer.ggml.unknown_token_id", t.tokens.size());
  if (id >= 0) return id;
  auto it = std::find(t.types.begin(), t.types.end(), kUnknownType);
  return it == t.types.end() ? -1 : static_cast<int32_t>(it - t.types.begin());
}

// The bytes a token of `type` spelled `text` stands for: control, user-defined and unknown tokens
// their text, byte tokens "<0xXX>" their byte, normal tokens their characters with "▁" as a
// space (SentencePiece) or read back through GPT-2's alphabet (a character outside it stands for
// itself, where llama.cpp writes "[UNK_BYTE_...]"). Unused and undefined tokens decode to
// nothing, as in llama.cpp. WordPiece's tokens all follow its decoder (llm/wordpiece.h).
std::string token_bytes(const Tokenizer::Impl& t, int32_t id) {
  const std::string& text = t.tokens[id];
  const int32_t type = t.types[id];
  if (t.model == TokenizerModel::kWordPiece) return wordpiece_token_bytes(text, t.wordpiece);
  if (Tokenizer::Impl::is_special(type)) return text;
  if (type == kByteType) {
    unsigned value = 0;
    const bool hex =
        text.size() == 6 && text.starts_with("<0x") && text.back() == '>' &&
        std::from_chars(text.data() + 3, text.data() + 5, value, 16).ptr == text.data() + 5;
    return hex ? std::string(1, static_cast<char>(value)) : text;
  }
  if (type != kNormalType) return "";
  if (t.model == TokenizerModel::kSpm) return spm_unescape(text);
  std::string out;
  for (char32_t c : decode_utf8(text)) {
    const int b = byte_of_char(c);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      append_utf8(c, out);
    }
  }
  return out;
}

// The text of the token that spells byte `b` alone: GPT-2's character for it, or SentencePiece's
// byte token "<0xXX>" (upper-case hex, as sentencepiece and llama.cpp write it). WordPiece has
// none: "" is never a token.
std::string byte_spelling(TokenizerModel model, int b) {
  if (model == TokenizerModel::kWordPiece) return "";
  if (model == TokenizerModel::kSpm) {
    constexpr char kHex[] = "0123456789ABCDEF";
    return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
  }
  std::string s;
  append_utf8(byte_alphabet().chars[b], s);
  return s;
}

}  // namespace

void index_ids(Tokenizer::Impl& t, const std::string& key) {
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    if (t.tokens[i].empty()) continue;  // matches no text
    auto [it, fresh] = t.ids.emplace(t.tokens[i], static_cast<int32_t>(i));
    if (!fresh) {
      fail(key + " holds '" + t.tokens[i] + "' twice, at ids " + std::to_string(it->second) +
           " and " + std::to_string(i));
    }
  }
}

// The pair of ids a merge joins, and the id of what it makes. Of two merges of one pair, the
// first (of lower rank) counts.
void add_merge(Tokenizer::Impl& t, int32_t rank, std::string_view left, std::string_view right,
               const std::string& where) {
  for (std::string_view part : {left, right}) {
    if (token_of(t, part) < 0) {
      fail(where + " names '" + std::string(part) + "', which is not a token");
    }
  }
  std::string merged(left);
  merged += right;
  t.merges.emplace(Tokenizer::Impl::pair_key(token_of(t, left), token_of(t, right)),
                   Tokenizer::Impl::Merge{rank, token_of(t, merged)});
}

void index_tokens(Tokenizer::Impl& t) {
  for (int b = 0; b < 256; ++b) t.byte_token[b] = token_of(t, byte_spelling(t.model, b));
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    t.bytes.push_back(token_bytes(t, static_cast<int32_t>(i)));
    if (Tokenizer::Impl::is_special(t.types[i]) && !t.tokens[i].empty()) {
      t.specials[static_cast<unsigned char>(t.tokens[i][0])].push_back(static_cast<int32_t>(i));
    }
  }
  for (auto& bucket : t.specials) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int32_t a, int32_t b) { return t.tokens[a].size() > t.tokens[b].size(); });
  }
}

namespace {

// How many bytes at the end of `s` begin a UTF-8 character that more bytes could complete.
size_t unfinished_tail(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if (is_continuation(b)) continue;
    const int n = sequence_length(b);
    if (n <= static_cast<int>(back) || b < 0xC2 || b > 0xF4) return 0;
    if (back >= 2) {  // the second byte's range for leads whose second byte is restricted
      const auto second = static_cast<unsigned char>(s[s.size() - back + 1]);
      if ((b == 0xE0 && second < 0xA0) || (b == 0xED && second > 0x9F) ||
          (b == 0xF0 && second < 0x90) || (b == 0xF4 && second > 0x8F)) {
        return 0;
      }
    }
    return back;
  }
  return 0;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  auto t = std::make_shared<Impl>();
  t->model = read_model(file);
  const bool spm = t->model == TokenizerModel::kSpm;
  bool llama3 = false;
  if (!spm) {
    const PreTokenizerName pre = read_pre_tokenizer(file);
    t->pre = pre.pre;
    llama3 = pre.llama3;
    t->ignore_merges = pre.llama3;
  }
  read_tokens(file, *t);
  if (spm) {
    read_scores(file, *t);
  } else {
    read_merges(file, *t);
  }
  index_tokens(*t);
  t->bos = read_special_id(file, "tokenizer.ggml.bos_token_id", t->tokens.size());
  t->eos = read_special_id(file, "tokenizer.ggml.eos_token_id", t->tokens.size());
  // llama.cpp's defaults: SentencePiece models and Llama 3's want BOS unless they say not, and
  // SentencePiece models a space prefix.
  t->add_bos = read_bool(file, "tokenizer.ggml.add_bos_token", spm || llama3);
  if (spm) {
    t->add_space_prefix = read_bool(file, "tokenizer.ggml.add_space_prefix", true);
    t->unknown = read_unknown_id(file, *t);
  }
  return Tokenizer(std::move(t));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  size_t plain = 0;  // start of the text not encoded yet
  for (size_t i = 0; i < text.size();) {
    const int32_t special = impl_->special_at(text, i, parse_special);
    if (special < 0) {
      ++i;
      continue;
    }
    impl_->encode_text(text.substr(plain, i - plain), out);
    out.push_back(special);
    i += impl_->tokens[special].size();
    plain = i;
  }
  impl_->encode_text(text.substr(plain), out);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool run_start = true;
  for (int32_t id : ids) {
    impl_->check_id(id, "decode");
    impl_->append_bytes(id, run_start, out);
  }
  return out;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }

bool Tokenizer::is_control(int32_t id) const {
  impl_->check_id(id, "is_control");
  return impl_->types[id] == kControlType;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id, "token_text");
  return impl_->tokens[id];
}

int32_t Tokenizer::token_id(std::string_view text) const {
  auto it = impl_->ids.find(text);
  return it == impl_->ids.end() ? -1 : it->second;
}

Tokenizer::Decoder::Decoder(const Tokenizer& tokenizer, bool continues)
    : impl_(tokenizer.impl_), run_start_(!continues) {}

std::string Tokenizer::Decoder::push(int32_t id) {
  impl_->check_id(id, "Decoder::push");
  impl_->append_bytes(id, run_start_, held_);
  const size_t ready = held_.size() - unfinished_tail(held_);
  std::string out = held_.substr(0, ready);
  held_.erase(0, ready);
  return out;
}

std::string Tokenizer::Decoder::flush() { return std::exchange(held_, std::string()); }

}  // namespace kiln
