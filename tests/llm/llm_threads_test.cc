// Sessions of one model on several threads at once (run under ThreadSanitizer by
// scripts/test.sh): each computes what it computes alone.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kiln/io.h"
#include "kiln/llm.h"
#include "tests/llm/small_llama.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

class LlmThreadsTest : public testing::ScratchDirTest {};

// A prompt and eight greedy tokens; the logits of every position run.
std::vector<std::vector<float>> greedy_run(const llm::Model& model, int32_t first) {
  llm::Session session(model, 32);
  std::vector<std::vector<float>> out;
  Tensor logits = session.prefill({1, first, 7, first});
  for (int i = 0; i < 8; ++i) {
    out.push_back(logits.to_vector<float>());
    logits = session.step(session.sample(logits, {}));
  }
  return out;
}

TEST_F(LlmThreadsTest, SessionsShareAModelAcrossThreads) {
  save_gguf(path("small.gguf"), testing::small_llama(false));
  const llm::Model model = llm::Model::load(path("small.gguf"));
  std::vector<std::vector<std::vector<float>>> alone, together(4);
  for (int t = 0; t < 4; ++t) alone.push_back(greedy_run(model, 10 + t));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { together[static_cast<size_t>(t)] = greedy_run(model, 10 + t); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(together[t], alone[t]) << "thread " << t;
}

}  // namespace
}  // namespace kiln
