// kiln::Tokenizer: small vocabularies built here pin the rules of both BPE models (GPT-2's
// and SentencePiece's), of WordPiece, of reading tokenizer.json, the pre-tokenizers, the
// special tokens, the streaming decoder and every error; on SmolLM2-135M-Instruct (fetched once
// by scripts/fetch-smollm2.sh) Kiln's ids are those of Hugging Face's tokenizers package, an
// independent implementation, built from the same GGUF vocabulary and merges, whether Kiln reads
// the GGUF file or the tokenizer.json that tokenizers saves; on all-MiniLM-L6-v2's
// tokenizer.json (scripts/fetch-minilm.sh), Kiln's WordPiece ids and decoded text are
// tokenizers'; on two small models the sentencepiece package trains, Kiln's ids and decoded
// text are sentencepiece's.
#include "kiln/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/io.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace kiln {
namespace {

using Type = GgufValue::Type;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4;

// GPT-2's character for byte b, written out here independently of llm/tokenizer.cc: printable
// Latin-1 bytes stand for themselves, the others in order for U+0100 onwards.
bool printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

std::string byte_char(int b) {
  int c = b;
  if (!printable(b)) {
    c = 0x100;
    for (int i = 0; i < b; ++i) c += !printable(i);
  }
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

struct Token {
  std::string text;
  int32_t type = kNormal;
};

// A vocabulary whose ids 0-255 are the 256 bytes (id b spells byte b) and 256 onwards `extra`.
GgufFile tiny_vocab(const std::vector<Token>& extra, const std::vector<std::string>& merges,
                    const std::string& pre = "smollm") {
  std::vector<GgufValue> tokens, types, merge_values;
  for (int b = 0; b < 256; ++b) tokens.push_back(GgufValue::string(byte_char(b)));
  types.assign(256, GgufValue::integer(Type::kI32, kNormal));
  for (const Token& t : extra) {
    tokens.push_back(GgufValue::string(t.text));
    types.push_back(GgufValue::integer(Type::kI32, t.type));
  }
  for (const std::string& m : merges) merge_values.push_back(GgufValue::string(m));
  GgufFile f;
  f.metadata["tokenizer.ggml.model"] = GgufValue::string("gpt2");
  f.metadata["tokenizer.ggml.pre"] = GgufValue::string(pre);
  f.metadata["tokenizer.ggml.tokens"] = GgufValue::array(Type::kString, tokens);
  f.metadata["tokenizer.ggml.token_type"] = GgufValue::array(Type::kI32, types);
  f.metadata["tokenizer.ggml.merges"] = GgufValue::array(Type::kString, merge_values);
  return f;
}

std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// Merges join the pair of lowest rank first, and of equal pairs the leftmost.
TEST(TokenizerTest, MergesApplyLowestRankFirstAndLeftmostOnTies) {
  const std::vector<Token> extra{{"ab"}, {"bc"}, {"abc"}, {"aa"}};
  // 256 ab, 257 bc, 258 abc, 259 aa
  const Tokenizer bc_first = Tokenizer::from_gguf(tiny_vocab(extra, {"b c", "a b", "a bc", "a a"}));
  EXPECT_EQ(bc_first.encode("abc"), (std::vector<int32_t>{258}));
  const Tokenizer ab_first = Tokenizer::from_gguf(tiny_vocab(extra, {"a b", "b c", "a bc", "a a"}));
  EXPECT_EQ(ab_first.encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(ab_first.encode("aaa"), (std::vector<int32_t>{259, 'a'}));
  EXPECT_EQ(ab_first.encode("aaaa"), (std::vector<int32_t>{259, 259}));
  EXPECT_EQ(ab_first.token_id("abc"), 258);
  EXPECT_EQ(ab_first.token_id("zz"), -1);
  EXPECT_EQ(ab_first.token_text(256), "ab");
}

// A merge whose result the vocabulary lacks leaves the symbol's bytes, as llama.cpp does.
TEST(TokenizerTest, AMergedSymbolOutsideTheVocabularyFallsBackToItsBytes) {
  const Tokenizer t = Tokenizer::from_gguf(tiny_vocab({}, {"x y"}));
  EXPECT_EQ(t.encode("xy"), bytes_of("xy"));
}

// "smollm" puts every digit in a piece of its own, so no merge joins two digits; "gpt-2"
// keeps a run of digits whole. Both split words from the spaces before them as GPT-2 does.
TEST(TokenizerTest, PreTokenizersSplitDigitsAndWords) {
  const std::vector<Token> extra{{"12"}, {"Ġa"}, {"Ġab"}, {"ab"}};
  const std::vector<std::string> merges{"1 2", "Ġ a", "Ġa b", "a b"};
  const Tokenizer smollm = Tokenizer::from_gguf(tiny_vocab(extra, merges, "smollm"));
  const Tokenizer gpt2 = Tokenizer::from_gguf(tiny_vocab(extra, merges, "gpt-2"));
  EXPECT_EQ(smollm.encode("123"), bytes_of("123"));
  EXPECT_EQ(gpt2.encode("123"), (std::vector<int32_t>{256, '3'}));
  EXPECT_EQ(gpt2.encode("x ab"), (std::vector<int32_t>{'x', 258}));
  // Three spaces before a word: two stay together, the last goes with the word.
  EXPECT_EQ(gpt2.encode("x   ab"), (std::vector<int32_t>{'x', ' ', ' ', 258}));
  // Contractions are lowercase only: "'LL" is an apostrophe and a word.
  EXPECT_EQ(gpt2.encode("ab'll"), (std::vector<int32_t>{259, '\'', 'l', 'l'}));
  EXPECT_EQ(gpt2.encode("ab'LL"), (std::vector<int32_t>{259, '\'', 'L', 'L'}));
}

// Llama 3's regex ("llama-bpe") and Qwen 2's as llama.cpp runs them, on what the comparison
// with the tokenizers package (Llama3AndQwen2MatchHuggingFaceTokenizers) cannot show: digits
// in threes or alone; contractions of either case, but ASCII only ("'ſ" is an apostrophe
// before a word, where Oniguruma's (?i) reads "ſ" as "s"); and llama.cpp's Llama 3 type taking a
// piece that is a token whole (ignore_merges) and wanting BOS, which "dbrx", with the same
// regex, does not. The aliases read as the names they stand for.
TEST(TokenizerTest, Llama3AndQwen2PreTokenizersFollowLlamaCpp) {
  // 256 12, 257 123, 258 Sx, 259 ſ, 260 ſx, 261 xyz (no merge makes it)
  const std::vector<Token> extra{{"12"},
                                 {"123"},
                                 {"Sx"},
                                 {byte_char(0xC5) + byte_char(0xBF)},
                                 {byte_char(0xC5) + byte_char(0xBF) + "x"},
                                 {"xyz"}};
  const std::vector<std::string> merges{"1 2", "12 3", "S x",
                                        byte_char(0xC5) + " " + byte_char(0xBF),
                                        byte_char(0xC5) + byte_char(0xBF) + " x"};
  auto load = [&](const std::string& pre) {
    return Tokenizer::from_gguf(tiny_vocab(extra, merges, pre));
  };
  const Tokenizer llama3 = load("llama-bpe"), qwen2 = load("qwen2"), dbrx = load("dbrx");
  EXPECT_EQ(llama3.encode("1231231"), (std::vector<int32_t>{257, 257, '1'}));
  EXPECT_EQ(qwen2.encode("1231231"), bytes_of("1231231"));
  EXPECT_EQ(dbrx.encode("1231231"), (std::vector<int32_t>{257, 257, '1'}));
  for (const Tokenizer* t : {&llama3, &qwen2}) {
    EXPECT_EQ(t->encode("'Sx"), bytes_of("'Sx"));  // "'S", then "x"
    EXPECT_EQ(t->encode("'sx"), bytes_of("'sx"));
    EXPECT_EQ(t->encode("'\u017Fx"), (std::vector<int32_t>{'\'', 260}));
  }
  // Without the contraction, "'Sx" is one piece, as in GPT-2's lowercase-only regex.
  EXPECT_EQ(load("gpt-2").encode("x'Sx"), (std::vector<int32_t>{'x', '\'', 258}));
  EXPECT_EQ(llama3.encode("xyz"), (std::vector<int32_t>{261}));
  EXPECT_EQ(dbrx.encode("xyz"), bytes_of("xyz"));
  EXPECT_EQ(qwen2.encode("xyz"), bytes_of("xyz"));
  EXPECT_TRUE(llama3.add_bos());
  EXPECT_FALSE(qwen2.add_bos());
  EXPECT_FALSE(dbrx.add_bos());
  GgufFile no_bos = tiny_vocab(extra, merges, "llama-bpe");
  no_bos.metadata["tokenizer.ggml.add_bos_token"] = GgufValue::integer(Type::kBool, 0);
  EXPECT_FALSE(Tokenizer::from_gguf(no_bos).add_bos());
  const std::string text = "xyz 1231231 'Sx";
  for (const char* alias : {"llama3", "llama-v3", "falcon3"}) {
    EXPECT_EQ(load(alias).encode(text), llama3.encode(text)) << alias;
    EXPECT_TRUE(load(alias).add_bos()) << alias;
  }
  EXPECT_EQ(load("smaug-bpe").encode(text), dbrx.encode(text));
  for (const char* alias : {"deepseek-r1-qwen", "stablelm2"}) {
    EXPECT_EQ(load(alias).encode(text), qwen2.encode(text)) << alias;
  }
}

// Bytes that are not UTF-8 each read as U+FFFD, as in llama.cpp.
TEST(TokenizerTest, MalformedUtf8ReadsAsReplacementCharacters) {
  const Tokenizer t = Tokenizer::from_gguf(tiny_vocab({}, {}));
  EXPECT_EQ(t.encode("a\xff"
                     "b"),
            bytes_of("a\xEF\xBF\xBD"
                     "b"));
  EXPECT_EQ(t.encode("\xF0\x9F"
                     "x"),
            bytes_of("\xEF\xBF\xBD\xEF\xBF\xBD"
                     "x"));
}

// Special tokens match literally, longest first; with parse_special false control tokens
// are text but user-defined ones still match.
TEST(TokenizerTest, SpecialTokensMatchLongestFirst) {
  const std::vector<Token> extra{
      {"<|a|>", kControl}, {"<|a|>b", kControl}, {"<u>", kUserDefined}};  // 256 257 258
  const Tokenizer t = Tokenizer::from_gguf(tiny_vocab(extra, {}));
  EXPECT_EQ(t.encode("x<|a|>b<|a|>"), (std::vector<int32_t>{'x', 257, 256}));
  EXPECT_EQ(t.encode("<u><|a|>", false), (std::vector<int32_t>{258, '<', '|', 'a', '|', '>'}));
  EXPECT_TRUE(t.is_control(256));
  EXPECT_FALSE(t.is_control(258));
  EXPECT_FALSE(t.is_control('a'));
  EXPECT_EQ(t.decode({'x', 257, 258}), "x<|a|>b<u>");
}

// Metadata a generate loop reads; BOS is never added by encode.
TEST(TokenizerTest, BosEosAndAddBosComeFromTheMetadata) {
  GgufFile f = tiny_vocab({}, {});
  const Tokenizer bare = Tokenizer::from_gguf(f);
  EXPECT_EQ(bare.bos(), -1);
  EXPECT_EQ(bare.eos(), -1);
  EXPECT_FALSE(bare.add_bos());
  EXPECT_EQ(bare.vocab_size(), 256);
  f.metadata["tokenizer.ggml.bos_token_id"] = GgufValue::integer(Type::kU32, 1);
  f.metadata["tokenizer.ggml.eos_token_id"] = GgufValue::integer(Type::kU32, 2);
  f.metadata["tokenizer.ggml.add_bos_token"] = GgufValue::integer(Type::kBool, 1);
  const Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.encode("a"), (std::vector<int32_t>{'a'}));
}

// The decoder holds the leading bytes of a character until the tokens that complete it come;
// bytes that can never be part of one pass at once; flush gives what is left.
TEST(TokenizerTest, StreamingDecoderHoldsUnfinishedCharacters) {
  const Tokenizer t = Tokenizer::from_gguf(tiny_vocab({}, {}));
  const std::vector<int32_t> emoji = bytes_of("\xF0\x9F\x98\x80");  // U+1F600
  Tokenizer::Decoder d(t);
  EXPECT_EQ(d.push('a'), "a");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.push(emoji[i]), "") << "byte " << i;
  EXPECT_EQ(d.push(emoji[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push(0xFF), "\xFF");
  EXPECT_EQ(d.push(0xE0), "");
  EXPECT_EQ(d.push(0x80), "\xE0\x80");  // E0 80 starts no character: passed, not held
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.flush(), "\xC3");
  EXPECT_EQ(d.flush(), "");
}

TEST(TokenizerTest, ErrorsNameTheKey) {
  auto without = [](const std::string& key) {
    GgufFile f = tiny_vocab({}, {});
    f.metadata.erase(key);
    return f;
  };
  auto with = [](const std::string& key, GgufValue v) {
    GgufFile f = tiny_vocab({}, {"a b"});
    f.metadata[key] = std::move(v);
    return f;
  };
  auto merges = [](const std::vector<std::string>& lines) {
    std::vector<GgufValue> v;
    v.reserve(lines.size());
    for (const auto& l : lines) v.push_back(GgufValue::string(l));
    return GgufValue::array(Type::kString, v);
  };
  using testing::expect_error;
  expect_error([&] { Tokenizer::from_gguf(without("tokenizer.ggml.tokens")); },
               {"[Tokenizer]", "tokenizer.ggml.tokens"});
  expect_error([&] { Tokenizer::from_gguf(without("tokenizer.ggml.merges")); },
               {"[Tokenizer]", "tokenizer.ggml.merges"});
  expect_error([&] { Tokenizer::from_gguf(without("tokenizer.ggml.model")); },
               {"[Tokenizer]", "tokenizer.ggml.model"});
  for (const char* model : {"bert", "t5"}) {
    expect_error(
        [&] { Tokenizer::from_gguf(with("tokenizer.ggml.model", GgufValue::string(model))); },
        {"[Tokenizer]", "tokenizer.ggml.model", "'" + std::string(model) + "'", "not support",
         "'gpt2'", "'llama'"});
  }
  expect_error(
      [&] { Tokenizer::from_gguf(with("tokenizer.ggml.pre", GgufValue::string("qwen9"))); },
      {"[Tokenizer]", "tokenizer.ggml.pre", "'qwen9'", "smollm"});
  expect_error(
      [&] {
        Tokenizer::from_gguf(with("tokenizer.ggml.merges", merges({"a b", "ab"})));
      },
      {"[Tokenizer]", "tokenizer.ggml.merges[1]", "'ab'", "no space"});
  expect_error([&] { Tokenizer::from_gguf(with("tokenizer.ggml.merges", merges({"a zz"}))); },
               {"[Tokenizer]", "tokenizer.ggml.merges[0]", "'zz'", "not a token"});
  expect_error(
      [&] { Tokenizer::from_gguf(with("tokenizer.ggml.tokens", GgufValue::string("a"))); },
      {"[Tokenizer]", "'tokenizer.ggml.tokens' is string", "expected an array of strings"});
  expect_error(
      [&] {
        Tokenizer::from_gguf(
            with("tokenizer.ggml.bos_token_id", GgufValue::integer(Type::kU32, 256)));
      },
      {"[Tokenizer]", "tokenizer.ggml.bos_token_id is 256", "vocabulary size 256"});
  GgufFile duplicate = tiny_vocab({{"a"}}, {});
  expect_error([&] { Tokenizer::from_gguf(duplicate); },
               {"[Tokenizer]", "tokenizer.ggml.tokens", "'a' twice", "97", "256"});
  const Tokenizer t = Tokenizer::from_gguf(tiny_vocab({}, {}));
  expect_error([&] { t.decode({1, 256}); }, {"[Tokenizer]", "decode", "id 256", "[0, 256)"});
  expect_error([&] { t.decode({-1}); }, {"[Tokenizer]", "id -1"});
  Tokenizer::Decoder d(t);
  expect_error([&] { d.push(300); }, {"[Tokenizer]", "Decoder::push", "id 300"});
  expect_error([&] { (void)t.token_text(256); }, {"[Tokenizer]", "token_text", "id 256"});
}

// ---- SentencePiece ("llama") ----

constexpr int32_t kUnknown = 2, kUnused = 5, kByte = 6;

struct Piece {
  std::string text;
  float score = 0;
  int32_t type = kNormal;
};

// A vocabulary laid out as sentencepiece lays one out: <unk> 0, <s> 1, </s> 2, the byte tokens
// "<0x00>" to "<0xFF>" (unless `byte_tokens` is false), then `pieces`.
GgufFile spm_vocab(const std::vector<Piece>& pieces, bool byte_tokens = true) {
  std::vector<Piece> all{{"<unk>", 0, kUnknown}, {"<s>", 0, kControl}, {"</s>", 0, kControl}};
  for (int b = 0; byte_tokens && b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    all.push_back({name, 0, kByte});
  }
  all.insert(all.end(), pieces.begin(), pieces.end());
  std::vector<GgufValue> tokens, scores, types;
  for (const Piece& p : all) {
    tokens.push_back(GgufValue::string(p.text));
    scores.push_back(GgufValue::floating(Type::kF32, p.score));
    types.push_back(GgufValue::integer(Type::kI32, p.type));
  }
  GgufFile f;
  f.metadata["tokenizer.ggml.model"] = GgufValue::string("llama");
  f.metadata["tokenizer.ggml.tokens"] = GgufValue::array(Type::kString, tokens);
  f.metadata["tokenizer.ggml.scores"] = GgufValue::array(Type::kF32, scores);
  f.metadata["tokenizer.ggml.token_type"] = GgufValue::array(Type::kI32, types);
  f.metadata["tokenizer.ggml.bos_token_id"] = GgufValue::integer(Type::kU32, 1);
  f.metadata["tokenizer.ggml.eos_token_id"] = GgufValue::integer(Type::kU32, 2);
  return f;
}

GgufFile without_space_prefix(GgufFile f) {
  f.metadata["tokenizer.ggml.add_space_prefix"] = GgufValue::integer(Type::kBool, 0);
  return f;
}

// The ids of the tokens spelled `texts`.
std::vector<int32_t> ids_of(const Tokenizer& t, const std::vector<std::string>& texts) {
  std::vector<int32_t> ids;
  for (const std::string& text : texts) {
    ids.push_back(t.token_id(text));
    EXPECT_GE(ids.back(), 0) << "no token '" << text << "'";
  }
  return ids;
}

// The adjacent pair whose concatenation has the highest score merges first; of equal pairs,
// the leftmost.
TEST(TokenizerTest, SentencePieceMergesTheHighestScoreFirstAndLeftmostOnTies) {
  auto vocab = [](float ab, float bc) {
    return spm_vocab({{"▁", -10},
                      {"a", -10},
                      {"b", -10},
                      {"c", -10},
                      {"▁a", -3},
                      {"aa", -4},
                      {"ab", ab},
                      {"bc", bc}});
  };
  const Tokenizer bc_first = Tokenizer::from_gguf(vocab(-2, -1));
  EXPECT_EQ(bc_first.encode("abc"), ids_of(bc_first, {"▁a", "bc"}));
  const Tokenizer ab_first = Tokenizer::from_gguf(vocab(-1, -2));
  EXPECT_EQ(ab_first.encode("abc"), ids_of(ab_first, {"▁", "ab", "c"}));
  EXPECT_EQ(ab_first.encode("aaa"), ids_of(ab_first, {"▁a", "aa"}));  // "▁a" scores higher
  const Tokenizer plain = Tokenizer::from_gguf(without_space_prefix(vocab(-1, -2)));
  EXPECT_EQ(plain.encode("aaa"), ids_of(plain, {"aa", "a"}));
  EXPECT_EQ(plain.encode("aaaa"), ids_of(plain, {"aa", "aa"}));
}

// A character without a token is spelled by its bytes' tokens (a byte that is not UTF-8 too);
// a vocabulary without byte tokens gives one unknown token for a run of such characters, as
// sentencepiece does.
TEST(TokenizerTest, SentencePieceFallsBackToByteTokensOrTheUnknownToken) {
  const std::vector<Piece> pieces{{"▁", -1}, {"x", -1}};
  const Tokenizer t = Tokenizer::from_gguf(spm_vocab(pieces));
  EXPECT_EQ(t.encode("xé"), ids_of(t, {"▁", "x", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(t.encode("x\xFF"), ids_of(t, {"▁", "x", "<0xFF>"}));
  EXPECT_EQ(t.encode("x\xE2\x96"), ids_of(t, {"▁", "x", "<0xE2>", "<0x96>"}));  // cut short
  EXPECT_EQ(t.encode("\xC3x"), ids_of(t, {"▁", "<0xC3>", "x"}));  // no continuation byte
  EXPECT_EQ(t.decode(t.encode("xé\xFF x\xE2\x96")), "xé\xFF x\xE2\x96");
  const Tokenizer no_bytes = Tokenizer::from_gguf(spm_vocab(pieces, false));
  EXPECT_EQ(no_bytes.encode("xééx é"), ids_of(no_bytes, {"▁", "x", "<unk>", "x", "▁", "<unk>"}));
  EXPECT_EQ(no_bytes.decode(no_bytes.encode("xé")), "x<unk>");
}

// Merges make normal, user-defined and unused tokens only, as in sentencepiece: text never
// turns into a control token, and a symbol merged into an unused token is its two parts again.
TEST(TokenizerTest, SentencePieceMergesIntoNormalTokensOnly) {
  const std::vector<Piece> pieces{
      {"<", -1}, {"c", -1}, {">", -1}, {"<c", -2},          {"<c>", 0, kControl},
      {"u", -1}, {"v", -1}, {"w", -1}, {"uv", -3, kUnused}, {"uvw", -4}};
  const Tokenizer t = Tokenizer::from_gguf(without_space_prefix(spm_vocab(pieces)));
  EXPECT_EQ(t.encode("<c>", false), ids_of(t, {"<c", ">"}));
  EXPECT_EQ(t.encode("<c>"), ids_of(t, {"<c>"}));
  EXPECT_EQ(t.encode("uvw"), ids_of(t, {"uvw"}));
  EXPECT_EQ(t.encode("uv"), ids_of(t, {"u", "v"}));
}

// With add_space_prefix (true when absent), each run of text between special tokens is
// encoded with a space in front, as llama.cpp does; decode takes that space off again, at the
// start and after a special token only. Without it, runs are encoded as they are.
TEST(TokenizerTest, SentencePieceGivesEachRunOfTextASpacePrefix) {
  const std::vector<Piece> pieces{{"▁", -1},
                                  {"h", -1},
                                  {"i", -1},
                                  {"▁h", -3},
                                  {"▁hi", -2},
                                  {"hi", -4},
                                  {"<u>", 0, kUserDefined}};
  const Tokenizer t = Tokenizer::from_gguf(spm_vocab(pieces));
  EXPECT_EQ(t.encode("hi"), ids_of(t, {"▁hi"}));
  EXPECT_EQ(t.encode(" hi"), ids_of(t, {"▁", "▁hi"}));
  EXPECT_EQ(t.encode("hi<u>hi"), ids_of(t, {"▁hi", "<u>", "▁hi"}));
  EXPECT_EQ(t.encode("<s>hi</s>"), ids_of(t, {"<s>", "▁hi", "</s>"}));
  EXPECT_EQ(t.encode("<s><s>"), ids_of(t, {"<s>", "<s>"}));
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  for (const std::string text : {"hi", " hi", "hi<u>hi", "<s> hi</s>", "hi  hi ", "   "}) {
    EXPECT_EQ(t.decode(t.encode(text)), text);
    EXPECT_EQ(t.decode(t.encode(text, false)), text);
  }
  EXPECT_EQ(t.decode(ids_of(t, {"▁hi", "▁hi"})), "hi hi");
  EXPECT_EQ(t.decode(ids_of(t, {"<u>", "▁hi", "hi", "<s>", "▁hi"})), "<u>hihi<s>hi");
  EXPECT_EQ(t.decode(ids_of(t, {"<0x20>", "▁hi"})), "  hi");  // a byte token is no prefix
  const Tokenizer plain = Tokenizer::from_gguf(without_space_prefix(spm_vocab(pieces)));
  EXPECT_EQ(plain.encode("hi<u>hi"), ids_of(plain, {"hi", "<u>", "hi"}));
  EXPECT_EQ(plain.encode(" hi"), ids_of(plain, {"▁hi"}));
  EXPECT_EQ(plain.decode(ids_of(plain, {"▁hi", "<u>", "▁hi"})), " hi<u> hi");
}

// The streaming decoder follows decode: the space prefix comes off, and an emoji spelled by
// byte tokens comes out whole with its last byte.
TEST(TokenizerTest, SentencePieceStreamsWholeCharacters) {
  const Tokenizer t = Tokenizer::from_gguf(spm_vocab({{"▁", -1}, {"a", -1}, {"▁a", -2}}));
  const std::vector<int32_t> ids = t.encode("a 😀");
  ASSERT_EQ(ids, ids_of(t, {"▁a", "▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}));
  Tokenizer::Decoder d(t);
  EXPECT_EQ(d.push(ids[0]), "a");
  EXPECT_EQ(d.push(ids[1]), " ");
  for (int i = 2; i < 5; ++i) EXPECT_EQ(d.push(ids[i]), "") << "byte " << i - 2;
  EXPECT_EQ(d.push(ids[5]), "😀");
  EXPECT_EQ(d.flush(), "");
  EXPECT_EQ(t.decode(ids), "a 😀");
  // A Decoder that continues shown text (tokens generated after a prompt) keeps the first
  // token's space.
  Tokenizer::Decoder continuing(t, /*continues=*/true);
  EXPECT_EQ(continuing.push(ids[0]), " a");
  EXPECT_EQ(continuing.push(ids[1]), " ");
}

// llama.cpp's defaults for SentencePiece: BOS wanted unless add_bos_token says otherwise. The
// unknown token is the one tokenizer.ggml.unknown_token_id names, else the one of type 2.
TEST(TokenizerTest, SentencePieceMetadataAndDefaults) {
  GgufFile f = spm_vocab({{"▁", -1}});
  const Tokenizer t = Tokenizer::from_gguf(f);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_TRUE(t.is_control(1));
  EXPECT_FALSE(t.is_control(0));
  EXPECT_EQ(t.token_text(3 + 0x41), "<0x41>");
  EXPECT_EQ(t.decode({0, 1, 3 + 0x41, 2}), "<unk><s>A</s>");
  f.metadata["tokenizer.ggml.add_bos_token"] = GgufValue::integer(Type::kBool, 0);
  EXPECT_FALSE(Tokenizer::from_gguf(f).add_bos());
  GgufFile question = spm_vocab({{"▁", -1}, {"?", -1}}, false);
  question.metadata["tokenizer.ggml.unknown_token_id"] = GgufValue::integer(Type::kU32, 4);
  const Tokenizer q = Tokenizer::from_gguf(question);
  EXPECT_EQ(q.encode("é"), ids_of(q, {"▁", "?"}));
}

TEST(TokenizerTest, SentencePieceErrorsNameTheKey) {
  auto with = [](const std::string& key, GgufValue v) {
    GgufFile f = spm_vocab({});
    f.metadata[key] = std::move(v);
    return f;
  };
  auto scores = [](int n) {
    return GgufValue::array(Type::kF32,
                            std::vector<GgufValue>(n, GgufValue::floating(Type::kF32, 0)));
  };
  using testing::expect_error;
  GgufFile unscored = spm_vocab({});
  unscored.metadata.erase("tokenizer.ggml.scores");
  expect_error([&] { Tokenizer::from_gguf(unscored); },
               {"[Tokenizer]", "tokenizer.ggml.scores", "SentencePiece"});
  expect_error([&] { Tokenizer::from_gguf(with("tokenizer.ggml.scores", scores(2))); },
               {"[Tokenizer]", "tokenizer.ggml.scores has 2 entries", "one per token (259)"});
  expect_error([&] { Tokenizer::from_gguf(with("tokenizer.ggml.scores", scores(260))); },
               {"[Tokenizer]", "tokenizer.ggml.scores has 260 entries"});
  expect_error(
      [&] {
        Tokenizer::from_gguf(with("tokenizer.ggml.scores",
                                  GgufValue::array(Type::kString, {GgufValue::string("1")})));
      },
      {"[Tokenizer]", "'tokenizer.ggml.scores' is array of string", "expected an array of floats"});
  expect_error(
      [&] {
        Tokenizer::from_gguf(with("tokenizer.ggml.add_space_prefix", GgufValue::string("no")));
      },
      {"[Tokenizer]", "'tokenizer.ggml.add_space_prefix' is string", "a bool"});
  expect_error(
      [&] {
        Tokenizer::from_gguf(
            with("tokenizer.ggml.unknown_token_id", GgufValue::integer(Type::kU32, 999)));
      },
      {"[Tokenizer]", "tokenizer.ggml.unknown_token_id is 999", "vocabulary size 259"});
}

// ---- SmolLM2-135M-Instruct ----

// Lines with what the tests watch for: accents, CJK, Cyrillic and other scripts, emoji of one
// to several code points, digits, runs of spaces, tabs and newlines, contractions, and the
// chat template's special tokens.
constexpr const char* kChatPrompt =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines{
      "Hello, world!",
      "héllo wörld café naïve Ångström façade",
      "日本語のテキスト 中文字符 한국어 텍스트",
      "Привет, мир! Съешь же ещё этих мягких французских булок.",
      "مرحبا بالعالم · नमस्ते दुनिया · สวัสดีชาวโลก",
      "emoji 😀👍🏽 🇫🇷 👨‍👩‍👧 🧑‍💻 ✨",
      "12345",
      "3.14",
      "pi is 3.14159, e is 2.71828; 1,000,000 and ٣٤٥ and ²",
      "a   b",
      "\n\n",
      "tab\there\t\tand\t",
      "trailing spaces   ",
      "   leading spaces",
      "line one\nline two\r\n\r\nline three \n",
      "don't I'LL we've she'd they're it's O'Neil",
      "<|im_start|>user\nhi<|im_end|>",
      kChatPrompt,
      "<|endoftext|><|im_end|><|im_start|><|im_",
      "no\u00a0break and\u3000ideographic\u2003em space",
      "e\u0301 combining, \u200bzero width, \ufeffBOM",
      "int main() { return x->y[3] * 2; }  // comment",
      "$100 + 5% = <<~~|^^|~~>>",
      "Wait... what?!?! ---- ____ ====",
      "",
      " ",
  };
  return lines;
}

// The corpus, and each paragraph of docs/llm.md as longer running text.
std::vector<std::string> corpus_and_docs() {
  std::vector<std::string> out = corpus();
  std::stringstream doc;
  doc << std::ifstream(std::string(KILN_SOURCE_DIR) + "/docs/llm.md").rdbuf();
  const std::string text = doc.str();
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find("\n\n", begin), text.size());
    out.push_back(text.substr(begin, end - begin));
    begin = end + 2;
  }
  return out;
}

class TokenizerModelTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::string failure;
    file_ = testing::fetch_smollm2(&failure);
    ASSERT_FALSE(file_.empty()) << failure;
  }

  Tokenizer load() const { return Tokenizer::from_gguf(load_gguf(file_)); }

  // The ids of each line from the tokenizers package: with special tokens matched
  // ("special") and as plain text ("plain"). The tokenizer is saved too, as tokenizers saves
  // it (tokenizer.json: merges as ["left", "right"] pairs) and with the merges as "left right"
  // strings, as older files have them (tokenizer-merge-strings.json). With a `regex`, the
  // pre-tokenizer is a Split on it and ByteLevel without its regex, as Llama 3's and Qwen 2's
  // tokenizer.json have it, the BPE model takes `ignore_merges`, and the vocabulary grows by
  // the tokens and merges of extra.json (below); without, it is SmolLM2's.
  std::map<std::string, std::vector<std::vector<int32_t>>> reference(
      const std::vector<std::string>& lines, const std::string& regex = "",
      bool ignore_merges = false) {
    std::ofstream(path("corpus.json")) << nlohmann::json(lines).dump();
    const std::string script =
        "MODEL = '" + file_ +
        "'\nREGEX = " + (regex.empty() ? "None" : nlohmann::json(regex).dump()) +
        "\nIGNORE_MERGES = " + (ignore_merges ? "True" : "False") + "\n" + R"(
import json, gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
r = gguf.GGUFReader(MODEL)
tokens = r.fields['tokenizer.ggml.tokens'].contents()
types = r.fields['tokenizer.ggml.token_type'].contents()
merges = [tuple(m.split(' ', 1)) for m in r.fields['tokenizer.ggml.merges'].contents()]
vocab = {s: i for i, s in enumerate(tokens)}
lines = json.load(open('corpus.json', encoding='utf-8'))
def pre_tokenizer():
    if REGEX is None:
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(REGEX), behavior='isolated'),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
if REGEX is not None:
    # SmolLM2's merges never cross where its own pre-tokenizer cuts (between digits, before a
    # newline after punctuation), so a piece cut there or not would give the same ids. Merges
    # ranked after SmolLM2's join the tokens of each piece of the lines into one token, and
    # then each two pieces that follow each other, so that a piece cut shorter or longer gives
    # other ids.
    base = Tokenizer(models.BPE(dict(vocab), list(merges)))
    base.pre_tokenizer = pre_tokenizer()
    known, extra = set(merges), []
    def join(left, right):
        if (left, right) not in known:
            known.add((left, right))
            merges.append((left, right))
            extra.append(left + ' ' + right)
        vocab.setdefault(left + right, len(vocab))
        return left + right
    pieces = [[p for p, _ in base.pre_tokenizer.pre_tokenize_str(s)] for s in lines]
    for piece in (p for line in pieces for p in line):
        parts = [p.value for p in base.model.tokenize(piece)]
        left = parts[0]
        for right in parts[1:]:
            left = join(left, right)
    for line in pieces:
        for left, right in zip(line, line[1:]):
            join(left, right)
    json.dump({'tokens': list(vocab)[len(tokens):], 'merges': extra},
              open('extra.json', 'w', encoding='utf-8'))
t = Tokenizer(models.BPE(vocab, merges, ignore_merges=IGNORE_MERGES))
t.pre_tokenizer = pre_tokenizer()
t.decoder = decoders.ByteLevel()
t.add_special_tokens([AddedToken(s, special=True, normalized=False)
                      for s, k in zip(tokens, types) if k == 3])
t.save('tokenizer.json')
saved = json.load(open('tokenizer.json', encoding='utf-8'))
saved['model']['merges'] = [' '.join(m) for m in saved['model']['merges']]
json.dump(saved, open('tokenizer-merge-strings.json', 'w', encoding='utf-8'))
ids = {}
for mode, as_text in (('special', False), ('plain', True)):
    t.encode_special_tokens = as_text
    ids[mode] = [t.encode(s, add_special_tokens=False).ids for s in lines]
json.dump(ids, open('ids.json', 'w'))
)";
    const testing::Result r = testing::run_python_tools(script, path(""));
    EXPECT_EQ(r.exit_code, 0) << r.output << "\n(the tokenizers package comes from "
                              << "scripts/install-deps.sh)";
    if (r.exit_code != 0) return {};
    return nlohmann::json::parse(std::ifstream(path("ids.json")))
        .get<std::map<std::string, std::vector<std::vector<int32_t>>>>();
  }

  static std::vector<std::string> lines() { return corpus_and_docs(); }

  std::string file_;
};

// Ids llama.cpp (the cyllama wheel) gives on this file, pinned without Python.
TEST_F(TokenizerModelTest, SmolLM2GivesLlamaCppsIds) {
  const Tokenizer t = load();
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_control(2));
  EXPECT_EQ(t.token_text(2), "<|im_end|>");
  EXPECT_EQ(t.encode("Hello, world!"), (std::vector<int32_t>{19556, 28, 905, 17}));
  EXPECT_EQ(t.encode("12345"), (std::vector<int32_t>{33, 34, 35, 36, 37}));
  EXPECT_EQ(t.encode("3.14"), (std::vector<int32_t>{35, 30, 33, 36}));
  EXPECT_EQ(t.encode("a   b"), (std::vector<int32_t>{81, 256, 278}));
  EXPECT_EQ(t.encode("don't I'LL"), (std::vector<int32_t>{12420, 982, 339, 23, 16421}));
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>"),
            (std::vector<int32_t>{1, 4093, 198, 6004, 2}));
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>", false),
            (std::vector<int32_t>{44, 108, 306, 79, 3738, 108, 46, 4093, 198, 6004, 44, 108, 306,
                                  79, 486, 108, 46}));
  EXPECT_EQ(t.encode("emoji 😀"), (std::vector<int32_t>{391, 33777, 40303, 218}));
  EXPECT_EQ(t.encode("Привет, мир!"),
            (std::vector<int32_t>{155, 249, 46879, 16464, 32547, 28, 41337, 7872, 9175, 17}));
  EXPECT_EQ(t.encode("tab\there\t\t"), (std::vector<int32_t>{15999, 197, 1531, 1656}));
  EXPECT_EQ(t.encode("trailing  "), (std::vector<int32_t>{4861, 4966, 256}));
}

TEST_F(TokenizerModelTest, SmolLM2MatchesHuggingFaceTokenizers) {
  const Tokenizer t = load();
  const std::vector<std::string> text = lines();
  auto want_by_mode = reference(text);
  for (bool parse_special : {true, false}) {
    const std::vector<std::vector<int32_t>>& want =
        want_by_mode[parse_special ? "special" : "plain"];
    ASSERT_EQ(want.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      EXPECT_EQ(t.encode(text[i], parse_special), want[i])
          << "line " << i << " '" << text[i] << "', parse_special " << parse_special;
    }
  }
}

// The corpus, and lines for where Llama 3's and Qwen 2's regexes part from GPT-2's: runs of 1 to
// 7 digits (ASCII, Arabic-Indic, Devanagari, fullwidth), contractions in upper case, "\r\n" and
// runs of newlines, spaces before newlines, punctuation before newlines, a word after one
// character that is not a letter, other scripts, emoji, and whitespace beyond ASCII.
std::vector<std::string> llama3_lines() {
  std::vector<std::string> out = corpus_and_docs();
  for (const char* line : {
           "1 12 123 1234 12345 123456 1234567",
           "x1234567y 3.14159 v1.2.3 $100,000.00 12abc34 abc12",
           "\u0661\u0662\u0663\u0664\u0665\u0666\u0667 \u0663\u0664 "
           "\u0967\u0968\u0969\u096A\u096B \uFF12\uFF10\uFF12\uFF14\u5E74",
           "IT'S HE'LL WE'VE THEY'RE I'M SHE'D DON'T 'S 'LL 'Ve 'rE it's",
           "IT'SELF HE'LLO WE'VEN THEY'REAL I'MAGINE SHE'DO DON'TS O'NEIL",
           "line\r\nline\r\n\r\nend\n\n\nx\n\n\n",
           "spaces  \n  before\t\n\nnewlines   \r\n  \n end",
           "Wait!!\n\nwhat?\r\n...\n   ---\n\n (ok)\n",
           "$hello (world) #tag @user 'quoted' \"dq\" _under -dash",
           "\u0928\u092E\u0938\u094D\u0924\u0947 \u0926\u0941\u0928\u093F\u092F\u093E "
           "\u4E2D\u6587123\u5B57\u7B26 \u65E5\u672C\u8A9E",
           "emoji \U0001F600\U0001F600 \U0001F44D\U0001F3FD\U0001F44D \U0001F1EB\U0001F1F7!\n"
           "\U0001F9D1\u200D\U0001F4BB \u2728\u2728\u2728 done",
           "a\u00A0b\u3000c \u2028d\u0085e\u00A0\u00A0 f",
           "tab\thello\t\t(x)\t \n\tx",
       }) {
    out.push_back(line);
  }
  return out;
}

// SmolLM2's vocabulary with tokenizer.ggml.pre "llama-bpe" or "qwen2", and the tokens and
// merges that join each piece of the lines whole (see reference): Kiln's ids are those of the
// tokenizers package with the regex as a Split (and, for Llama 3, ignore_merges).
TEST_F(TokenizerModelTest, Llama3AndQwen2MatchHuggingFaceTokenizers) {
  constexpr const char* kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  constexpr const char* kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::vector<std::string> text = llama3_lines();
  for (const auto& [pre, regex] : {std::pair{"llama-bpe", kLlama3}, std::pair{"qwen2", kQwen2}}) {
    auto want_by_mode = reference(text, regex, std::string(pre) == "llama-bpe");
    const nlohmann::json extra = nlohmann::json::parse(std::ifstream(path("extra.json")));
    ASSERT_FALSE(extra["merges"].empty()) << pre;
    GgufFile file = load_gguf(file_);
    file.metadata["tokenizer.ggml.pre"] = GgufValue::string(pre);
    auto append = [&](const std::string& key, const std::vector<GgufValue>& more) {
      const Type type = file.metadata.at(key).element_type();
      std::vector<GgufValue> values = file.metadata.at(key).as_array();
      values.insert(values.end(), more.begin(), more.end());
      file.metadata[key] = GgufValue::array(type, std::move(values));
    };
    std::vector<GgufValue> tokens, merges, types;
    const Type type_type = file.metadata.at("tokenizer.ggml.token_type").element_type();
    for (const std::string token : extra["tokens"]) {
      tokens.push_back(GgufValue::string(token));
      types.push_back(GgufValue::integer(type_type, kNormal));
    }
    for (const std::string merge : extra["merges"]) merges.push_back(GgufValue::string(merge));
    append("tokenizer.ggml.tokens", tokens);
    append("tokenizer.ggml.token_type", types);
    append("tokenizer.ggml.merges", merges);
    const Tokenizer t = Tokenizer::from_gguf(file);
    for (bool parse_special : {true, false}) {
      const std::vector<std::vector<int32_t>>& want =
          want_by_mode[parse_special ? "special" : "plain"];
      ASSERT_EQ(want.size(), text.size()) << pre;
      for (size_t i = 0; i < text.size(); ++i) {
        EXPECT_EQ(t.encode(text[i], parse_special), want[i])
            << pre << " line " << i << " '" << text[i] << "', parse_special " << parse_special;
      }
    }
  }
}

bool is_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80                ? 1
                  : b >= 0xC2 && b < 0xE0 ? 2
                  : b >= 0xE0 && b < 0xF0 ? 3
                  : b >= 0xF0 && b < 0xF5 ? 4
                                          : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// decode inverts encode, and the streaming decoder, fed one id at a time, gives only whole
// characters whose concatenation is the text ("emoji 😀" ends in a token holding the emoji's
// first three bytes and one holding its last).
TEST_F(TokenizerModelTest, SmolLM2DecodesWhatItEncodes) {
  const Tokenizer t = load();
  for (const std::string& line : lines()) {
    SCOPED_TRACE("'" + line + "'");
    const std::vector<int32_t> ids = t.encode(line);
    EXPECT_EQ(t.decode(ids), line);
    EXPECT_EQ(t.decode(t.encode(line, false)), line);
    Tokenizer::Decoder stream(t);
    std::string joined;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(is_utf8(piece)) << "after id " << id;
      joined += piece;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, line);
  }
  Tokenizer::Decoder stream(t);
  EXPECT_EQ(stream.push(40303), " ");  // " \xF0\x9F\x98"
  EXPECT_EQ(stream.push(218), "😀");    // "\x80"
}

// The tokenizer the reference builds from SmolLM2's GGUF vocabulary, as tokenizers saves it
// to tokenizer.json (pre_tokenizer a Sequence of Digits and ByteLevel, as SmolLM2's own file
// has it): Kiln reads it onto the same "smollm" tokenizer, so its ids are tokenizers' and
// from_gguf's, with merges as pairs or as strings.
TEST_F(TokenizerModelTest, SmolLM2TokenizerJsonGivesTheIdsOfTheGgufAndOfTokenizers) {
  const Tokenizer gguf = load();
  const std::vector<std::string> text = lines();
  auto want_by_mode = reference(text);
  for (const std::string file : {"tokenizer.json", "tokenizer-merge-strings.json"}) {
    const Tokenizer t = Tokenizer::from_tokenizer_json(path(file));
    EXPECT_EQ(t.vocab_size(), gguf.vocab_size()) << file;
    EXPECT_TRUE(t.is_control(2)) << file;
    EXPECT_EQ(t.token_text(2), "<|im_end|>");
    EXPECT_EQ(t.bos(), -1);
    EXPECT_FALSE(t.add_bos());
    for (bool parse_special : {true, false}) {
      const std::vector<std::vector<int32_t>>& want =
          want_by_mode[parse_special ? "special" : "plain"];
      ASSERT_EQ(want.size(), text.size());
      for (size_t i = 0; i < text.size(); ++i) {
        SCOPED_TRACE(file + " line " + std::to_string(i) + " '" + text[i] + "', parse_special " +
                     std::to_string(parse_special));
        const std::vector<int32_t> ids = t.encode(text[i], parse_special);
        EXPECT_EQ(ids, want[i]);
        EXPECT_EQ(ids, gguf.encode(text[i], parse_special));
        EXPECT_EQ(t.decode(ids), text[i]);
      }
    }
  }
}

// A Tokenizer is immutable: threads encoding at once get what one thread gets.
TEST_F(TokenizerModelTest, SmolLM2EncodesOnSeveralThreadsAtOnce) {
  const Tokenizer t = load();
  const std::vector<std::string> text = lines();
  std::vector<std::vector<int32_t>> want;
  want.reserve(text.size());
  for (const std::string& line : text) want.push_back(t.encode(line));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < text.size(); ++i) mismatches[k] += t.encode(text[i]) != want[i];
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// ---- A SentencePiece model trained by the sentencepiece package ----

// The script trains two small BPE models with sentencepiece, the reference implementation for
// TinyLlama, Llama 2, Mistral and Gemma, and writes each to GGUF with the gguf package, as
// llama.cpp's converter does: "prefix" set up as Llama 2's tokenizer is (byte fallback, a space
// prefix, no normalization, digits split), and "no_prefix" without the space prefix (as Gemma's
// files say) and without byte tokens. sentencepiece does not match special tokens in the text,
// so the script matches them as llama.cpp does (control, user-defined and unknown tokens, the
// leftmost then the longest; user-defined ones alone for parse_special false) and sentencepiece
// encodes each run of text between them, with its own space prefix. It gives the ids of every
// line of corpus.json, and sentencepiece's decode of them.
constexpr const char* kSentencePieceScript = R"PY(
import io, json, gguf, sentencepiece as spm

TRAIN = [
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time there was a little robot who loved to read books.",
    "She said that they're going to the market, but we've already been there.",
    "I don't think it's going to rain today; I'll take my umbrella anyway.",
    "Numbers like 12345, 3.14159 and 2024 appear in text all the time.",
    "Café, naïve, façade, résumé and Ångström keep their accents.",
    "Über die Brücke gehen wir morgen früh um acht Uhr.",
    "日本語のテキストと中文字符が混ざっています。",
    "我们今天去公园散步，天气很好。",
    "Emoji like 😀 and 👍 and ✨ show up in chat messages 😀.",
    "Two  spaces,   three spaces,    and four spaces between words.",
    "   indented text, and text with spaces after it   ",
    "Call <tool> with the arguments, then read [SEP] the answer.",
    "A tab\tseparated\tline with tabs.",
]
USER_DEFINED = ["<tool>", "[SEP]"]
CONTROL = ["<|im_start|>", "<|im_end|>"]

def train(add_dummy_prefix, byte_fallback, vocab_size):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAIN * 8), model_writer=model, model_type="bpe",
        vocab_size=vocab_size, hard_vocab_limit=False, byte_fallback=byte_fallback,
        character_coverage=1.0, add_dummy_prefix=add_dummy_prefix,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True,
        user_defined_symbols=USER_DEFINED, control_symbols=CONTROL,
        num_threads=1, shuffle_input_sentence=False, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())

def token_type(sp, i):  # tokenizer.ggml.token_type, as llama.cpp's converter maps them
    if sp.is_unknown(i): return 2
    if sp.is_control(i): return 3
    if sp.id_to_piece(i) in USER_DEFINED: return 4
    if sp.is_unused(i): return 5
    if sp.is_byte(i): return 6
    return 1

def write_gguf(sp, path, add_space_prefix):
    n = sp.get_piece_size()
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types([token_type(sp, i) for i in range(n)])
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

def encode(sp, text, parse_special):
    kinds = (2, 3, 4) if parse_special else (4,)
    specials = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                if token_type(sp, i) in kinds]
    ids, plain, i = [], 0, 0
    while i < len(text):
        found = [s for s in specials if text.startswith(s, i)]
        if not found:
            i += 1
            continue
        if plain < i: ids += sp.encode(text[plain:i])
        best = max(found, key=len)
        ids.append(sp.piece_to_id(best))
        i += len(best)
        plain = i
    if plain < len(text): ids += sp.encode(text[plain:])
    return ids

lines = json.load(open("corpus.json", encoding="utf-8"))
out = {}
for name, prefix, size in (("prefix", True, 700), ("no_prefix", False, 400)):
    sp = train(prefix, prefix, size)
    write_gguf(sp, name + ".gguf", prefix)
    out[name] = {"vocab": sp.get_piece_size()}
    for mode, parse_special in (("special", True), ("plain", False)):
        ids = [encode(sp, s, parse_special) for s in lines]
        out[name][mode] = ids
        out[name][mode + " decoded"] = [sp.decode(i) for i in ids]
json.dump(out, open("ids.json", "w"))
)PY";

class TokenizerSentencePieceTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::ofstream(path("corpus.json")) << nlohmann::json(lines()).dump();
    const testing::Result r = testing::run_python_tools(kSentencePieceScript, path(""));
    ASSERT_EQ(r.exit_code, 0) << r.output << "\n(the sentencepiece and gguf packages come from "
                              << "scripts/install-deps.sh)";
    want_ = nlohmann::json::parse(std::ifstream(path("ids.json")));
  }

  // SmolLM2's corpus, and lines for what is particular to SentencePiece: the user-defined
  // tokens, "<unk>" and "<s>" in the text, characters the training text lacks (byte fallback),
  // and spaces at the ends.
  static std::vector<std::string> lines() {
    std::vector<std::string> out = corpus();
    for (const char* line :
         {"The robot reads a book about foxes and dogs.", "x<tool>y", "<tool> [SEP] <tool>",
          "[SEP]", "<unk> and <s></s>", "🦙", "x🦙", "Жук  жужжит ", "  two leading",
          "trailing  ", "   ", "<|im_start|> spaced <|im_end|> ", "a\u2581b ▁"}) {
      out.push_back(line);
    }
    return out;
  }

  Tokenizer load(const std::string& name) const {
    return Tokenizer::from_gguf(load_gguf(path(name + ".gguf")));
  }

  std::vector<std::vector<int32_t>> ids(const std::string& name, bool parse_special) const {
    return want_[name][parse_special ? "special" : "plain"]
        .get<std::vector<std::vector<int32_t>>>();
  }

  std::vector<std::string> decoded(const std::string& name, bool parse_special) const {
    return want_[name][parse_special ? "special decoded" : "plain decoded"]
        .get<std::vector<std::string>>();
  }

  nlohmann::json want_;
};

// Kiln's ids are sentencepiece's, id for id, with special tokens matched and as plain text.
// The counts make sure the lines exercise byte fallback, special tokens and unknown tokens.
TEST_F(TokenizerSentencePieceTest, MatchesTheSentencepiecePackage) {
  const std::vector<std::string> text = lines();
  for (const std::string name : {"prefix", "no_prefix"}) {
    const Tokenizer t = load(name);
    EXPECT_EQ(t.vocab_size(), want_[name]["vocab"].get<int64_t>()) << name;
    EXPECT_TRUE(t.add_bos()) << name;  // absent from the file: llama.cpp's default
    EXPECT_EQ(t.bos(), 1);
    EXPECT_EQ(t.eos(), 2);
    std::map<std::string, int> seen;
    for (bool parse_special : {true, false}) {
      const std::vector<std::vector<int32_t>> want = ids(name, parse_special);
      ASSERT_EQ(want.size(), text.size());
      for (size_t i = 0; i < text.size(); ++i) {
        EXPECT_EQ(t.encode(text[i], parse_special), want[i])
            << name << " line " << i << " '" << text[i] << "', parse_special " << parse_special;
        for (int32_t id : want[i]) {
          const std::string& s = t.token_text(id);
          seen[s.starts_with("<0x") ? "byte" : t.is_control(id) ? "control" : s] += 1;
        }
      }
    }
    if (name == "prefix") {
      EXPECT_GT(seen["byte"], 50);
      EXPECT_GT(seen["control"], 5);
      EXPECT_GT(seen["<tool>"], 2);
    } else {
      EXPECT_EQ(seen["byte"], 0);
      EXPECT_GT(seen["<unk>"], 10);
    }
  }
}

// decode gives the text back wherever the ids can hold it (no unknown token, no "▁" in the
// text), and, where no special token is among the ids, what sentencepiece's decode gives. The
// streaming decoder gives the same, in whole characters.
TEST_F(TokenizerSentencePieceTest, DecodesLikeTheSentencepiecePackage) {
  const std::vector<std::string> text = lines();
  for (const std::string name : {"prefix", "no_prefix"}) {
    const Tokenizer t = load(name);
    const std::vector<int32_t> specials = ids_of(t, {"<unk>", "<tool>", "[SEP]"});
    for (bool parse_special : {true, false}) {
      const std::vector<std::string> want = decoded(name, parse_special);
      ASSERT_EQ(want.size(), text.size());
      for (size_t i = 0; i < text.size(); ++i) {
        SCOPED_TRACE(name + " line " + std::to_string(i) + " '" + text[i] + "', parse_special " +
                     std::to_string(parse_special));
        const std::vector<int32_t> ids = t.encode(text[i], parse_special);
        const bool unknown = std::count(ids.begin(), ids.end(), t.token_id("<unk>")) > 0;
        const bool special = std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
          return t.is_control(id) || std::count(specials.begin(), specials.end(), id) > 0;
        });
        if (!unknown && text[i].find("▁") == std::string::npos) {
          EXPECT_EQ(t.decode(ids), text[i]);
        }
        if (!special) {
          EXPECT_EQ(t.decode(ids), want[i]);
        }
        Tokenizer::Decoder stream(t);
        std::string joined;
        for (int32_t id : ids) {
          const std::string piece = stream.push(id);
          EXPECT_TRUE(is_utf8(piece)) << "after id " << id;
          joined += piece;
        }
        EXPECT_EQ(joined + stream.flush(), t.decode(ids));
      }
    }
  }
}

// 🦙 is not in the training text, so four byte tokens spell it; the streaming decoder holds
// them until the last one. The space prefix before it comes off.
TEST_F(TokenizerSentencePieceTest, StreamsAnEmojiSpelledByByteTokens) {
  const Tokenizer t = load("prefix");
  const std::vector<int32_t> ids = t.encode("🦙");
  EXPECT_EQ(ids, ids_of(t, {"▁", "<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}));
  ASSERT_EQ(ids.size(), 5u);
  Tokenizer::Decoder stream(t);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stream.push(ids[i]), "") << "id " << i;
  EXPECT_EQ(stream.push(ids[4]), "🦙");
  EXPECT_EQ(stream.flush(), "");
}

// ---- tokenizer.json ----

using Json = nlohmann::json;

// tiny_vocab's vocabulary as a tokenizer.json: byte-level BPE, ids 0-255 the bytes, then
// `extra` (control tokens added as special, user-defined ones as not), merges as "left right"
// strings or as ["left", "right"] pairs. "smollm" is SmolLM2's pre-tokenizer, "gpt-2" GPT-2's.
Json bpe_json(const std::vector<Token>& extra, const std::vector<std::string>& merges, bool pairs,
              const std::string& pre = "smollm") {
  Json vocab = Json::object(), added = Json::array(), merge_list = Json::array();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  for (size_t i = 0; i < extra.size(); ++i) {
    const int id = 256 + static_cast<int>(i);
    vocab[extra[i].text] = id;
    if (extra[i].type == kNormal) continue;
    added.push_back({{"id", id},
                     {"content", extra[i].text},
                     {"special", extra[i].type == kControl},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false}});
  }
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    merge_list.push_back(pairs ? Json::array({m.substr(0, space), m.substr(space + 1)}) : Json(m));
  }
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  const Json digits = {{"type", "Digits"}, {"individual_digits", true}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           pre == "gpt-2" ? byte_level
                          : Json{{"type", "Sequence"}, {"pretokenizers", {digits, byte_level}}}},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

// A WordPiece tokenizer.json as BERT's uncased one is laid out, over a few tokens.
Json wordpiece_json() {
  const std::vector<std::string> tokens{
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", ",",
      "!",     "cafe",  "##s",   "中",    "a",  "##a",   ".",      "Hello", "é",
      "k",     "ᄒ",    "##ᅡ",  "##ᆫ",  "$",  "##'s",  "'",      "s"};
  Json vocab = Json::object(), added = Json::array();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  for (int id : {0, 1, 2, 3}) {
    added.push_back({{"id", id},
                     {"content", tokens[id]},
                     {"special", true},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false}});
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100},
            {"vocab", vocab}}}};
}

class TokenizerJsonTest : public testing::ScratchDirTest {
 protected:
  Tokenizer load(const Json& json) const {
    std::ofstream(path("tokenizer.json")) << json.dump();
    return Tokenizer::from_tokenizer_json(path("tokenizer.json"));
  }
};

// A byte-level BPE tokenizer.json reads onto the tokenizer from_gguf makes of the same
// vocabulary: the same merges, pre-tokenizers, special tokens (added tokens marked special are
// control tokens, the others user-defined), decoding and ids, with merges of either form.
TEST_F(TokenizerJsonTest, ByteLevelBpeEncodesAsTheSameGgufVocabulary) {
  const std::vector<Token> extra{{"ab"},
                                 {"bc"},
                                 {"abc"},
                                 {"aa"},
                                 {"12"},
                                 {"Ġa"},
                                 {"Ġab"},
                                 {"<|a|>", kControl},
                                 {"<|a|>b", kControl},
                                 {"<u>", kUserDefined}};
  const std::vector<std::string> merges{"1 2", "b c", "a b", "a bc", "a a", "Ġ a", "Ġa b"};
  const std::vector<std::string> texts{"abc",   "aaaa",         "123",      "x   ab", "ab'll",
                                       "ab'LL", "x<|a|>b<|a|>", "<u><|a|>", "a\xff!", "😀 ab",
                                       ""};
  for (const std::string pre : {"smollm", "gpt-2"}) {
    const Tokenizer gguf = Tokenizer::from_gguf(tiny_vocab(extra, merges, pre));
    for (bool pairs : {false, true}) {
      const Tokenizer t = load(bpe_json(extra, merges, pairs, pre));
      EXPECT_EQ(t.vocab_size(), gguf.vocab_size());
      for (const std::string& text : texts) {
        for (bool parse_special : {true, false}) {
          EXPECT_EQ(t.encode(text, parse_special), gguf.encode(text, parse_special))
              << pre << " '" << text << "' pairs " << pairs << " parse_special " << parse_special;
        }
        if (is_utf8(text)) EXPECT_EQ(t.decode(t.encode(text)), text);
      }
      EXPECT_TRUE(t.is_control(256 + 7));
      EXPECT_FALSE(t.is_control(256 + 9));
      EXPECT_EQ(t.encode("<u><|a|>", false), (std::vector<int32_t>{265, '<', '|', 'a', '|', '>'}));
      EXPECT_EQ(t.bos(), -1);
      EXPECT_EQ(t.eos(), -1);
      EXPECT_FALSE(t.add_bos());
    }
  }
  // Added tokens may have ids past model.vocab's.
  Json more = bpe_json({}, {}, true);
  more["added_tokens"].push_back({{"id", 256}, {"content", "<|end|>"}, {"special", true}});
  const Tokenizer t = load(more);
  EXPECT_EQ(t.vocab_size(), 257);
  EXPECT_EQ(t.encode("a<|end|>"), (std::vector<int32_t>{'a', 256}));
  EXPECT_TRUE(t.is_control(256));
}

// BertNormalizer, BertPreTokenizer and WordPiece: lowercase and accents stripped (strip_accents
// null follows lowercase), CJK ideographs and punctuation alone, control characters dropped, the
// longest piece first, a word that does not split (or is too long) one [UNK]; the added tokens
// match before normalizing. encode adds no [CLS] or [SEP].
TEST_F(TokenizerJsonTest, WordPieceTakesTheLongestPieceFirst) {
  const Tokenizer t = load(wordpiece_json());
  auto ids = [&](const std::vector<std::string>& texts) { return ids_of(t, texts); };
  EXPECT_EQ(t.encode("UnAffable, Hello!"), ids({"un", "##aff", "##able", ",", "hello", "!"}));
  EXPECT_EQ(t.encode("Cafés CAFÉ"), ids({"cafe", "##s", "cafe"}));
  EXPECT_EQ(t.encode("中文"), ids({"中", "[UNK]"}));
  EXPECT_EQ(t.encode("unxyz hello"), ids({"[UNK]", "hello"}));  // never "un" [UNK]
  EXPECT_EQ(t.encode("hel\x01lo\t\u00a0hello\u200b"), ids({"hello", "hello"}));
  EXPECT_EQ(t.encode("\xE2\x84\xAA"), ids({"k"}));         // KELVIN SIGN lowercases to "k"
  EXPECT_EQ(t.encode("한"), ids({"ᄒ", "##ᅡ", "##ᆫ"}));  // a Hangul syllable is its jamo
  EXPECT_EQ(t.encode("$'s"), ids({"$", "'", "s"}));        // ASCII symbols are punctuation
  EXPECT_EQ(t.encode("[CLS] hello[SEP]"), ids({"[CLS]", "hello", "[SEP]"}));
  EXPECT_EQ(t.encode("[CLS]", false), ids({"[UNK]", "[UNK]", "[UNK]"}));  // "[", "cls", "]"
  EXPECT_EQ(t.encode(std::string(100, 'a')).size(), 100u);
  EXPECT_EQ(t.encode(std::string(101, 'a')), ids({"[UNK]"}));
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(t.vocab_size(), 26);
  EXPECT_TRUE(t.is_control(t.token_id("[CLS]")));
  EXPECT_FALSE(t.is_control(t.token_id("[UNK]")));  // the unknown token
  EXPECT_EQ(t.bos(), -1);
  EXPECT_EQ(t.eos(), -1);

  Json cased = wordpiece_json();
  cased["normalizer"]["lowercase"] = false;
  cased["model"]["max_input_chars_per_word"] = 5;
  const Tokenizer c = load(cased);
  EXPECT_EQ(c.encode("Hello hello é"), ids_of(c, {"Hello", "hello", "é"}));
  EXPECT_EQ(c.encode("aaaaa aaaaaa"), ids_of(c, {"a", "##a", "##a", "##a", "##a", "[UNK]"}));
  cased["normalizer"]["lowercase"] = true;
  cased["normalizer"]["strip_accents"] = false;
  EXPECT_EQ(load(cased).encode("É"), ids_of(c, {"é"}));
}

// The WordPiece decoder: tokens joined by spaces, continuations glued without "##", and with
// cleanup no space before ".", "?", "!" and ",". The first token loses its space, unless a
// Decoder continues shown text.
TEST_F(TokenizerJsonTest, WordPieceDecodesAsItsDecoder) {
  Json json = wordpiece_json();
  const Tokenizer t = load(json);
  const std::vector<int32_t> ids =
      ids_of(t, {"[CLS]", "un", "##aff", "##able", ",", "hello", "!", "[SEP]"});
  EXPECT_EQ(t.decode(ids), "[CLS] unaffable, hello! [SEP]");
  EXPECT_EQ(t.decode(t.encode("Hello, cafés!")), "hello, cafes!");
  Tokenizer::Decoder stream(t, /*continues=*/true);
  EXPECT_EQ(stream.push(t.token_id("hello")), " hello");
  EXPECT_EQ(stream.push(t.token_id("##s")), "s");
  json["decoder"]["cleanup"] = false;
  EXPECT_EQ(load(json).decode(ids), "[CLS] unaffable , hello ! [SEP]");
  json.erase("decoder");  // decodes as the WordPiece decoder
  EXPECT_EQ(load(json).decode(ids), "[CLS] unaffable, hello! [SEP]");
}

TEST_F(TokenizerJsonTest, ErrorsNameTheKeyAndValue) {
  using testing::expect_error;
  const std::string file = path("tokenizer.json");
  auto with = [](Json json, const Json::json_pointer& at, Json value) {
    json[at] = std::move(value);
    return json;
  };
  const Json bpe = bpe_json({}, {}, true), wp = wordpiece_json();
  expect_error([&] { Tokenizer::from_tokenizer_json(path("nope.json")); },
               {"[Tokenizer]", "cannot read", path("nope.json")});
  std::ofstream(file) << "{\"model\": ";
  expect_error([&] { Tokenizer::from_tokenizer_json(file); }, {"[Tokenizer]", file, "not JSON"});
  expect_error([&] { load(Json::object()); }, {"[Tokenizer]", file, "there is no model"});
  Json unigram = {{"model", {{"type", "Unigram"}, {"vocab", Json::array()}}}};
  expect_error([&] { load(unigram); },
               {"[Tokenizer]", file, "model.type is 'Unigram'", "not implement", "'WordPiece'"});
  expect_error(
      [&] {
        load(with(bpe, "/normalizer"_json_pointer, {{"type", "NFC"}}));
      },
      {"[Tokenizer]", "normalizer.type is 'NFC'", "null, for BPE"});
  expect_error(
      [&] {
        load(with(bpe, "/pre_tokenizer"_json_pointer, {{"type", "Metaspace"}}));
      },
      {"[Tokenizer]", "pre_tokenizer is {\"type\":\"Metaspace\"}", "ByteLevel"});
  expect_error(
      [&] {
        load(with(bpe, "/pre_tokenizer/pretokenizers/1/add_prefix_space"_json_pointer, true));
      },
      {"[Tokenizer]", "pre_tokenizer is ", "\"add_prefix_space\":true"});
  expect_error([&] { load(with(bpe, "/model/byte_fallback"_json_pointer, true)); },
               {"[Tokenizer]", "model.byte_fallback is true", "false"});
  expect_error([&] { load(with(bpe, "/model/ignore_merges"_json_pointer, true)); },
               {"[Tokenizer]", "model.ignore_merges is true"});
  expect_error(
      [&] {
        load(with(bpe, "/model/merges"_json_pointer, Json::array({{"a", "zz"}})));
      },
      {"[Tokenizer]", "model.merges[0] [\"a\",\"zz\"]", "'zz'", "not a token"});
  expect_error(
      [&] {
        load(with(bpe, "/model/merges"_json_pointer, {"a b", "ab"}));
      },
      {"[Tokenizer]", "model.merges[1] 'ab'", "one space"});
  expect_error(
      [&] {
        load(with(bpe, "/decoder"_json_pointer, {{"type", "Metaspace"}}));
      },
      {"[Tokenizer]", "decoder.type is 'Metaspace'"});
  expect_error(
      [&] {
        load(with(bpe, "/added_tokens"_json_pointer,
                  {{{"id", 97}, {"content", "a"}, {"special", true}, {"lstrip", true}}}));
      },
      {"[Tokenizer]", "added_tokens[0].lstrip is true"});
  expect_error(
      [&] {
        load(with(bpe, "/added_tokens"_json_pointer, {{{"id", 97}, {"content", "<x>"}}}));
      },
      {"[Tokenizer]", "added_tokens[0] '<x>' has id 97", "'a' in model.vocab"});
  expect_error([&] { load(with(bpe, "/model/vocab/zz"_json_pointer, 97)); },
               {"[Tokenizer]", "model.vocab gives id 97 to both"});
  expect_error([&] { load(with(bpe, "/model/vocab/zz"_json_pointer, 300)); },
               {"[Tokenizer]", "model.vocab['zz'] is 300", "below 257"});
  expect_error([&] { load(with(bpe, "/model/vocab/zz"_json_pointer, "1")); },
               {"[Tokenizer]", "model.vocab['zz'] is '1'", "an integer"});
  expect_error(
      [&] {
        load(with(wp, "/pre_tokenizer"_json_pointer, {{"type", "Whitespace"}}));
      },
      {"[Tokenizer]", "pre_tokenizer.type is 'Whitespace'", "BertPreTokenizer"});
  expect_error([&] { load(with(wp, "/model/unk_token"_json_pointer, "<unk>")); },
               {"[Tokenizer]", "model.unk_token is '<unk>'", "not a token"});
  expect_error([&] { load(with(wp, "/normalizer/lowercase"_json_pointer, "yes")); },
               {"[Tokenizer]", "normalizer.lowercase is 'yes'", "true or false"});
  expect_error(
      [&] { load(with(wp, "/added_tokens/0/normalized"_json_pointer, true)); },
      {"[Tokenizer]", "added_tokens[0].normalized is true", "where there is a normalizer"});
}

// ---- all-MiniLM-L6-v2's tokenizer.json ----

// Lines for what is particular to BERT's WordPiece: case and accents (Latin, Greek, Turkish's
// dotted I), Japanese voicing marks and Hangul (which stripping accents decomposes),
// full-width forms, control and format characters, special tokens in the text, punctuation
// and symbols, words of exactly 100 and of 101 characters, and words no piece begins.
std::vector<std::string> wordpiece_lines() {
  std::vector<std::string> out = corpus_and_docs();
  for (const char* line :
       {"HELLO World, UnAffable",
        "İstanbul ΣΊΣΥΦΟΣ Ὀδυσσεύς ǅemal Straße",
        "がぎぐげご パピプペポ ゔ",
        "한국어 텍스트, 안녕하세요!",
        "ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ１２３！",
        "tab\tnew\nline\rcr\x0bvt\x0c ff\u0085nel",
        "bell\x07 del\x7f soft\u00adhyphen zw\u200bsp",
        "bidi\u202etext\u202c private\ue000use \U000F0000 \ufffd replacement",
        "[CLS] [SEP] [MASK] [UNK] [PAD] [cls] [Mask]",
        "x[SEP]y ##ing ## # #hash",
        "$5.00 + 3% = <tag> ~x~ ^y^ `z` |w| @me",
        "1,234,567.89 ٣٤٥ ²³ ½ ⅷ",
        "…—–‘’“”«»¿¡§¶†‡•※‼⁉",
        "e\u0301 n\u0303 a\u030a combining ‍zero width joiner",
        "𠀀𪜀𫝀 CJK extensions 丽 compatibility",
        "ℌ ℍ ﬁ ﬂ Ǆ ǆ ﹏ ︴",
        "emoji 🫠🥲🧑🏾‍🚀 🏳️‍🌈",
        "don't can't won't y'all rock'n'roll",
        "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
        "supercalifragilisticexpialidocious-supercalifragilisticexpialidocious",
        "   spaces     everywhere   ",
        "\u3000\u2003\u00a0"}) {
    out.push_back(line);
  }
  out.push_back(std::string("nul\0byte", 8));
  out.push_back(std::string(100, 'x'));
  out.push_back(std::string(101, 'x'));
  std::string long_word;
  for (int i = 0; i < 33; ++i) long_word += "abc";
  out.push_back(long_word + "é " + long_word + "ab");  // 100 characters, then 101
  return out;
}

// The reference is the tokenizers package reading the same file, with its truncation and
// padding (128 tokens) turned off.
constexpr const char* kMiniLMScript = R"PY(
import json
from tokenizers import Tokenizer
t = Tokenizer.from_file('tokenizer.json')
t.no_truncation()
t.no_padding()
lines = json.load(open('corpus.json', encoding='utf-8'))
out = {}
for mode, as_text in (('special', False), ('plain', True)):
    t.encode_special_tokens = as_text
    out[mode] = [t.encode(s, add_special_tokens=False).ids for s in lines]
out['decoded'] = [t.decode(ids, skip_special_tokens=False) for ids in out['special']]
json.dump(out, open('ids.json', 'w'))
)PY";

// all-MiniLM-L6-v2's tokenizer.json, from $KILN_MINILM_DIR or where scripts/fetch-minilm.sh
// puts it, against the tokenizers package on the same file.
class TokenizerMiniLMTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    std::string dir, failure;
    if (const char* env = std::getenv("KILN_MINILM_DIR")) {
      dir = env;
    } else {
      dir = testing::fetch_model("fetch-minilm.sh", &failure);
    }
    ASSERT_FALSE(dir.empty()) << failure;
    std::filesystem::copy_file(dir + "/tokenizer.json", path("tokenizer.json"));
    std::ofstream(path("corpus.json")) << Json(wordpiece_lines()).dump();
    const testing::Result r = testing::run_python_tools(kMiniLMScript, path(""));
    ASSERT_EQ(r.exit_code, 0) << r.output << "\n(the tokenizers package comes from "
                              << "scripts/install-deps.sh)";
    want_ = Json::parse(std::ifstream(path("ids.json")));
  }

  Json want_;
};

// Every id of every line, with special tokens matched and as plain text, and the decoded text;
// the counts make sure the lines reach unknown words, continuations and special tokens.
TEST_F(TokenizerMiniLMTest, MatchesHuggingFaceTokenizers) {
  const Tokenizer t = Tokenizer::from_tokenizer_json(path("tokenizer.json"));
  EXPECT_EQ(t.vocab_size(), 30522);
  EXPECT_EQ(t.token_id("[CLS]"), 101);
  EXPECT_EQ(t.token_id("[SEP]"), 102);
  const std::vector<std::string> text = wordpiece_lines();
  std::map<std::string, int> seen;
  for (bool parse_special : {true, false}) {
    const auto want =
        want_[parse_special ? "special" : "plain"].get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(want.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      EXPECT_EQ(t.encode(text[i], parse_special), want[i])
          << "line " << i << " '" << text[i] << "', parse_special " << parse_special;
      for (int32_t id : want[i]) {
        const std::string& s = t.token_text(id);
        seen[id == 100             ? "unknown"
             : s.starts_with("##") ? "continuation"
             : t.is_control(id)    ? "control"
                                   : "word"] += 1;
      }
    }
  }
  EXPECT_GT(seen["unknown"], 10);
  EXPECT_GT(seen["continuation"], 100);
  EXPECT_GE(seen["control"], 5);
  const auto decoded = want_["decoded"].get<std::vector<std::string>>();
  const auto ids = want_["special"].get<std::vector<std::vector<int32_t>>>();
  for (size_t i = 0; i < text.size(); ++i) {
    EXPECT_EQ(t.decode(ids[i]), decoded[i]) << "line " << i << " '" << text[i] << "'";
    Tokenizer::Decoder stream(t);
    std::string joined;
    for (int32_t id : ids[i]) joined += stream.push(id);
    EXPECT_EQ(joined + stream.flush(), decoded[i]) << "line " << i;
  }
}

}  // namespace
}  // namespace kiln
