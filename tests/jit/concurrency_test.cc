// Several threads recording and syncing independent programs at once share the plan, kernel
// and buffer caches correctly: each program computes exactly what it computes alone. Run
// under ThreadSanitizer in CI (scripts/test.sh), where any data race fails the run.
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "kiln/custom.h"
#include "tests/random_program.h"
#include "tests/reference_util.h"
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

// A lazy value that several request threads read (a transformed weight, a mask): four
// threads sync graphs that share it, all at once, over many rounds. Each pending node is
// computed once — the counting function inside the shared value sees each element once per
// round — and every thread gets the reference evaluator's values.
TEST(Concurrency, ThreadsSyncingOverlappingPendingGraphsComputeSharedNodesOnce) {
  static std::atomic<int64_t> elements_seen{0};
  ElementwiseFunction f;
  f.name = "concurrency_counted_square";
  f.cuda = "__device__ float concurrency_counted_square(float x) { return x * x; }";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    elements_seen += n;
    for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * in[0][i];
  };
  CustomElementwise counted_square = define_elementwise(f);
  std::mt19937_64 rng(test_seed() + 5);
  SCOPED_TRACE(test_seed());
  constexpr int kThreads = 4, kRounds = 25;
  const Tensor w = Tensor::from_vector(testing::random_floats(24 * 16, rng), {24, 16}).eval();
  // How many elements one computation of the shared value passes through the function.
  const auto shared_value = [&](const Tensor& x) {
    return tanh(counted_square({matmul(x, w)}) * 0.25) + 1.0;
  };
  const Tensor probe = Tensor::from_vector(testing::random_floats(6 * 24, rng), {6, 24});
  elements_seen = 0;
  shared_value(probe).eval();
  const int64_t once = elements_seen.load();
  ASSERT_GT(once, 0);
  for (int round = 0; round < kRounds; ++round) {
    const Tensor x = Tensor::from_vector(testing::random_floats(6 * 24, rng), {6, 24}).eval();
    const Tensor shared = shared_value(x);
    // Each thread reads the shared value itself, or a value computed from it.
    std::vector<Tensor> reads(kThreads);
    for (int t = 0; t < kThreads; ++t) reads[t] = t % 2 == 0 ? shared : shared * (t + 1.0);
    std::vector<std::vector<float>> want(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      want[t] = testing::reference_tensor(reads[t]).to_vector<float>();
    }
    elements_seen = 0;
    std::vector<std::vector<float>> got(kThreads);
    std::atomic<int> ready{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ready += 1;
        while (ready.load() < kThreads) std::this_thread::yield();  // start together
        try {
          got[t] = reads[t].to_vector<float>();
        } catch (const std::exception&) {
          ++errors;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    ASSERT_EQ(errors.load(), 0) << "round " << round;
    // The odd threads' reads fuse the shared value into their own kernel when they sync
    // first; then it is computed once more for them, never more than once per thread.
    EXPECT_GE(elements_seen.load(), once) << "round " << round;
    EXPECT_LE(elements_seen.load(), once * (1 + kThreads / 2)) << "round " << round;
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(got[t].size(), want[t].size());
      for (size_t i = 0; i < got[t].size(); ++i) {
        ASSERT_NEAR(got[t][i], want[t][i], 1e-5f * (1.0f + std::fabs(want[t][i])))
            << "round " << round << " thread " << t << " element " << i;
      }
    }
  }
  // When every thread reads the shared value itself, it is computed exactly once.
  for (int round = 0; round < kRounds; ++round) {
    const Tensor x = Tensor::from_vector(testing::random_floats(6 * 24, rng), {6, 24}).eval();
    const Tensor shared = shared_value(x);
    const std::vector<float> want = testing::reference_tensor(shared).to_vector<float>();
    elements_seen = 0;
    std::atomic<int> ready{0}, mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        ready += 1;
        while (ready.load() < kThreads) std::this_thread::yield();
        const std::vector<float> got = shared.to_vector<float>();
        for (size_t i = 0; i < got.size(); ++i) {
          if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1.0f + std::fabs(want[i])))) {
            ++mismatches;
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << "round " << round;
    EXPECT_EQ(elements_seen.load(), once) << "round " << round << ": computed more than once";
  }
}

}  // namespace
}  // namespace kiln
