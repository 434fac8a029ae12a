#include "samples/bert_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "kiln/error.h"

namespace kiln::samples {
namespace {

struct Fold {
  char32_t code_point;
  const char* utf8;
};
constexpr Fold kFolds[] = {
#include "samples/unicode_fold.inc"
};

// The code points of UTF-8 text; a malformed byte becomes U+FFFD (which cleaning drops).
std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_space(char32_t c) {  // ' ', \t, \n, \r and Unicode's space separators (Zs)
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_control(char32_t c) {  // Cc and Cf, which cleaning drops
  return c == 0 || c == 0xFFFD || c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0xAD ||
         (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2060 && c <= 0x2064) || c == 0xFEFF;
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0x2F800 && c <= 0x2FA1F);
}

// ASCII symbols count as punctuation (BERT's rule), and Unicode's punctuation in the
// Latin-1, general punctuation, CJK and full-width blocks.
bool is_punctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126) || c == 0xA1 || c == 0xA7 || c == 0xAB || c == 0xB6 || c == 0xB7 ||
         c == 0xBB || c == 0xBF || (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x2043) ||
         (c >= 0x2045 && c <= 0x2051) || (c >= 0x2053 && c <= 0x205E) ||
         (c >= 0x3001 && c <= 0x3003) || (c >= 0x3008 && c <= 0x3011) ||
         (c >= 0x3014 && c <= 0x301F) ||
         (c >= 0xFF01 && c <= 0xFF0F && c != 0xFF04 && c != 0xFF0B) ||
         (c >= 0xFF1A && c <= 0xFF20 && c != 0xFF1C && c != 0xFF1D && c != 0xFF1E);
}

// Lowercase and accent-free UTF-8 of one code point (combining marks vanish).
void append_folded(char32_t c, std::string& out) {
  if (c >= 0x300 && c <= 0x36F) return;  // combining diacritical marks (Mn)
  if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
  const Fold* f = std::lower_bound(std::begin(kFolds), std::end(kFolds), c,
                                   [](const Fold& e, char32_t v) { return e.code_point < v; });
  if (f != std::end(kFolds) && f->code_point == c) {
    out += f->utf8;
  } else {
    append_utf8(c, out);
  }
}

// The words of the text: cleaned, split at spaces, punctuation and CJK ideographs, folded.
std::vector<std::string> basic_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t c : decode_utf8(text)) {
    if (is_space(c)) {
      flush();
    } else if (is_control(c)) {
      continue;
    } else if (is_punctuation(c) || is_cjk(c)) {
      flush();
      append_folded(c, word);
      flush();
    } else {
      append_folded(c, word);
    }
  }
  flush();
  return words;
}

}  // namespace

BertTokenizer BertTokenizer::load(const std::string& vocab_path) {
  std::ifstream in(vocab_path);
  if (!in) throw Error("cannot read the vocabulary " + vocab_path);
  BertTokenizer t;
  std::string line;
  for (int64_t id = 0; std::getline(in, line); ++id) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    t.vocab_.emplace(line, id);
  }
  for (auto [name, id] : {std::pair{"[CLS]", &t.cls_}, {"[SEP]", &t.sep_}, {"[UNK]", &t.unk_}}) {
    const auto it = t.vocab_.find(name);
    if (it == t.vocab_.end()) throw Error(vocab_path + " has no " + name + " token");
    *id = it->second;
  }
  return t;
}

void BertTokenizer::add_word_pieces(const std::string& word, std::vector<int64_t>& ids) const {
  if (decode_utf8(word).size() > 100) {
    ids.push_back(unk_);
    return;
  }
  // Pieces end at code points, never inside a UTF-8 sequence.
  auto inside_sequence = [&](size_t i) {
    return i < word.size() && (static_cast<unsigned char>(word[i]) & 0xC0) == 0x80;
  };
  std::vector<int64_t> pieces;
  for (size_t start = 0; start < word.size();) {
    size_t end = word.size();
    int64_t found = -1;
    for (; end > start; --end) {
      if (inside_sequence(end)) continue;
      const std::string piece = (start > 0 ? "##" : "") + word.substr(start, end - start);
      const auto it = vocab_.find(piece);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      ids.push_back(unk_);  // the whole word, as BERT does
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  ids.insert(ids.end(), pieces.begin(), pieces.end());
}

std::vector<int64_t> BertTokenizer::encode(const std::string& text, size_t max_tokens) const {
  std::vector<int64_t> ids{cls_};
  for (const std::string& word : basic_words(text)) add_word_pieces(word, ids);
  if (ids.size() > max_tokens - 1) ids.resize(max_tokens - 1);
  ids.push_back(sep_);
  return ids;
}

}  // namespace kiln::samples
