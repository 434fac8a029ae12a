// The Unicode that kiln::Tokenizer reads text with (llm/tokenizer.cc, llm/wordpiece.cc): UTF-8
// decoded as llama.cpp decodes it, and the classes of code points that pre-tokenizers split on,
// from tables generated with Python's unicodedata, so that Kiln needs no Unicode library.
#ifndef KILN_LLM_UNICODE_H_
#define KILN_LLM_UNICODE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::unicode {

// The classes of unicode_flags, as bits (llm/unicode_categories.inc):
enum : uint8_t {
  kLetter = 1,       // \p{L}: general categories Lu Ll Lt Lm Lo
  kNumber = 2,       // \p{N}: Nd Nl No
  kPunctuation = 4,  // \p{P}: Pc Pd Ps Pe Pi Pf Po
  kWhitespace = 8,   // \s: the White_Space property
};
uint8_t flags(char32_t c);

inline constexpr char32_t kReplacement = 0xFFFD;

inline bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Bytes in a sequence that starts with lead byte `b`: 1 to 4, 0 for a byte that cannot start
// one. Read as llama.cpp reads it: C0 and C1 start (overlong) two-byte sequences.
int sequence_length(unsigned char b);

// The code points of `text` as llama.cpp decodes them: a byte that does not start a complete
// sequence (a stray continuation byte, F8 to FF, a sequence cut short) becomes U+FFFD, and
// decoding goes on from the next byte. Like llama.cpp, overlong forms and surrogates are taken
// at face value; a value past U+10FFFF (which llama.cpp cannot encode again) is malformed too.
std::u32string decode_utf8(std::string_view text);

void append_utf8(char32_t c, std::string& out);

}  // namespace kiln::unicode

#endif  // KILN_LLM_UNICODE_H_
