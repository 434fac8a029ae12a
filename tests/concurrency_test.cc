// Several threads recording and syncing independent programs at once share the plan, kernel
// and buffer caches correctly: each program computes exactly what it computes alone. Run
// under ThreadSanitizer in CI (scripts/test.sh), where any data race fails the run.
#include <atomic>
#include <cmath>
#include <thread>

#include "kiln/custom.h"
#include "tests/random_program.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::test_seed;

// Values with NaN equal to NaN: the oracle is the same program run alone, bit for bit.
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  }
  return true;
}

std::vector<std::vector<double>> run_program(uint64_t seed) {
  testing::ProgramGenerator gen(seed);
  std::vector<Tensor> outs = gen.generate(12);
  eval(outs);
  std::vector<std::vector<double>> values;
  for (const Tensor& t : outs) values.push_back(testing::values(t));
  return values;
}

TEST(Concurrency, ThreadsRunningRandomProgramsGetWhatEachGetsAlone) {
  SCOPED_TRACE(test_seed());
  constexpr int kThreads = 4, kPrograms = 40;
  std::vector<std::vector<std::vector<double>>> alone(kThreads * kPrograms);
  for (int p = 0; p < kThreads * kPrograms; ++p) alone[p] = run_program(test_seed() * 1000 + p);
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPrograms; ++i) {
        const int p = i * kThreads + t;
        try {
          std::vector<std::vector<double>> got = run_program(test_seed() * 1000 + p);
          for (size_t k = 0; k < got.size(); ++k) {
            if (!same_values(alone[p][k], got[k])) ++mismatches;
          }
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(Concurrency, ThreadsShareComputedWeightsAndCustomFunctions) {
  ElementwiseFunction f;
  f.name = "concurrency_halve";
  f.cuda = "__device__ float concurrency_halve(float x) { return 0.5f * x; }";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * in[0][i];
  };
  CustomElementwise halve = define_elementwise(f);
  const Tensor w = Tensor::randn({32, 32}, 1).eval();
  const Tensor b = Tensor::randn({32}, 2).eval();
  auto forward = [&](const Tensor& x) {
    return softmax(halve({matmul(x, w) + b})) + sum(x, {1}, true);
  };
  const Tensor x0 = Tensor::randn({8, 32}, 3).eval();
  const std::vector<double> want = testing::values(forward(x0));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        // The same shared weights, a fresh graph per step; every third step also defines
        // the function again (the registry returns the same one).
        if (i % 3 == 0) define_elementwise(f);
        if (!same_values(testing::values(forward(x0)), want)) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace kiln
