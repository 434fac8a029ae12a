// kiln::Tokenizer::from_tokenizer_json: Hugging Face's tokenizer.json, read onto the same
// tokenizer that from_gguf fills (llm/tokenizer_impl.h). Byte-level BPE becomes the "gpt2"
// tokenizer with a pre-tokenizer from_gguf knows; WordPiece runs in llm/wordpiece.cc.
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tokenizer.h"
#include "llm/tokenizer_impl.h"

namespace kiln {
namespace {

using Json = nlohmann::json;

// GPT-2's pre-tokenizer regex, as a Split pre-tokenizer spells it (Llama 3's differs).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The file being read; errors name it and the key.
struct Source {
  std::string path;

  [[noreturn]] void fail(const std::string& message) const {
    tokenizer_error(path + ": " + message);
  }

  // A value for messages: strings quoted as the other errors quote them, the rest as JSON.
  static std::string shown(const Json& v) {
    std::string s = v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump();
    return s.size() > 160 ? s.substr(0, 157) + "..." : s;
  }

  // The name of parent.key ("model.vocab"); `parent` is empty for the file's top level.
  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  const Json& member(const Json& object, const std::string& key, const std::string& parent) const {
    if (!object.is_object()) fail((parent.empty() ? "the file" : parent) + " is not an object");
    auto it = object.find(key);
    if (it == object.end()) fail("there is no " + join(parent, key));
    return *it;
  }

  // object[key], which may be absent or null.
  static const Json* optional(const Json& object, const std::string& key) {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  std::string string(const Json& v, const std::string& name) const {
    if (!v.is_string()) fail(name + " is " + shown(v) + ", expected a string");
    return v.get<std::string>();
  }

  int64_t integer(const Json& v, const std::string& name) const {
    if (!v.is_number_integer()) fail(name + " is " + shown(v) + ", expected an integer");
    return v.get<int64_t>();
  }

  bool boolean(const Json& v, const std::string& name) const {
    if (!v.is_boolean()) fail(name + " is " + shown(v) + ", expected true or false");
    return v.get<bool>();
  }

  // object[key] as a bool, `absent` where it is missing or null.
  bool flag(const Json& object, const std::string& key, const std::string& parent,
            bool absent) const {
    const Json* v = optional(object, key);
    return v == nullptr ? absent : boolean(*v, join(parent, key));
  }

  std::string type(const Json& component, const std::string& name) const {
    return string(member(component, "type", name), name + ".type");
  }

  [[noreturn]] void unsupported(const std::string& name, const Json& value,
                                const std::string& supported) const {
    fail(name + " is " + shown(value) + ", which Kiln does not implement (supported: " + supported +
         ")");
  }

  // Refuses object[key] unless it is absent, null or what `allowed` accepts. A component
  // ({"type": ...}) is named by its type.
  template <class Allowed>
  void refuse_unless(const Json& object, const std::string& key, const std::string& parent,
                     Allowed allowed, const std::string& supported) const {
    const Json* v = optional(object, key);
    if (v == nullptr || allowed(*v)) return;
    if (v->is_object() && v->contains("type")) {
      unsupported(join(parent, key) + ".type", (*v)["type"], supported);
    }
    unsupported(join(parent, key), *v, supported);
  }
};

Json parse(const std::string& path) {
  std::ifstream in(path);
  if (!in) tokenizer_error("cannot read " + path);
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    tokenizer_error(path + " is not JSON: " + e.what());
  }
}

TokenizerModel read_model_type(const Source& src, const Json& model) {
  const std::string type = src.type(model, "model");
  if (type == "BPE") return TokenizerModel::kGpt2;
  if (type == "WordPiece") return TokenizerModel::kWordPiece;
  src.unsupported("model.type", type, "'BPE' with a byte-level pre-tokenizer, 'WordPiece'");
}

// model.vocab, {text: id}: the tokens by id. Ids below `limit` (that of every token,
// added_tokens' too), each given once; added_tokens may fill the gaps.
void read_vocab(const Source& src, const Json& model, size_t limit, Tokenizer::Impl& t) {
  const Json& vocab = src.member(model, "vocab", "model");
  if (!vocab.is_object()) src.fail("model.vocab is not an object {token: id}");
  for (const auto& [text, value] : vocab.items()) {
    const std::string name = "model.vocab['" + text + "']";
    const int64_t id = src.integer(value, name);
    if (text.empty() || id < 0 || id >= static_cast<int64_t>(limit)) {
      src.fail(name + " is " + std::to_string(id) + ", expected a token with an id below " +
               std::to_string(limit) + ", the number of tokens");
    }
    if (id >= static_cast<int64_t>(t.tokens.size())) t.tokens.resize(id + 1);
    if (!t.tokens[id].empty()) {
      src.fail("model.vocab gives id " + std::to_string(id) + " to both '" + t.tokens[id] +
               "' and '" + text + "'");
    }
    t.tokens[id] = text;
  }
  t.types.assign(t.tokens.size(), kNormalType);
}

// One entry of added_tokens, of an id below `limit`: Kiln matches it as it is, in the text
// before normalizing.
void read_added_token(const Source& src, const Json& entry, const std::string& name, size_t limit,
                      bool normalizer, Tokenizer::Impl& t) {
  const int64_t id = src.integer(src.member(entry, "id", name), name + ".id");
  const std::string content = src.string(src.member(entry, "content", name), name + ".content");
  if (content.empty()) src.fail(name + ".content is empty");
  if (id < 0 || id >= static_cast<int64_t>(limit)) {
    src.fail(name + ".id is " + std::to_string(id) + ", expected an id below " +
             std::to_string(limit) + ", the number of tokens");
  }
  for (const char* key : {"single_word", "lstrip", "rstrip"}) {
    if (src.flag(entry, key, name, false)) src.unsupported(name + "." + key, true, "false");
  }
  const bool special = src.flag(entry, "special", name, false);
  if (normalizer && src.flag(entry, "normalized", name, !special)) {
    src.unsupported(name + ".normalized", true, "false where there is a normalizer");
  }
  if (id >= static_cast<int64_t>(t.tokens.size())) {
    t.tokens.resize(id + 1);
    t.types.resize(id + 1, kNormalType);
  }
  if (!t.tokens[id].empty() && t.tokens[id] != content) {
    src.fail(name + " '" + content + "' has id " + std::to_string(id) + ", which is '" +
             t.tokens[id] + "' in model.vocab");
  }
  t.tokens[id] = content;
  t.types[id] = special ? kControlType : kUserDefinedType;
}

const Json& added_tokens(const Source& src, const Json& root) {
  static const Json kNone = Json::array();
  const Json* added = Source::optional(root, "added_tokens");
  if (added != nullptr && !added->is_array()) src.fail("added_tokens is not an array");
  return added != nullptr ? *added : kNone;
}

// The tokens of model.vocab and added_tokens (which may add ids past model.vocab's): every id
// below their number must have one.
void read_tokens(const Source& src, const Json& root, const Json& model, bool normalizer,
                 Tokenizer::Impl& t) {
  const Json& added = added_tokens(src, root);
  const size_t limit = src.member(model, "vocab", "model").size() + added.size();
  read_vocab(src, model, limit, t);
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string name = "added_tokens[" + std::to_string(i) + "]";
    read_added_token(src, added[i], name, limit, normalizer, t);
  }
  for (size_t id = 0; id < t.tokens.size(); ++id) {
    if (t.tokens[id].empty()) {
      src.fail("no token has id " + std::to_string(id) + " (model.vocab and added_tokens skip it)");
    }
  }
  index_ids(t, "model.vocab and added_tokens");
}

int32_t id_of(const Source& src, const Tokenizer::Impl& t, const std::string& text,
              const std::string& name) {
  auto it = t.ids.find(text);
  if (it == t.ids.end()) src.fail(name + " is '" + text + "', which is not a token");
  return it->second;
}

// model.unk_token (`absent` where it is missing or null; "" for none); an added special
// token that it names counts as unknown, not control.
int32_t read_unknown(const Source& src, const Json& model, const std::string& absent,
                     Tokenizer::Impl& t) {
  const Json* v = Source::optional(model, "unk_token");
  const std::string text = v != nullptr ? src.string(*v, "model.unk_token") : absent;
  if (text.empty()) return -1;
  const int32_t id = id_of(src, t, text, "model.unk_token");
  if (t.types[id] == kControlType) t.types[id] = kUnknownType;
  return id;
}

// ---- Byte-level BPE ----

// The options of tokenizers' BPE that the "gpt2" tokenizer does not have must be off.
void check_bpe_options(const Source& src, const Json& model) {
  auto zero = [](const Json& v) { return v.is_number() && v.get<double>() == 0; };
  auto empty = [](const Json& v) { return v == ""; };
  auto off = [](const Json& v) { return v == false; };
  src.refuse_unless(model, "dropout", "model", zero, "null");
  src.refuse_unless(model, "continuing_subword_prefix", "model", empty, "null");
  src.refuse_unless(model, "end_of_word_suffix", "model", empty, "null");
  src.refuse_unless(model, "byte_fallback", "model", off, "false");
  src.refuse_unless(model, "ignore_merges", "model", off, "false");
}

// model.merges[rank]: "left right" (one space), or ["left", "right"].
void read_merge(const Source& src, const Json& merge, int32_t rank, Tokenizer::Impl& t) {
  const std::string name = "model.merges[" + std::to_string(rank) + "] " + Source::shown(merge);
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return add_merge(t, rank, merge[0].get<std::string>(), merge[1].get<std::string>(), name);
  }
  if (!merge.is_string()) src.fail(name + " is neither \"left right\" nor [\"left\", \"right\"]");
  const std::string line = merge.get<std::string>();
  const size_t space = line.find(' ');
  if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
    src.fail(name + " is not two tokens separated by one space");
  }
  add_merge(t, rank, std::string_view(line).substr(0, space),
            std::string_view(line).substr(space + 1), name);
}

void read_merges(const Source& src, const Json& model, Tokenizer::Impl& t) {
  const Json& merges = src.member(model, "merges", "model");
  if (!merges.is_array()) src.fail("model.merges is not an array");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    read_merge(src, merges[rank], static_cast<int32_t>(rank), t);
  }
}

// Whether component p ({"type": ...}: a pre-tokenizer, a decoder) is of `type`, with
// `settings` (absent ones take tokenizers' defaults, `defaults`).
bool is_component(const Json& p, const std::string& type, const Json& settings,
                  const Json& defaults) {
  if (!p.is_object() || p.value("type", Json()) != type) return false;
  for (const auto& [key, want] : settings.items()) {
    if (p.value(key, defaults.value(key, Json())) != want) return false;
  }
  return true;
}

// ByteLevel without a space put before the text; `regex` says whether it applies GPT-2's regex.
bool is_byte_level(const Json& p, bool regex) {
  return is_component(p, "ByteLevel", {{"add_prefix_space", false}, {"use_regex", regex}},
                      {{"add_prefix_space", true}, {"use_regex", true}});
}

bool is_each_digit(const Json& p) {
  return is_component(p, "Digits", {{"individual_digits", true}}, {{"individual_digits", false}});
}

bool is_gpt2_split(const Json& p) {
  return is_component(
      p, "Split",
      {{"pattern", {{"Regex", kGpt2Regex}}}, {"behavior", "Isolated"}, {"invert", false}},
      {{"invert", false}});
}

constexpr const char* kBytePreTokenizers =
    "ByteLevel with use_regex; a Sequence of Digits with individual_digits and ByteLevel "
    "(SmolLM2); a Sequence of a Split on GPT-2's regex and ByteLevel without use_regex; "
    "add_prefix_space false in each";

// The pre-tokenizers of from_gguf's "gpt-2" and "smollm", as tokenizer.json spells them.
PreTokenizer read_byte_pre_tokenizer(const Source& src, const Json& root) {
  const Json& p = src.member(root, "pre_tokenizer", "");
  if (is_byte_level(p, true)) return PreTokenizer::kGpt2;
  if (is_component(p, "Sequence", Json::object(), Json::object())) {
    const Json& steps = src.member(p, "pretokenizers", "pre_tokenizer");
    if (steps.is_array() && steps.size() == 2) {
      if (is_each_digit(steps[0]) && is_byte_level(steps[1], true)) return PreTokenizer::kSmolLM;
      if (is_gpt2_split(steps[0]) && is_byte_level(steps[1], false)) return PreTokenizer::kGpt2;
    }
  }
  src.unsupported("pre_tokenizer", p, kBytePreTokenizers);
}

void read_bpe(const Source& src, const Json& root, const Json& model, Tokenizer::Impl& t) {
  check_bpe_options(src, model);
  src.refuse_unless(
      root, "normalizer", "", [](const Json&) { return false; }, "null, for BPE");
  t.pre = read_byte_pre_tokenizer(src, root);
  src.refuse_unless(
      root, "decoder", "",
      [](const Json& d) { return is_component(d, "ByteLevel", Json::object(), Json::object()); },
      "'ByteLevel' or null, for BPE");
  read_tokens(src, root, model, false, t);
  read_merges(src, model, t);
  t.unknown = read_unknown(src, model, "", t);
}

// ---- WordPiece ----

// normalizer: BertNormalizer, or none.
void read_bert_normalizer(const Source& src, const Json& root, WordPieceOptions& o) {
  const Json* n = Source::optional(root, "normalizer");
  if (n == nullptr) return;
  const std::string type = src.type(*n, "normalizer");
  if (type != "BertNormalizer") {
    src.unsupported("normalizer.type", type, "'BertNormalizer' or null, for WordPiece");
  }
  o.clean_text = src.flag(*n, "clean_text", "normalizer", true);
  o.handle_chinese_chars = src.flag(*n, "handle_chinese_chars", "normalizer", true);
  o.lowercase = src.flag(*n, "lowercase", "normalizer", true);
  o.strip_accents = src.flag(*n, "strip_accents", "normalizer", o.lowercase);
}

void read_wordpiece_model(const Source& src, const Json& model, WordPieceOptions& o) {
  if (const Json* prefix = Source::optional(model, "continuing_subword_prefix")) {
    o.prefix = src.string(*prefix, "model.continuing_subword_prefix");
  }
  if (const Json* max = Source::optional(model, "max_input_chars_per_word")) {
    o.max_chars_per_word = src.integer(*max, "model.max_input_chars_per_word");
  }
}

// decoder: WordPiece with the model's prefix, or none, which decodes as WordPiece's default.
void read_wordpiece_decoder(const Source& src, const Json& root, WordPieceOptions& o) {
  o.cleanup = true;
  const Json* d = Source::optional(root, "decoder");
  if (d == nullptr) return;
  const std::string type = src.type(*d, "decoder");
  if (type != "WordPiece") src.unsupported("decoder.type", type, "'WordPiece' or null");
  if (const Json* prefix = Source::optional(*d, "prefix"); prefix && *prefix != o.prefix) {
    src.unsupported("decoder.prefix", *prefix, "model.continuing_subword_prefix");
  }
  o.cleanup = src.flag(*d, "cleanup", "decoder", true);
}

void read_wordpiece(const Source& src, const Json& root, const Json& model, Tokenizer::Impl& t) {
  WordPieceOptions& o = t.wordpiece;
  read_bert_normalizer(src, root, o);
  src.refuse_unless(
      root, "pre_tokenizer", "",
      [](const Json& p) {
        return is_component(p, "BertPreTokenizer", Json::object(), Json::object());
      },
      "'BertPreTokenizer', for WordPiece");
  if (Source::optional(root, "pre_tokenizer") == nullptr) {
    src.fail("there is no pre_tokenizer: WordPiece needs 'BertPreTokenizer'");
  }
  read_wordpiece_model(src, model, o);
  read_wordpiece_decoder(src, root, o);
  read_tokens(src, root, model, Source::optional(root, "normalizer") != nullptr, t);
  t.unknown = o.unknown = read_unknown(src, model, "[UNK]", t);
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json(const std::string& path) {
  const Source src{path};
  const Json root = parse(path);
  auto t = std::make_shared<Impl>();
  try {
    const Json& model = src.member(root, "model", "");
    t->model = read_model_type(src, model);
    if (t->model == TokenizerModel::kWordPiece) {
      read_wordpiece(src, root, model, *t);
    } else {
      read_bpe(src, root, model, *t);
    }
  } catch (const Json::exception& e) {  // a value of a type the checks above did not expect
    src.fail(e.what());
  }
  index_tokens(*t);
  return Tokenizer(std::move(t));
}

}  // namespace kiln
