#include "llm/spm_tokenizer.h"

#include <queue>
#include <string>
#include <utility>

namespace kiln {
namespace {

// The text the merges run on: spaces as "▁", with one in front when add_space_prefix asks.
std::string escape_spaces(std::string_view text, bool add_space_prefix) {
  std::string out(add_space_prefix ? kSpmSpace : "");
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

// The bytes of the UTF-8 character at text[i]; 1 for a byte that starts no complete sequence,
// which byte fallback then keeps as it is. (llama.cpp reads the length from the lead byte
// alone, so that a malformed byte takes the characters after it into its symbol; for UTF-8 the
// two agree.)
size_t char_length(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const size_t n = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 1;
  if (i + n > text.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

bool made_by_merges(int32_t type) {
  return type == kNormalType || type == kUserDefinedType || type == kUnusedType;
}

// A symbol: bytes [begin, end) of the text, the token they spell (-1 for a character the
// vocabulary lacks), its neighbours, and the two symbols a merge made it of (-1 for a
// character). Merging appends the new symbol and retires its two parts.
struct Symbol {
  uint32_t begin, end;
  int32_t id;
  int32_t prev, next;
  int32_t left = -1, right = -1;
  bool retired = false;
};

// Two adjacent symbols whose concatenation is token `id`.
struct Pair {
  float score;
  uint32_t begin;  // of the left symbol
  int32_t left, right, id;
  // The priority queue's top is the greatest: the highest score, then the leftmost.
  bool operator<(const Pair& o) const {
    return score != o.score ? score < o.score : begin > o.begin;
  }
};

class Encoding {
 public:
  Encoding(std::string text, const SpmVocab& vocab) : text_(std::move(text)), vocab_(vocab) {
    for (size_t i = 0; i < text_.size();) {
      const size_t n = char_length(text_, i);
      const int32_t k = static_cast<int32_t>(symbols_.size());
      symbols_.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + n),
                          token_of(i, i + n), k - 1, i + n < text_.size() ? k + 1 : -1});
      i += n;
    }
  }

  // Merges the best pair until none is left. Both halves of a merged pair retire, so a pair
  // whose symbols are both still active is still adjacent, and still valid.
  void merge() {
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols_.size()); ++i) consider(i, i + 1);
    while (!queue_.empty()) {
      const Pair p = queue_.top();
      queue_.pop();
      if (symbols_[p.left].retired || symbols_[p.right].retired) continue;
      const int32_t k = join(p);
      consider(symbols_[k].prev, k);
      consider(k, symbols_[k].next);
    }
  }

  void emit(std::vector<int32_t>& out) {
    for (int32_t i = symbols_.empty() ? -1 : head_; i >= 0; i = symbols_[i].next) emit(i, out);
  }

 private:
  int32_t token_of(size_t begin, size_t end) const {
    auto it = vocab_.ids.find(std::string_view(text_).substr(begin, end - begin));
    return it == vocab_.ids.end() ? -1 : it->second;
  }

  // Appends the symbol that pair `p` makes, linked in place of its two halves; its index.
  int32_t join(const Pair& p) {
    Symbol s = symbols_[p.left];  // its begin and prev
    s.end = symbols_[p.right].end;
    s.next = symbols_[p.right].next;
    s.id = p.id;
    s.left = p.left;
    s.right = p.right;
    symbols_[p.left].retired = symbols_[p.right].retired = true;
    const int32_t k = static_cast<int32_t>(symbols_.size());
    symbols_.push_back(s);
    if (s.prev >= 0) symbols_[s.prev].next = k;
    if (s.next >= 0) symbols_[s.next].prev = k;
    if (head_ == p.left) head_ = k;
    return k;
  }

  void consider(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t id = token_of(symbols_[left].begin, symbols_[right].end);
    if (id < 0 || !made_by_merges(vocab_.types[id])) return;
    queue_.push({vocab_.scores[id], symbols_[left].begin, left, right, id});
  }

  void emit(int32_t i, std::vector<int32_t>& out) {
    const Symbol& s = symbols_[i];
    if (s.left >= 0 && vocab_.types[s.id] == kUnusedType) {
      emit(s.left, out);
      emit(s.right, out);
    } else if (s.id >= 0) {
      out.push_back(s.id);
      unknown_run_ = false;
    } else {
      emit_bytes(s, out);
    }
  }

  // A character the vocabulary lacks: its byte tokens, or the unknown token where one is
  // missing (nothing where there is no unknown token either). Like sentencepiece, a run of such
  // characters gives one unknown token.
  void emit_bytes(const Symbol& s, std::vector<int32_t>& out) {
    bool all_bytes = true;
    for (uint32_t k = s.begin; k < s.end; ++k) {
      all_bytes = all_bytes && vocab_.byte_tokens[static_cast<unsigned char>(text_[k])] >= 0;
    }
    if (all_bytes) {
      for (uint32_t k = s.begin; k < s.end; ++k) {
        out.push_back(vocab_.byte_tokens[static_cast<unsigned char>(text_[k])]);
      }
      unknown_run_ = false;
    } else if (!unknown_run_ && vocab_.unknown >= 0) {
      out.push_back(vocab_.unknown);
      unknown_run_ = true;
    }
  }

  std::string text_;
  const SpmVocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Pair> queue_;
  int32_t head_ = 0;
  bool unknown_run_ = false;
};

}  // namespace

void spm_encode(std::string_view text, const SpmVocab& vocab, std::vector<int32_t>& out) {
  Encoding e(escape_spaces(text, vocab.add_space_prefix), vocab);
  e.merge();
  e.emit(out);
}

}  // namespace kiln
