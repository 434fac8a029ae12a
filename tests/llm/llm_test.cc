// kiln::llm against tools/llm_reference.py, a float64 numpy forward written from the published
// architecture: a small Llama with random f32 weights that Kiln writes as GGUF, and
// SmolLM2-135M-Instruct as llama.cpp ships it (Q4_1, fetched once by scripts/fetch-smollm2.sh).
#include "kiln/llm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/io.h"
#include "kiln/kiln.h"
#include "nlohmann/json.hpp"
#include "tests/llm/small_llama.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using llm::Model;
using llm::Session;
using Type = GgufValue::Type;

struct Reference {
  std::vector<double> logits;  // the last prompt position's
  std::vector<int32_t> greedy;
  std::vector<double> margins;  // each greedy pick's lead over the runner-up
};

class LlmTest : public testing::ScratchDirTest {
 protected:
  // tools/llm_reference.py on `model` after `ids`, with `greedy` tokens of continuation.
  Reference reference(const std::string& model, const std::vector<int32_t>& ids, int greedy) {
    std::string id_list;
    for (int32_t id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
    const std::string script =
        "import runpy, sys\nsys.argv = ['llm_reference.py', '" + model + "', '--ids', '" + id_list +
        "', '--greedy', '" + std::to_string(greedy) + "', '--out', 'ref.npy']\n" +
        "runpy.run_path('" + KILN_SOURCE_DIR + "/tools/llm_reference.py', run_name='__main__')\n";
    const testing::Result r = testing::run_python_tools(script, path(""));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    Reference ref;
    ref.logits = load_npy(path("ref.npy")).to_vector<double>();
    const auto json = nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
    ref.greedy = json["greedy"].get<std::vector<int32_t>>();
    ref.margins = json["margins"].get<std::vector<double>>();
    return ref;
  }

  // Greedy sampling from `logits` (the prompt's last position) picks the reference's tokens one
  // by one, each step's logits the next pick's.
  static void expect_greedy_continuation(Session& sequence, Tensor logits, const Reference& ref) {
    for (size_t i = 0; i < ref.greedy.size(); ++i) {
      const int32_t next = sequence.sample(logits, {});
      ASSERT_EQ(next, ref.greedy[i]) << "token " << i << ", reference margin " << ref.margins[i];
      logits = sequence.step(next);
    }
  }

  std::string write_small_llama(const std::string& name, bool tied) {
    save_gguf(path(name), testing::small_llama(tied));
    return path(name);
  }
};

template <class T>
double max_abs_difference(const std::vector<T>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// With f32 weights Kiln's products are f32 GEMMs: the logits agree with float64 to f32
// rounding through the layers; a greedy continuation of twelve tokens agrees token for token.
// Every architecture of the family: llama; qwen2 with its biases and RoPE on halves; gemma3
// with its embedding scale, QK norms, post-norms, GELU, wider heads, a sliding layer and a
// linearly scaled one.
TEST_F(LlmTest, SmallModelsMatchTheFloat64Reference) {
  for (const std::string architecture : {"llama", "qwen2", "gemma3"}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(architecture + (tied ? ", tied embedding" : ", own output matrix"));
      save_gguf(path("small.gguf"), testing::small_model(architecture, tied));
      const std::string file = path("small.gguf");
      const std::vector<int32_t> prompt{1, 17, 93, 4, 4, 60, 31};
      const Reference ref = reference(file, prompt, 12);
      const Model model = Model::load(file);
      EXPECT_EQ(model.architecture(), architecture);
      EXPECT_EQ(model.vocab_size(), 96);
      EXPECT_EQ(model.context_length(), 512);
      Session session(model, 512);  // attention reads 64 of the 512 positions
      const Tensor logits = session.prefill(prompt);
      EXPECT_LT(max_abs_difference(values(logits), ref.logits), 2e-4);
      expect_greedy_continuation(session, logits, ref);
      EXPECT_EQ(session.position(), static_cast<int64_t>(prompt.size() + ref.greedy.size()));
    }
  }
}

// Llama 3.1 and 3.2 files scale RoPE with one factor per pair of a head (rope_freqs.weight),
// which divides the pair's angles: the logits and a greedy continuation follow the reference.
TEST_F(LlmTest, LlamaRopeFrequencyFactorsMatchTheFloat64Reference) {
  GgufFile f = testing::small_llama(false);
  f.tensors["rope_freqs.weight"] = (Tensor::rand({4}, 99) * 7.0 + 1.0).eval();
  save_gguf(path("llama3.gguf"), f);
  const std::vector<int32_t> prompt{3, 50, 7, 81, 12, 12, 40, 2, 66};
  const Reference ref = reference(path("llama3.gguf"), prompt, 8);
  Session session(Model::load(path("llama3.gguf")), 128);
  const Tensor logits = session.prefill(prompt);
  EXPECT_LT(max_abs_difference(values(logits), ref.logits), 2e-4);
  expect_greedy_continuation(session, logits, ref);
  // Without the factors the logits differ: the test sees them.
  Session plain(Model::load(write_small_llama("plain.gguf", false)), 128);
  EXPECT_GT(max_abs_difference(values(plain.prefill(prompt)), ref.logits), 1e-2);
  f.tensors["rope_freqs.weight"] = Tensor::zeros({4});
  save_gguf(path("zero.gguf"), f);
  testing::expect_error([&] { Model::load(path("zero.gguf")); },
                        {"'rope_freqs.weight' holds 0", "factors > 0"});
}

// The cache carries a prompt across calls: prefilled in pieces, or token by token, the last
// position's logits are those of one prefill of the whole prompt (which runs in chunks of
// 256 tokens, and whose attention reads the cache in stretches of 64 positions). gemma3's
// sliding layer then skips the stretches its window has left behind.
TEST_F(LlmTest, PrefillInPiecesAndStepsGiveTheLogitsOfOnePrefill) {
  for (const std::string architecture : {"llama", "gemma3"}) {
    SCOPED_TRACE(architecture);
    save_gguf(path("small.gguf"), testing::small_model(architecture, false));
    const Model model = Model::load(path("small.gguf"));
    std::vector<int32_t> prompt;
    for (int i = 0; i < 300; ++i) prompt.push_back((i * 37 + 5) % 96);
    Session whole(model, 512);
    const std::vector<float> want = values(whole.prefill(prompt));
    const std::vector<double> want_d(want.begin(), want.end());
    EXPECT_LT(max_abs_difference(want, reference(path("small.gguf"), prompt, 0).logits), 2e-4);
    Session pieces(model, 512);
    (void)pieces.prefill({prompt.begin(), prompt.begin() + 25});
    EXPECT_LT(
        max_abs_difference(values(pieces.prefill({prompt.begin() + 25, prompt.end()})), want_d),
        1e-4);
    Session steps(model, 512);
    (void)steps.prefill({prompt.begin(), prompt.end() - 1});
    EXPECT_LT(max_abs_difference(values(steps.step(prompt.back())), want_d), 1e-4);
    // reset() starts again: the same prompt gives the same logits.
    whole.reset();
    EXPECT_EQ(whole.position(), 0);
    EXPECT_LT(max_abs_difference(values(whole.prefill(prompt)), want_d), 1e-6);
  }
}

// Logits [96] that are log(weights) on the first ids and -inf on the rest.
Tensor logits_of(const std::vector<double>& weights) {
  std::vector<float> l(96, -INFINITY);
  for (size_t i = 0; i < weights.size(); ++i) l[i] = static_cast<float>(std::log(weights[i]));
  return Tensor::from_vector(l, {96});
}

TEST_F(LlmTest, SamplingFollowsItsRules) {
  const Model model = Model::load(write_small_llama("small.gguf", false));
  Session session(model, 8);
  // Greedy: the first of the largest logits; NaN never wins.
  std::vector<float> l(96, 0.0f);
  l[5] = l[9] = 2.0f;
  l[7] = NAN;
  EXPECT_EQ(session.sample(Tensor::from_vector(l, {96}), {}), 5);
  // Draws at temperature 1 from probabilities 1/6, 2/6, 3/6: the counts of 6000 draws lie
  // within 5 standard deviations of 1000, 2000 and 3000.
  llm::Sampling s;
  s.temperature = 1;
  s.seed = 42;
  std::vector<int> counts(96, 0);
  for (int i = 0; i < 6000; ++i)
    ++counts[static_cast<size_t>(session.sample(logits_of({1, 2, 3}), s))];
  for (int id = 0; id < 3; ++id) {
    const double p = (id + 1) / 6.0, sd = std::sqrt(6000 * p * (1 - p));
    EXPECT_NEAR(counts[static_cast<size_t>(id)], 6000 * p, 5 * sd) << id;
  }
  EXPECT_EQ(counts[0] + counts[1] + counts[2], 6000);
  // top_k 1 and a top_p the most likely token reaches alone both leave one candidate; top_p
  // 0.6 leaves two, never the third.
  s.top_k = 1;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(session.sample(logits_of({1, 2, 3}), s), 2);
  s.top_k = 0;
  s.top_p = 0.45;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(session.sample(logits_of({1, 2, 3}), s), 2);
  s.top_p = 0.6;
  std::vector<int> kept(3, 0);
  for (int i = 0; i < 300; ++i)
    ++kept[static_cast<size_t>(session.sample(logits_of({1, 2, 3}), s))];
  EXPECT_EQ(kept[0], 0);
  EXPECT_GT(kept[1], 50);
  EXPECT_GT(kept[2], 100);
  // Ties go to the lower id, -0 and +0 alike: of eight equal logits, top_p 0.3 keeps the
  // first three.
  s.top_p = 0.3;
  std::vector<float> ties(96, -INFINITY);
  for (int i = 0; i < 8; ++i) ties[static_cast<size_t>(i)] = i % 2 ? 0.0f : -0.0f;
  std::vector<int> tied(96, 0);
  for (int i = 0; i < 300; ++i) {
    ++tied[static_cast<size_t>(session.sample(Tensor::from_vector(ties, {96}), s))];
  }
  EXPECT_EQ(tied[0] + tied[1] + tied[2], 300);
  EXPECT_GT(std::min({tied[0], tied[1], tied[2]}), 50);
  // The same seed draws the same tokens in a new Session (or after reset); another seed not.
  s.top_p = 1;
  auto draws = [&](Session& one, uint64_t seed) {
    s.seed = seed;
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(one.sample(logits_of({1, 1, 1, 1, 1, 1, 1, 1}), s));
    return out;
  };
  Session a(model, 8), b(model, 8);
  const std::vector<int32_t> first = draws(a, 7);
  EXPECT_EQ(draws(b, 7), first);
  a.reset();
  EXPECT_EQ(draws(a, 7), first);
  EXPECT_NE(draws(b, 8), first);
  // The repeat penalty divides the logit of an id already run: 1.0 / 1.25 < 0.9.
  Session penalized(model, 8);
  (void)penalized.prefill({3});
  std::vector<float> close(96, 0.0f);
  close[3] = 1.0f;
  close[4] = 0.9f;
  llm::Sampling greedy;
  EXPECT_EQ(penalized.sample(Tensor::from_vector(close, {96}), greedy), 3);
  greedy.repeat_penalty = 1.25;
  EXPECT_EQ(penalized.sample(Tensor::from_vector(close, {96}), greedy), 4);
  // Nothing to pick is an error, and a refused call draws nothing: the seeded draws after it
  // are those of a Session that never made it.
  testing::expect_error([&] { a.sample(logits_of({}), s); }, {"no logit is finite"});
  Session c(model, 8), d(model, 8);
  const std::vector<int32_t> fresh = draws(c, 7);
  llm::Sampling refused = s;
  refused.top_p = 2;
  testing::expect_error([&] { d.sample(logits_of({1, 1}), refused); }, {"top_p 2"});
  EXPECT_EQ(draws(d, 7), fresh);
}

TEST_F(LlmTest, BadModelsAndBadCallsAreErrorsNamingWhatIsWrong) {
  const std::string file = write_small_llama("small.gguf", false);
  const GgufFile f = load_gguf(file);
  auto variant = [&](const std::string& name, auto change) {
    GgufFile copy = f;
    change(copy);
    save_gguf(path(name), copy);
    return path(name);
  };
  // Loading the file with `change` made fails with an error that says each of `parts`.
  auto refused = [&](const std::string& name, auto change, const std::vector<std::string>& parts) {
    testing::expect_error([&] { Model::load(variant(name, change)); }, parts);
  };
  refused("arch.gguf",
          [](GgufFile& g) { g.metadata["general.architecture"] = GgufValue::string("mamba"); },
          {"architecture 'mamba'", "not supported"});
  refused("key.gguf", [](GgufFile& g) { g.metadata.erase("llama.block_count"); },
          {"no 'llama.block_count'"});
  refused("tensor.gguf", [](GgufFile& g) { g.tensors.erase("blk.1.ffn_up.weight"); },
          {"'blk.1.ffn_up.weight' is missing", "[48, 32]"});
  refused("shape.gguf",
          [](GgufFile& g) {
            g.tensors["blk.0.attn_k.weight"] = Tensor::zeros({32, 32});
          },
          {"'blk.0.attn_k.weight' has shape [32, 32]", "expected [16, 32]"});
  refused("extra.gguf", [](GgufFile& g) { g.tensors["blk.0.attn_q.bias"] = Tensor::zeros({32}); },
          {"'blk.0.attn_q.bias' is not used", "not supported"});
  refused("scaling.gguf",
          [](GgufFile& g) { g.metadata["llama.rope.scaling.type"] = GgufValue::string("yarn"); },
          {"'llama.rope.scaling.type' is 'yarn'", "only linear RoPE scaling"});
  refused("window.gguf",
          [](GgufFile& g) {
            g.metadata["llama.attention.sliding_window"] = GgufValue::integer(Type::kU32, 64);
          },
          {"'llama.attention.sliding_window'", "not supported"});
  refused("heads.gguf",
          [](GgufFile& g) {
            g.metadata["llama.attention.head_count_kv"] = GgufValue::integer(Type::kU32, 3);
          },
          {"head_count_kv' is 3", "divisor of head_count 4"});
  // Key and value sizes are accepted when equal (converters often write them); a head size
  // other than embedding_length / head_count is checked against the projections' shapes.
  (void)Model::load(variant("keys.gguf", [](GgufFile& g) {
    g.metadata["llama.attention.key_length"] = GgufValue::integer(Type::kU32, 8);
    g.metadata["llama.attention.value_length"] = GgufValue::integer(Type::kU32, 8);
  }));
  refused("values.gguf",
          [](GgufFile& g) {
            g.metadata["llama.attention.key_length"] = GgufValue::integer(Type::kU32, 8);
            g.metadata["llama.attention.value_length"] = GgufValue::integer(Type::kU32, 16);
          },
          {"'llama.attention.value_length' is 16", "key length 8"});
  refused("wide.gguf",
          [](GgufFile& g) {
            g.metadata["llama.attention.key_length"] = GgufValue::integer(Type::kU32, 16);
            g.metadata["llama.rope.dimension_count"] = GgufValue::integer(Type::kU32, 16);
          },
          {"'blk.0.attn_q.weight' has shape [32, 32]", "expected [64, 32]"});
  // gemma3's own keys: a window is required, and a per-layer pattern has one flag per layer.
  const GgufFile gemma = testing::small_model("gemma3", true);
  auto refused_gemma = [&](auto change, const std::vector<std::string>& parts) {
    GgufFile copy = gemma;
    change(copy);
    save_gguf(path("gemma.gguf"), copy);
    testing::expect_error([&] { Model::load(path("gemma.gguf")); }, parts);
  };
  refused_gemma([](GgufFile& g) { g.metadata.erase("gemma3.attention.sliding_window"); },
                {"no 'gemma3.attention.sliding_window'"});
  refused_gemma(
      [](GgufFile& g) {
        g.metadata["gemma3.attention.sliding_window_pattern"] =
            GgufValue::array(Type::kBool, {GgufValue::integer(Type::kBool, 1)});
      },
      {"'gemma3.attention.sliding_window_pattern' is 1 flags", "one per layer (2)"});
  refused_gemma([](GgufFile& g) { g.tensors.erase("blk.1.post_ffw_norm.weight"); },
                {"'blk.1.post_ffw_norm.weight' is missing", "[32]"});
  // A tokenizer Kiln cannot read leaves the model usable on ids, and says why it is missing.
  const Model wordpiece = Model::load(variant("bert.gguf", [](GgufFile& g) {
    g.metadata["tokenizer.ggml.model"] = GgufValue::string("bert");
    g.metadata["tokenizer.ggml.tokens"] =
        GgufValue::array(Type::kString, {GgufValue::string("a"), GgufValue::string("b")});
  }));
  testing::expect_error([&] { (void)wordpiece.tokenizer(); }, {"'bert'"});
  EXPECT_EQ(Session(wordpiece, 8).prefill({1, 2}).shape(), std::vector<int64_t>{96});
  testing::expect_error(
      [&] {
        Model::load(file, Device{DeviceType::CUDA, 0});
      },
      {"cuda:0", "CPU only"});

  const Model model = Model::load(file);
  Session session(model, 8);
  (void)session.prefill({1, 2, 3});
  testing::expect_error([&] { session.prefill({1, 96}); }, {"token id 96", "[0, 96)"});
  testing::expect_error(
      [&] {
        session.prefill({1, 2, 3, 4, 5, 6});
      },
      {"6 tokens after 3", "8 positions"});
  testing::expect_error([&] { session.prefill({}); }, {"no token ids"});
  testing::expect_error([] { Session(Model::load(KILN_SOURCE_DIR "/README.md")); }, {"README.md"});
  // The refused calls left the Session as it was.
  EXPECT_EQ(session.position(), 3);
  Session again(model, 8);
  (void)again.prefill({1, 2, 3});
  EXPECT_EQ(values(session.step(7)), values(again.step(7)));
  testing::expect_error([&] { session.sample(Tensor::zeros({5}), {}); }, {"expected [96]"});
  llm::Sampling bad;
  bad.top_p = 0;
  testing::expect_error([&] { session.sample(Tensor::zeros({96}), bad); }, {"top_p 0"});
}

TEST_F(LlmTest, SmolLM2MatchesTheFloat64Reference) {
  std::string failure;
  const std::string file = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(file.empty()) << failure;
  const Model model = Model::load(file);
  EXPECT_EQ(model.vocab_size(), 49152);
  EXPECT_EQ(model.context_length(), 8192);
  // "1, 2, 3, 4, 5, 6, 7," (a confident continuation), "The capital of France is Paris. The
  // capital of Germany is", and "Monday, Tuesday, Wednesday, Thursday,", after BOS (id 1).
  const std::vector<std::vector<int32_t>> prompts{
      {1, 33, 28, 216, 34, 28, 216, 35, 28, 216, 36, 28, 216, 37, 28, 216, 38, 28, 216, 39, 28},
      {1, 504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 4521, 314},
      {1, 32210, 28, 14801, 28, 15083, 28, 14963, 28}};
  int checked_tokens = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    const Reference ref = reference(file, prompt, 6);
    Session session(model, 64);
    Tensor logits = session.prefill(prompt);
    const auto [lo, hi] = std::minmax_element(ref.logits.begin(), ref.logits.end());
    const double tolerance = 0.05 * (*hi - *lo);
    const double error = max_abs_difference(values(logits), ref.logits);
    SCOPED_TRACE("prompt of " + std::to_string(prompt.size()) + " tokens: Kiln off by " +
                 std::to_string(error) + ", tolerance " + std::to_string(tolerance));
    EXPECT_LT(error, tolerance);
    for (size_t i = 0; i < ref.greedy.size() && ref.margins[i] > 2 * tolerance; ++i) {
      const int32_t next = session.sample(logits, {});
      ASSERT_EQ(next, ref.greedy[i]) << "token " << i << ", reference margin " << ref.margins[i];
      logits = session.step(next);
      ++checked_tokens;
    }
  }
  EXPECT_GE(checked_tokens, 4);  // the counting prompt's next numbers, at least
}

// SmolLM2 with its own tokenizer: generate streams the greedy continuation the float64
// reference picks (decoded by the tokenizer), in whole characters, and stops when asked.
TEST_F(LlmTest, GenerateStreamsTheGreedyContinuation) {
  std::string failure;
  const std::string file = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(file.empty()) << failure;
  const Model model = Model::load(file);
  const Tokenizer& tokenizer = model.tokenizer();
  const std::string prompt = "1, 2, 3, 4, 5, 6, 7,";
  std::vector<int32_t> ids = tokenizer.encode(prompt);
  if (tokenizer.add_bos()) ids.insert(ids.begin(), tokenizer.bos());
  EXPECT_EQ(model.prompt_ids(prompt), ids);
  EXPECT_EQ(model.prompt_ids(prompt, false), tokenizer.encode(prompt));
  const Reference ref = reference(file, ids, 5);
  Session session(model, 64);
  std::string streamed;
  const std::string text = session.generate(prompt, 5, {}, [&](std::string_view piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(text, tokenizer.decode(ref.greedy));
  EXPECT_EQ(streamed, text);
  const Session::Generation g = session.last_generation();
  EXPECT_EQ(g.prompt_tokens, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(g.new_tokens, 5);
  EXPECT_GT(g.prefill_seconds, 0);
  // A listener that says stop after its first piece gets no other.
  Session stopped(model, 64);
  int pieces = 0;
  const std::string first = stopped.generate(prompt, 5, {}, [&](std::string_view) {
    ++pieces;
    return false;
  });
  EXPECT_EQ(pieces, 1);
  EXPECT_EQ(first, tokenizer.decode({ref.greedy[0]}));
}

// BOS goes first when the model asks for it, and only at the start of the sequence: in
// prompt_ids, and in generate, whose second prompt in one Session has none. The small model
// with a tokenizer of its 96 ids: the printable ASCII characters, then BOS and EOS.
TEST_F(LlmTest, PromptsBeginWithBosOnlyAtTheStart) {
  GgufFile f = testing::small_llama(false);
  std::vector<GgufValue> tokens, types;
  for (char c = '!'; c <= '~'; ++c) tokens.push_back(GgufValue::string(std::string(1, c)));
  types.assign(tokens.size(), GgufValue::integer(Type::kI32, 1));
  for (const char* control : {"<s>", "</s>"}) {
    tokens.push_back(GgufValue::string(control));
    types.push_back(GgufValue::integer(Type::kI32, 3));
  }
  f.metadata["tokenizer.ggml.model"] = GgufValue::string("gpt2");
  f.metadata["tokenizer.ggml.tokens"] = GgufValue::array(Type::kString, tokens);
  f.metadata["tokenizer.ggml.token_type"] = GgufValue::array(Type::kI32, types);
  f.metadata["tokenizer.ggml.merges"] = GgufValue::array(Type::kString, {});
  f.metadata["tokenizer.ggml.bos_token_id"] = GgufValue::integer(Type::kU32, 94);
  f.metadata["tokenizer.ggml.eos_token_id"] = GgufValue::integer(Type::kU32, 95);
  f.metadata["tokenizer.ggml.add_bos_token"] = GgufValue::integer(Type::kBool, 1);
  save_gguf(path("bos.gguf"), f);
  const Model model = Model::load(path("bos.gguf"));
  const std::vector<int32_t> ab{'a' - '!', 'b' - '!'};
  EXPECT_EQ(model.prompt_ids("ab"), (std::vector<int32_t>{94, ab[0], ab[1]}));
  EXPECT_EQ(model.prompt_ids("ab", false), ab);
  Session session(model, 64);
  (void)session.generate("ab", 1, {});
  EXPECT_EQ(session.last_generation().prompt_tokens, 3);
  const int64_t after_first = session.position();
  (void)session.generate("ab", 1, {});
  EXPECT_EQ(session.last_generation().prompt_tokens, 2);
  EXPECT_EQ(session.position(), after_first + 2);
}

// The chat template's ChatML with its default system turn, as the template itself writes it
// (tokenizer.chat_template); the answer ends at <|im_end|>, which is not part of the text.
TEST_F(LlmTest, ChatPromptsFollowTheTemplateAndAnswersEndAtTheEndOfTurn) {
  std::string failure;
  const std::string file = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(file.empty()) << failure;
  const Model model = Model::load(file);
  EXPECT_EQ(model.chat_prompt("Hi"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  Session session(model, 256);
  const std::string answer = session.generate(model.chat_prompt("Say hello."), 64, {});
  const Session::Generation g = session.last_generation();
  EXPECT_LT(g.new_tokens, 64) << answer;
  EXPECT_EQ(answer.find("<|im_end|>"), std::string::npos) << answer;
  // Its last sample was the end of the turn, which the cache does not hold.
  EXPECT_EQ(session.position(), g.prompt_tokens + g.new_tokens - 1);
  // A file without a template, or a tokenizer, says so.
  const Model small = Model::load(write_small_llama("small.gguf", false));
  testing::expect_error([&] { (void)small.chat_prompt("Hi"); }, {"no tokenizer.chat_template"});
  testing::expect_error([&] { (void)small.tokenizer(); }, {"no tokenizer"});
  // Gemma's turns: no system turn; a later turn closes the model's answer first.
  GgufFile gemma = testing::small_model("gemma3", true);
  gemma.metadata["tokenizer.chat_template"] = GgufValue::string(
      "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n"
      "{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n");
  save_gguf(path("gemma.gguf"), gemma);
  const Model gemma_model = Model::load(path("gemma.gguf"));
  EXPECT_EQ(gemma_model.chat_prompt("Hi"),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(gemma_model.chat_prompt("And?", false),
            "<end_of_turn>\n<start_of_turn>user\nAnd?<end_of_turn>\n<start_of_turn>model\n");
}

// The CPU device's thread count, set from C++ and read back; a prefill runs under each count
// (this small model's kernels may not split across threads: the count itself is the check).
TEST_F(LlmTest, TheThreadCountIsSetFromCpp) {
  const int before = num_threads();
  const Model model = Model::load(write_small_llama("small.gguf", false));
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  Session one(model, 16);
  const std::vector<float> a = values(one.prefill({1, 2, 3, 4}));
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  Session two(model, 16);
  const std::vector<float> b = values(two.prefill({1, 2, 3, 4}));
  set_num_threads(before);
  EXPECT_LT(max_abs_difference(b, std::vector<double>(a.begin(), a.end())), 1e-5);
  testing::expect_error([] { set_num_threads(0); }, {"[set_num_threads]", "0 threads"});
  testing::expect_error([] { set_num_threads(5000); }, {"1 to 1024"});
  EXPECT_EQ(num_threads(), before);
}

// `kiln generate` streams the text and ends with its one line of numbers; --logits-out writes
// the prompt's logits, those of a Session's prefill.
TEST_F(LlmTest, TheGenerateCommandStreamsTextAndReportsItsRates) {
  std::string failure;
  const std::string file = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(file.empty()) << failure;
  const testing::Result r =
      testing::run(std::string(KILN_TOOL_PATH) + " generate --model " + file +
                   " --prompt '1, 2, 3, 4, 5, 6, 7,' --max-tokens 4 --threads 2 --logits-out " +
                   path("logits.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Model model = Model::load(file);
  const Tokenizer& tokenizer = model.tokenizer();
  Session session(model, 32);
  const std::string want = session.generate("1, 2, 3, 4, 5, 6, 7,", 4, {});
  EXPECT_EQ(r.output.substr(0, want.size()), want) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\nprefill: 20 tokens, [0-9.]+ ms; decode: "
                                                     "4 tokens, [0-9.]+ tok/s\n$")))
      << r.output;
  Session again(model, 32);
  const std::vector<float> logits = values(again.prefill(tokenizer.encode("1, 2, 3, 4, 5, 6, 7,")));
  EXPECT_EQ(load_npy(path("logits.npy")).to_vector<float>(), logits);
  // A usage error exits 2; a bad file 1, with the reason on one line.
  EXPECT_EQ(testing::run(std::string(KILN_TOOL_PATH) + " generate --prompt x").exit_code, 2);
  const testing::Result bad =
      testing::run(std::string(KILN_TOOL_PATH) + " generate --model /nonexistent.gguf --prompt x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("kiln: "), std::string::npos) << bad.output;
}

// samples/chat: two turns on one Session. The second turn's prompt follows the first answer in
// the cache (it grows, never restarts), and the end-of-turn tokens stay out of the text.
TEST_F(LlmTest, TheChatSampleKeepsOneConversation) {
  std::string failure;
  const std::string model = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(model.empty()) << failure;
  const Model m = Model::load(model);
  EXPECT_EQ(m.chat_prompt("Again?", false),
            "<|im_end|>\n<|im_start|>user\nAgain?<|im_end|>\n<|im_start|>assistant\n");
  const testing::Result r =
      testing::run("printf 'Say hello.\\nAnd once more?\\n\\n' | " + std::string(KILN_SAMPLES_DIR) +
                   "/chat " + model + " --max-tokens 24");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex turn("\\[([0-9]+) tokens, [0-9.]+ tok/s; ([0-9]+) of 2048 positions used\\]");
  std::vector<int64_t> used;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), turn);
       it != std::sregex_iterator(); ++it) {
    used.push_back(std::stoll((*it)[2]));
  }
  ASSERT_EQ(used.size(), 2u) << r.output;
  EXPECT_GT(used[1], used[0] + 10) << r.output;  // the second prompt and answer after the first
  EXPECT_EQ(r.output.find("<|im_end|>"), std::string::npos) << r.output;
  EXPECT_EQ(testing::run(std::string(KILN_SAMPLES_DIR) + "/chat").exit_code, 2);
}

}  // namespace
}  // namespace kiln
