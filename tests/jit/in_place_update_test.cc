// In-place updates (update_slice on a buffer nothing else sees) inside larger syncs: lazy
// constants as the update, several caches written in one sync next to masked attention, and
// many outputs at once; and update_slice with a start tensor (eager, compiled, trace files,
// the CUDA emulation). Results are checked element by element against the reference
// evaluator, which computes the same graph without writing anything in place, or a host copy.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/kiln.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/expect_emulated.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

void expect_same_floats(const Tensor& got, const Tensor& want, const char* what) {
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], w[i], 1e-5f * (1.0f + std::abs(w[i]))) << what << " element " << i;
  }
}

// The update is a lazy constant: the sync's trace has a kernel for the constant next to the
// in-place write, so the write's output is not the first buffer the backend places.
TEST(InPlaceUpdate, LazyConstantUpdate) {
  Tensor a = Tensor::zeros({4, 8}).eval();
  a = update_slice(a, Tensor::ones({1, 8}), 0, 1);
  a.eval();
  std::vector<float> want(32, 0.0f);
  for (int j = 8; j < 16; ++j) want[j] = 1.0f;
  EXPECT_EQ(a.to_vector<float>(), want);
}

// A decode step with a padding mask: two caches written in place and masked grouped-query
// attention over them, all three outputs evaluated in one sync, over several steps with
// fresh random values (the step count grows the number of buffers the backend holds).
TEST(InPlaceUpdate, TwoCachesAndMaskedAttentionInOneSync) {
  std::mt19937_64 rng(testing::test_seed() + 34);
  SCOPED_TRACE(testing::test_seed());
  const int64_t H = 4, Hkv = 2, C = 128, D = 16;
  Tensor kc = Tensor::zeros({1, Hkv, C, D}).eval(), vc = Tensor::zeros({1, Hkv, C, D}).eval();
  for (int64_t pos = 0; pos < 12; ++pos) {
    Tensor q = Tensor::from_vector(testing::random_floats(H * D, rng), {1, H, 1, D});
    std::vector<int32_t> filled(C, 0);
    for (int64_t j = 0; j <= pos; ++j) filled[j] = 1;
    Tensor m = Tensor::from_vector(filled, {1, 1, 1, C}) > 0.0;
    Tensor k_step = Tensor::from_vector(testing::random_floats(Hkv * D, rng), {1, Hkv, 1, D});
    Tensor v_step = Tensor::from_vector(testing::random_floats(Hkv * D, rng), {1, Hkv, 1, D});
    kc = update_slice(kc, k_step, 2, pos);
    vc = update_slice(vc, v_step, 2, pos);
    Tensor out = scaled_dot_product_attention(q, kc, vc, m);
    const Tensor want_out = testing::reference_tensor(out);
    const Tensor want_k = testing::reference_tensor(kc);
    const Tensor want_v = testing::reference_tensor(vc);
    eval({out, kc, vc});
    SCOPED_TRACE(pos);
    expect_same_floats(out, want_out, "attention");
    expect_same_floats(kc, want_k, "k cache");
    expect_same_floats(vc, want_v, "v cache");
  }
}

// Many caches updated in one sync, each by a lazy expression, with a reader of each: the
// backend's buffer table grows through several rehashes while in-place outputs are placed.
TEST(InPlaceUpdate, ManyCachesInOneSync) {
  std::mt19937_64 rng(testing::test_seed() + 35);
  SCOPED_TRACE(testing::test_seed());
  const int caches = 24;
  std::vector<Tensor> cache(caches);
  for (Tensor& c : cache) c = Tensor::zeros({3, 16}).eval();
  std::vector<Tensor> outputs, wants;
  for (int i = 0; i < caches; ++i) {
    Tensor step = Tensor::from_vector(testing::random_floats(16, rng), {1, 16}) * 2.0 + 1.0;
    cache[i] = update_slice(cache[i], step, 0, i % 3);
    Tensor total = sum(cache[i], {1});
    outputs.push_back(cache[i]);
    outputs.push_back(total);
  }
  for (const Tensor& o : outputs) wants.push_back(testing::reference_tensor(o));
  eval(outputs);
  for (size_t i = 0; i < outputs.size(); ++i) expect_same_floats(outputs[i], wants[i], "output");
}

// update_slice with a start tensor: one plan for every position (the start is read when the
// kernel runs), the cache still written in place, every element against a host copy.
TEST(UpdateSliceStartTensor, WritesWhereTheTensorSaysInPlace) {
  std::mt19937_64 rng(testing::test_seed() + 36);
  SCOPED_TRACE(testing::test_seed());
  const int64_t heads = 2, capacity = 40, dim = 8;
  std::vector<float> want(heads * capacity * dim, 0.0f);
  Tensor cache = Tensor::zeros({heads, capacity, dim}).eval();
  Stats after_second{};
  for (int64_t step = 0; step < capacity; ++step) {
    const int64_t pos = (step * 7) % capacity;  // positions out of order
    const std::vector<float> values = testing::random_floats(heads * dim, rng);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) want[(h * capacity + pos) * dim + d] = values[h * dim + d];
    }
    const Stats before = stats();
    const Tensor start = Tensor::from_vector(std::vector<int64_t>{pos}, {});
    cache = update_slice(cache, Tensor::from_vector(values, {heads, 1, dim}), 1, start);
    cache.eval();
    EXPECT_EQ(stats().bytes_allocated - before.bytes_allocated,
              (heads * dim * 4 + 8) * testing::buffers_per_host_tensor())
        << "step " << step << ": only the step's inputs are allocated (written in place)";
    if (step == 1) after_second = stats();
  }
  EXPECT_EQ(stats().plans_built, after_second.plans_built) << "a plan was built after step 2";
  EXPECT_EQ(cache.to_vector<float>(), want);
  // An I32 start computed in the same sync as the write.
  Tensor pos = Tensor::from_vector(std::vector<int32_t>{3}, {}) * 2.0 + 1.0;  // 7
  cache = update_slice(cache, Tensor::full({heads, 2, dim}, -1.0), 1, pos);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t p = 7; p < 9; ++p) {
      for (int64_t d = 0; d < dim; ++d) want[(h * capacity + p) * dim + d] = -1.0f;
    }
  }
  EXPECT_EQ(cache.to_vector<float>(), want);
}

// A start tensor of the wrong kind is an error when recorded; one outside x is an error at
// the sync, which leaves the cache as it was.
TEST(UpdateSliceStartTensor, BadStartsAreErrors) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).eval();
  const Tensor u = Tensor::ones({2, 2});
  testing::expect_error([&] { update_slice(x, u, 1, Tensor::zeros({}, DType::F32)); },
                        {"[update_slice]", "start must be one I32 or I64 value"});
  testing::expect_error([&] { update_slice(x, u, 1, Tensor::zeros({2}, DType::I64)); },
                        {"[update_slice]", "start must be one I32 or I64 value"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 4}), 1, Tensor::zeros({}, DType::I64));
      },
      {"[update_slice]", "do not fit"});
  for (int64_t bad : {-1, 2, 100}) {
    SCOPED_TRACE(bad);
    Tensor y = update_slice(x, u, 1, Tensor::from_vector(std::vector<int64_t>{bad}, {}));
    testing::expect_error([&] { y.eval(); },
                          {"[update_slice]", "start " + std::to_string(bad), "0 <= start <= 1"});
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // The reference evaluator checks it too.
  testing::expect_error(
      [&] {
        testing::reference_tensor(
            update_slice(x, u, 1, Tensor::from_vector(std::vector<int32_t>{5}, {})));
      },
      {"[update_slice]", "start 5"});
}

// A trace file keeps the start tensor as an input of its own, so a replay writes where the
// new input says.
TEST(UpdateSliceStartTensor, TraceFilesDumpLoadAndReplay) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  Tensor u = Tensor::from_vector(std::vector<float>{9}, {1});
  Tensor start = Tensor::from_vector(std::vector<int64_t>{1}, {});
  const Tensor y = update_slice(x, u, 0, start);
  const std::string json = dump_trace({y}, DumpFormat::Json);
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.inputs().size(), 3u);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) {
    inputs[in.name] = in.dtype == DType::I64 ? Tensor::from_vector(std::vector<int64_t>{3}, {})
                      : in.shape == std::vector<int64_t>{4} ? x
                                                            : u;
  }
  EXPECT_EQ(trace.run(inputs)[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 9}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 9, 3, 4}));
}

// A whole decode step compiled once: two caches written at a position given as a tensor,
// masked attention over them. Each call writes where its position says (an integer start
// would be a constant of the recording); every step against the same step run eagerly.
TEST(UpdateSliceStartTensor, CompiledDecodeStepWithAMovingPosition) {
  std::mt19937_64 rng(testing::test_seed() + 37);
  SCOPED_TRACE(testing::test_seed());
  const int64_t H = 4, Hkv = 2, C = 16, D = 8;
  auto step = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    // in: k cache, v cache, q, k step, v step, position (I64), mask (bool over the cache)
    Tensor k = update_slice(in[0], in[3], 2, in[5]);
    Tensor v = update_slice(in[1], in[4], 2, in[5]);
    return {scaled_dot_product_attention(in[2], k, v, in[6]), k, v};
  };
  Compiled compiled = compile(step);
  Tensor kc = Tensor::zeros({1, Hkv, C, D}).eval(), vc = Tensor::zeros({1, Hkv, C, D}).eval();
  Tensor kc_eager = kc, vc_eager = vc;
  const int64_t records_before = stats().compiled_records;
  for (int64_t pos = 0; pos < 10; ++pos) {
    std::vector<int32_t> filled(C, 0);
    for (int64_t j = 0; j <= pos; ++j) filled[j] = 1;
    const std::vector<Tensor> in = {
        kc,
        vc,
        Tensor::from_vector(testing::random_floats(H * D, rng), {1, H, 1, D}),
        Tensor::from_vector(testing::random_floats(Hkv * D, rng), {1, Hkv, 1, D}),
        Tensor::from_vector(testing::random_floats(Hkv * D, rng), {1, Hkv, 1, D}),
        Tensor::from_vector(std::vector<int64_t>{pos}, {}),
        Tensor::from_vector(filled, {1, 1, 1, C}) > 0.0};
    std::vector<Tensor> got = compiled(in);
    std::vector<Tensor> eager_in = in;
    eager_in[0] = kc_eager;
    eager_in[1] = vc_eager;
    std::vector<Tensor> want = step(eager_in);
    eval(want);
    SCOPED_TRACE(pos);
    expect_same_floats(got[0], want[0], "attention");
    expect_same_floats(got[1], want[1], "k cache");
    expect_same_floats(got[2], want[2], "v cache");
    kc = got[1];
    vc = got[2];
    kc_eager = want[1];
    vc_eager = want[2];
  }
  EXPECT_EQ(stats().compiled_records - records_before, 1) << "one recording, then replays";
}

// The CUDA kernel reads the start tensor too, and reports one outside x to the host.
class StartTensorEmulationTest : public testing::ScratchDirTest {};

TEST_F(StartTensorEmulationTest, KernelReadsTheStartAndReportsOneOutsideX) {
  std::mt19937_64 rng(testing::test_seed() + 38);
  Tensor x = Tensor::from_vector(testing::random_floats(3 * 10 * 4, rng), {3, 10, 4}).eval();
  Tensor u = Tensor::from_vector(testing::random_floats(3 * 2 * 4, rng), {3, 2, 4}).eval();
  testing::EmulatedPlans plans;
  std::vector<Tensor> cpu;
  for (const Tensor& start : {Tensor::from_vector(std::vector<int64_t>{5}, {}),
                              Tensor::from_vector(std::vector<int32_t>{8}, {}),
                              Tensor::from_vector(std::vector<int64_t>{9}, {})}) {
    cpu.push_back(update_slice(x, u * 2.0, 1, start) + 1.0);
    plans.add(cpu.back());
  }
  testing::expect_cases_then_index_error(plans, cpu, dir_.string(),
                                         {"[update_slice]", "start 9", "0 <= start <= 8"});
}

}  // namespace
}  // namespace kiln
