#include "llm/wordpiece.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "llm/unicode.h"

namespace kiln {
namespace {

struct CodePointRange {
  char32_t first, last;
};
struct Mapping {
  char32_t code_point;
  const char32_t* to;  // zero-terminated
};
#include "llm/unicode_fold.inc"

template <size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], char32_t c) {
  const auto* it =
      std::upper_bound(std::begin(ranges), std::end(ranges), c,
                       [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && c <= std::prev(it)->last;
}

// What `table` maps c to, or null where c maps to itself.
template <size_t N>
const char32_t* mapped(const Mapping (&table)[N], char32_t c) {
  const auto* it = std::lower_bound(std::begin(table), std::end(table), c,
                                    [](const Mapping& m, char32_t c) { return m.code_point < c; });
  return it != std::end(table) && it->code_point == c ? it->to : nullptr;
}

bool is_whitespace(char32_t c) { return unicode::flags(c) & unicode::kWhitespace; }

// What clean_text drops. Tab, newline and carriage return are control characters that it
// keeps, as spaces.
bool is_dropped(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c == 0 || c == unicode::kReplacement || in_ranges(kControls, c);
}

// tokenizers' is_chinese_char: the CJK Unified Ideographs and their extensions, and the
// compatibility ideographs. It leaves out U+2B820-U+2B91F, which BERT's original code
// includes; the tokenizer.json files are tokenizers', so Kiln follows it.
bool is_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B81F) ||
         (c >= 0x2B920 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0x2F800 && c <= 0x2FA1F);
}

// ASCII symbols count as punctuation too (BERT's rule): "$", "+", "<", "^", "`", "|", "~".
bool is_punctuation(char32_t c) {
  const bool ascii = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
                     (c >= 123 && c <= 126);
  return ascii || (unicode::flags(c) & unicode::kPunctuation);
}

constexpr char32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3;

// A Hangul syllable's NFD, by the rule of Unicode's chapter 3.12: its leading consonant, its
// vowel and, where it has one, its trailing consonant (jamo, which have no case).
void append_jamo(char32_t c, std::u32string& out) {
  const char32_t s = c - kHangulFirst;
  out += static_cast<char32_t>(0x1100 + s / 588);
  out += static_cast<char32_t>(0x1161 + s % 588 / 28);
  if (s % 28 != 0) out += static_cast<char32_t>(0x11A7 + s % 28);
}

void append_lowercase(char32_t c, const WordPieceOptions& o, std::u32string& out) {
  const char32_t* lower = o.lowercase ? mapped(kLowercase, c) : nullptr;
  if (lower != nullptr) {
    out += lower;
  } else {
    out += c;
  }
}

// strip_accents, then lowercase, as BertNormalizer orders them.
void append_folded(char32_t c, const WordPieceOptions& o, std::u32string& out) {
  if (!o.strip_accents) return append_lowercase(c, o, out);
  if (c >= kHangulFirst && c <= kHangulLast) return append_jamo(c, out);
  if (in_ranges(kNonspacingMarks, c)) return;
  const char32_t* decomposed = mapped(kDecompositions, c);
  if (decomposed == nullptr) return append_lowercase(c, o, out);
  for (; *decomposed != 0; ++decomposed) append_lowercase(*decomposed, o, out);
}

std::u32string normalize(std::string_view text, const WordPieceOptions& o) {
  std::u32string out;
  for (char32_t c : unicode::decode_utf8(text)) {
    if (o.clean_text && is_dropped(c)) continue;
    if (o.clean_text && is_whitespace(c)) {
      out += ' ';
      continue;
    }
    const bool pad = o.handle_chinese_chars && is_chinese(c);
    if (pad) out += ' ';
    append_folded(c, o, out);
    if (pad) out += ' ';
  }
  return out;
}

// The longest token that begins the word, then the longest continuation, and so on. Pieces
// end at code points.
void append_word(const std::u32string& word,
                 const std::unordered_map<std::string_view, int32_t>& ids,
                 const WordPieceOptions& o, std::vector<int32_t>& out) {
  if (word.size() > static_cast<size_t>(o.max_chars_per_word)) {
    out.push_back(o.unknown);
    return;
  }
  std::string utf8;
  std::vector<size_t> ends;  // of each code point in utf8
  for (char32_t c : word) {
    unicode::append_utf8(c, utf8);
    ends.push_back(utf8.size());
  }
  const size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    const size_t begin = start > 0 ? ends[start - 1] : 0;
    size_t end = word.size();
    auto found = ids.end();
    for (; end > start; --end) {
      piece = start > 0 ? o.prefix : "";
      piece.append(utf8, begin, ends[end - 1] - begin);
      found = ids.find(piece);
      if (found != ids.end()) break;
    }
    if (found == ids.end()) {  // the whole word is unknown, as in BERT
      out.resize(first);
      out.push_back(o.unknown);
      return;
    }
    out.push_back(found->second);
    start = end;
  }
}

// The WordPiece decoder's cleanup (tokenizers' decoders::wordpiece::cleanup), in its order.
std::string cleanup(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kReplacements) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
      s.replace(at, from.size(), to);
    }
  }
  return s;
}

}  // namespace

void wordpiece_encode(std::string_view text,
                      const std::unordered_map<std::string_view, int32_t>& ids,
                      const WordPieceOptions& options, std::vector<int32_t>& out) {
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) append_word(word, ids, options, out);
    word.clear();
  };
  for (char32_t c : normalize(text, options)) {
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      word = c;
      flush();
    } else {
      word += c;
    }
  }
  flush();
}

std::string wordpiece_token_bytes(std::string_view text, const WordPieceOptions& options) {
  const bool continues = !options.prefix.empty() && text.starts_with(options.prefix);
  std::string s =
      continues ? std::string(text.substr(options.prefix.size())) : " " + std::string(text);
  return options.cleanup ? cleanup(std::move(s)) : s;
}

}  // namespace kiln
