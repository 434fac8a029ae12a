// kiln::compile: replays are right (checked element by element against the same function run
// eagerly on fresh random data), a new signature records again, and nothing stale comes back.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::random_floats;
using testing::test_seed;
using testing::values;

Tensor random_tensor(std::vector<int64_t> shape, std::mt19937_64& rng) {
  return Tensor::from_vector(random_floats(testing::count(shape), rng), shape);
}

void expect_same_values(const Tensor& want, const Tensor& got) {
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_EQ(want.dtype(), got.dtype());
  const std::vector<double> w = values(want), g = values(got);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], g[i]) << "element " << i;
}

// A two-layer MLP with weights captured from outside, as an application would write it.
struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(std::mt19937_64& rng)
      : w1(random_tensor({16, 32}, rng)),
        b1(random_tensor({32}, rng)),
        w2(random_tensor({32, 8}, rng)),
        b2(random_tensor({8}, rng)) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = relu(matmul(in[0], w1) + b1);
    return {softmax(matmul(h, w2) + b2), sum(h, {1})};
  }
};

// A decode step's RoPE takes its positions as a tensor: each call with new positions replays
// the one recording and gives what eager rope gives.
TEST(CompileTest, RopeTakesNewPositionsWithoutRecordingAgain) {
  Compiled turn = compile([](const std::vector<Tensor>& in) {
    return std::vector{rope(in[0], in[1], RopePairs::Halves, 500.0) * 2.0};
  });
  const Tensor x = Tensor::randn({1, 1, 3, 8}, 7).eval();
  for (int64_t position : {0, 1, 700, 65000}) {
    const Tensor positions = Tensor::full({1, 1}, static_cast<double>(position), DType::I64);
    const Stats before = stats();
    const std::vector<Tensor> got = turn({x, positions});
    EXPECT_EQ(stats().compiled_records - before.compiled_records, position == 0 ? 1 : 0);
    expect_same_values(rope(x, positions, RopePairs::Halves, 500.0) * 2.0, got[0]);
  }
  EXPECT_EQ(turn.num_signatures(), 1u);
}

TEST(CompileTest, ReplaysWithoutRecordingAndMatchesEagerOnFreshData) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  Mlp mlp(rng);
  Compiled fast = compile(mlp);
  for (int call = 0; call < 5; ++call) {
    Tensor x = random_tensor({4, 16}, rng);
    const Stats before = stats();
    std::vector<Tensor> got = fast({x});
    const Stats after = stats();
    EXPECT_EQ(after.compiled_records - before.compiled_records, call == 0 ? 1 : 0);
    EXPECT_EQ(after.compiled_replays - before.compiled_replays, call == 0 ? 0 : 1);
    if (call > 0) {
      EXPECT_EQ(after.plans_built, before.plans_built);
      EXPECT_EQ(after.plan_cache_hits, before.plan_cache_hits);  // no trace, no lookup
      EXPECT_GT(after.kernels_launched, before.kernels_launched);
    }
    std::vector<Tensor> want = mlp({x});
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i].is_realized());
      expect_same_values(want[i], got[i]);
    }
  }
  EXPECT_EQ(fast.num_signatures(), 1u);
}

TEST(CompileTest, NewSignatureRecordsAgainAndOldOnesStillReplay) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  Mlp mlp(rng);
  Compiled fast = compile(mlp);
  for (int64_t batch : {4, 9, 4, 1, 9}) {
    Tensor x = random_tensor({batch, 16}, rng);
    std::vector<Tensor> got = fast({x});
    std::vector<Tensor> want = mlp({x});
    for (size_t i = 0; i < got.size(); ++i) expect_same_values(want[i], got[i]);
  }
  EXPECT_EQ(fast.num_signatures(), 3u);
  // A different dtype is a different signature too, and its result has that dtype.
  Compiled twice = compile([](const std::vector<Tensor>& in) { return std::vector{in[0] * 2}; });
  std::vector<Tensor> f = twice({Tensor::from_vector<float>({1.5f}, {1})});
  std::vector<Tensor> d = twice({Tensor::from_vector<double>({2.25}, {1})});
  EXPECT_EQ(f[0].dtype(), DType::F32);
  EXPECT_EQ(d[0].dtype(), DType::F64);
  EXPECT_EQ(d[0].item(), 4.5);
  EXPECT_EQ(twice.num_signatures(), 2u);
}

TEST(CompileTest, EarlierOutputsAreNeverOverwrittenByLaterCalls) {
  Compiled square =
      compile([](const std::vector<Tensor>& in) { return std::vector{in[0] * in[0]}; });
  Tensor first = square({Tensor::from_vector<float>({1, 2, 3}, {3})})[0];
  Tensor second = square({Tensor::from_vector<float>({4, 5, 6}, {3})})[0];
  Tensor third = square({Tensor::from_vector<float>({7, 8, 9}, {3})})[0];
  EXPECT_EQ(first.to_vector<float>(), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(second.to_vector<float>(), (std::vector<float>{16, 25, 36}));
  EXPECT_EQ(third.to_vector<float>(), (std::vector<float>{49, 64, 81}));
}

TEST(CompileTest, OutputsThatAreInputsConstantsOrRepeatsReplayRight) {
  Tensor captured = Tensor::from_vector<float>({10, 20}, {2}).eval();
  Compiled fn = compile([&](const std::vector<Tensor>& in) {
    Tensor s = in[0] + in[1];
    return std::vector{in[1], captured, s, s, in[0] * 3};
  });
  for (float base : {1.0f, 5.0f, -2.0f}) {
    Tensor a = Tensor::from_vector<float>({base, base + 1}, {2});
    Tensor b = Tensor::from_vector<float>({base * 2, base * 3}, {2});
    std::vector<Tensor> out = fn({a, b});
    ASSERT_EQ(out.size(), 5u);
    EXPECT_EQ(out[0].to_vector<float>(), b.to_vector<float>());
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{10, 20}));
    EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{base * 3, base * 4 + 1}));
    EXPECT_EQ(out[3].to_vector<float>(), out[2].to_vector<float>());
    EXPECT_EQ(out[4].to_vector<float>(), (std::vector<float>{base * 3, (base + 1) * 3}));
  }
  // The same tensor passed as both arguments, then two different ones: each call is right.
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  Tensor y = Tensor::from_vector<float>({5, 7}, {2});
  EXPECT_EQ(fn({x, x})[2].to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(fn({x, y})[2].to_vector<float>(), (std::vector<float>{6, 9}));
  EXPECT_EQ(fn({y, y})[2].to_vector<float>(), (std::vector<float>{10, 14}));
}

TEST(CompileTest, LazyInputsAreComputedFirst) {
  Compiled fn = compile([](const std::vector<Tensor>& in) { return std::vector{exp(in[0])}; });
  for (float v : {0.0f, 1.0f, 2.0f}) {
    Tensor lazy = Tensor::full({3}, v) * 2 - 1;  // pending when passed in
    EXPECT_FALSE(lazy.is_realized());
    std::vector<float> got = fn({lazy})[0].to_vector<float>();
    for (float g : got) EXPECT_FLOAT_EQ(g, std::exp(2 * v - 1));
  }
}

TEST(CompileTest, AFunctionThatReadsDataRecordsEveryCall) {
  // Which branch runs depends on the data: replaying the first call's branch would be wrong.
  Compiled branchy = compile([](const std::vector<Tensor>& in) {
    const bool positive = sum(in[0]).item() > 0;
    return std::vector{positive ? in[0] * 2 : in[0] * -10};
  });
  const Stats before = stats();
  EXPECT_EQ(branchy({Tensor::from_vector<float>({1, 2}, {2})})[0].to_vector<float>(),
            (std::vector<float>{2, 4}));
  EXPECT_EQ(branchy({Tensor::from_vector<float>({-1, -2}, {2})})[0].to_vector<float>(),
            (std::vector<float>{10, 20}));
  EXPECT_EQ(branchy({Tensor::from_vector<float>({3, -1}, {2})})[0].to_vector<float>(),
            (std::vector<float>{6, -2}));
  EXPECT_EQ(stats().compiled_replays, before.compiled_replays);
  EXPECT_EQ(stats().compiled_records - before.compiled_records, 3);
}

TEST(CompileTest, CheckEveryCallCatchesChangedCapturesThatReplayWouldMiss) {
  float scale = 2;
  Tensor bias = Tensor::from_vector<float>({1}, {1}).eval();
  auto fn = [&](const std::vector<Tensor>& in) { return std::vector{in[0] * scale + bias}; };
  Compiled checked = compile(fn, {.check_every_call = true});
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_EQ(checked({x})[0].to_vector<float>(), (std::vector<float>{3, 5}));
  EXPECT_EQ(checked({x})[0].to_vector<float>(), (std::vector<float>{3, 5}));
  scale = 3;  // a captured scalar changes
  testing::expect_error([&] { checked({x}); }, {"[compile]", "scalar it captures changed"});
  scale = 2;
  bias = Tensor::from_vector<float>({100}, {1}).eval();  // a captured tensor changes
  testing::expect_error([&] { checked({x}); }, {"[compile]", "tensor it captures changed"});
  // The documented contract without the check: captures are constants of the recording.
  bias = Tensor::from_vector<float>({1}, {1}).eval();
  Compiled plain = compile(fn);
  EXPECT_EQ(plain({x})[0].to_vector<float>(), (std::vector<float>{3, 5}));
  EXPECT_EQ(plain({x})[0].to_vector<float>(), (std::vector<float>{3, 5}));
}

TEST(CompileTest, ErrorsLeaveTheFunctionUsable) {
  bool fail = true;
  Compiled fn = compile([&](const std::vector<Tensor>& in) {
    if (fail) return std::vector{matmul(in[0], in[0])};  // 1x3 @ 1x3: a shape error
    return std::vector{in[0] + 1};
  });
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  testing::expect_error([&] { fn({x}); }, {"matmul"});
  EXPECT_EQ(fn.num_signatures(), 0u);
  fail = false;
  EXPECT_EQ(fn({x})[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(fn({x})[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
  testing::expect_error([&] { fn({Tensor()}); }, {"[compile]", "input 0", "empty"});
  testing::expect_error([] { compile(Fn()); }, {"[compile]", "empty"});
}

TEST(CompileTest, SignaturesAreBounded) {
  Compiled fn = compile([](const std::vector<Tensor>& in) { return std::vector{in[0] + 1}; },
                        {.max_signatures = 3});
  for (int64_t n = 1; n <= 10; ++n) {
    std::vector<float> got = fn({Tensor::zeros({n})})[0].to_vector<float>();
    EXPECT_EQ(got, std::vector<float>(n, 1.0f));
  }
  EXPECT_EQ(fn.num_signatures(), 3u);
}

TEST(CompileTest, ThreadsShareOneCompiledFunction) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 seed_rng(test_seed());
  Mlp mlp(seed_rng);
  Compiled fast = compile(mlp);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(test_seed() + t);
      for (int call = 0; call < 20; ++call) {
        Tensor x = random_tensor({1 + (call % 3), 16}, rng);
        std::vector<Tensor> got = fast({x});
        std::vector<Tensor> want = mlp({x});
        if (values(got[0]) != values(want[0]) || values(got[1]) != values(want[1])) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(fast.num_signatures(), 3u);
}

}  // namespace
}  // namespace kiln
