#include "llm/unicode.h"

#include <algorithm>
#include <iterator>

namespace kiln::unicode {
namespace {

struct CategoryRange {
  char32_t first, last;
  uint8_t flags;
};
constexpr CategoryRange kCategories[] = {
#include "llm/unicode_categories.inc"
};

}  // namespace

uint8_t flags(char32_t c) {
  const auto* end = std::end(kCategories);
  const auto* it = std::upper_bound(std::begin(kCategories), end, c,
                                    [](char32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == std::begin(kCategories)) return 0;
  --it;
  return c <= it->last ? it->flags : 0;
}

int sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xC0) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return b < 0xF8 ? 4 : 0;
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int n = sequence_length(b);
    bool ok = n > 0 && i + n <= text.size();
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; ok && k < n; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      ok = is_continuation(next);
      c = (c << 6) | (next & 0x3F);
    }
    ok = ok && c <= 0x10FFFF;
    out.push_back(ok ? c : kReplacement);
    i += ok ? n : 1;
  }
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace kiln::unicode
