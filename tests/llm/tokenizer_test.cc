// kiln::Tokenizer: a small vocabulary built here pins the BPE rules, the pre-tokenizers, the
// special tokens, the streaming decoder and every error; on SmolLM2-135M-Instruct (fetched
// once by scripts/fetch-smollm2.sh) Kiln's ids are those of Hugging Face's tokenizers package,
// an independent implementation, built from the same GGUF vocabulary and merges.
#include "kiln/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  expect_error(
      [&] { Tokenizer::from_gguf(with("tokenizer.ggml.model", GgufValue::string("llama"))); },
      {"[Tokenizer]", "tokenizer.ggml.model", "'llama'", "SentencePiece", "not support"});
  expect_error(
      [&] { Tokenizer::from_gguf(with("tokenizer.ggml.model", GgufValue::string("bert"))); },
      {"[Tokenizer]", "'bert'", "expected 'gpt2'"});
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
  // ("special") and as plain text ("plain").
  std::map<std::string, std::vector<std::vector<int32_t>>> reference(
      const std::vector<std::string>& lines) {
    std::ofstream(path("corpus.json")) << nlohmann::json(lines).dump();
    const std::string script = "MODEL = '" + file_ + "'\n" + R"(
import json, gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
r = gguf.GGUFReader(MODEL)
tokens = r.fields['tokenizer.ggml.tokens'].contents()
types = r.fields['tokenizer.ggml.token_type'].contents()
merges = [tuple(m.split(' ', 1)) for m in r.fields['tokenizer.ggml.merges'].contents()]
t = Tokenizer(models.BPE({s: i for i, s in enumerate(tokens)}, merges))
t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
t.decoder = decoders.ByteLevel()
t.add_special_tokens([AddedToken(s, special=True, normalized=False)
                      for s, k in zip(tokens, types) if k == 3])
lines = json.load(open('corpus.json', encoding='utf-8'))
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

  // The corpus, and each paragraph of docs/llm.md as longer running text.
  static std::vector<std::string> lines() {
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

}  // namespace
}  // namespace kiln
