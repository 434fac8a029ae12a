// The CPU GEMM's packed weights through the public API: a budget the user sets, evictions
// counted in stats(), and packed copies that live exactly as long as their weight's
// contents. Every product is checked against the reference evaluator (a quantized weight's
// against the exact product, within the accuracy contract).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/quantized_dot.h"
#include "tests/quantized_util.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using runtime::cpu::packed_weight_stats;

class PackedWeightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (default_device().type != DeviceType::CPU) GTEST_SKIP() << "packed weights are the CPU's";
    runtime::cpu::clear_packed_weights();
    budget_ = packed_weight_budget();
  }
  void TearDown() override {
    if (default_device().type != DeviceType::CPU) return;
    set_packed_weight_budget(budget_);
    runtime::cpu::clear_packed_weights();
  }

  // linear(x, w) for a batch of one, checked element by element against the reference.
  void check_linear(const Tensor& x, const Tensor& w) {
    Tensor y = linear(x, w, Tensor::zeros({w.shape()[0]}));
    const std::vector<float> want = testing::reference_tensor(y).to_vector<float>();
    const std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "element " << i;
    }
  }

  std::mt19937_64 rng_{testing::test_seed() + 40};

 private:
  int64_t budget_ = 0;
};

// Four weights used in turn, as a model's layers are. Under a budget of two and a half
// weights every use repacks one and evicts another, and stats() counts it; under a budget
// that holds them all, each is packed once and nothing is evicted.
TEST_F(PackedWeightTest, BudgetIsASettingAndEvictionsAreCounted) {
  const int64_t in = 96, out = 160;
  std::vector<Tensor> weights;
  for (int i = 0; i < 4; ++i) {
    weights.push_back(
        Tensor::from_vector(testing::random_floats(out * in, rng_), {out, in}).eval());
  }
  const Tensor x = Tensor::from_vector(testing::random_floats(in, rng_), {1, in}).eval();
  // The packed size of one weight: use one twice.
  check_linear(x, weights[0]);
  check_linear(x, weights[0]);
  const int64_t one = packed_weight_stats().bytes;
  ASSERT_GT(one, 0) << "a weight used twice is kept";
  runtime::cpu::clear_packed_weights();

  set_packed_weight_budget(one * 5 / 2);
  EXPECT_EQ(packed_weight_budget(), one * 5 / 2);
  const int64_t evictions_before = stats().packed_weight_evictions;
  for (int pass = 0; pass < 3; ++pass) {
    for (const Tensor& w : weights) check_linear(x, w);
  }
  EXPECT_GT(stats().packed_weight_evictions - evictions_before, 0);
  EXPECT_LE(packed_weight_stats().bytes, one * 5 / 2);

  set_packed_weight_budget(one * 8);
  runtime::cpu::clear_packed_weights();
  reset_stats();
  for (int pass = 0; pass < 2; ++pass) {
    for (const Tensor& w : weights) check_linear(x, w);
  }
  const int64_t packs = packed_weight_stats().packs;
  for (int pass = 0; pass < 3; ++pass) {
    for (const Tensor& w : weights) check_linear(x, w);
  }
  EXPECT_EQ(packed_weight_stats().packs, packs) << "a kept weight was packed again";
  EXPECT_EQ(stats().packed_weight_evictions, 0);
  EXPECT_EQ(packed_weight_stats().entries, 4);
  // A smaller budget drops what no longer fits at once.
  set_packed_weight_budget(one);
  EXPECT_LE(packed_weight_stats().bytes, one);
  EXPECT_GE(stats().packed_weight_evictions, 3);
}

// A packed copy belongs to its weight's contents: freeing the weight frees it, and writing
// the weight's buffer (an in-place update) drops it, so the next product packs the new
// values.
TEST_F(PackedWeightTest, PackedCopiesLiveAsLongAsTheirWeight) {
  const int64_t in = 64, out = 48;
  const Tensor x = Tensor::from_vector(testing::random_floats(in, rng_), {1, in}).eval();
  Tensor w = Tensor::from_vector(testing::random_floats(out * in, rng_), {out, in}).eval();
  check_linear(x, w);
  check_linear(x, w);
  ASSERT_EQ(packed_weight_stats().entries, 1);
  w = Tensor();
  EXPECT_EQ(packed_weight_stats().entries, 0) << "the weight is gone, so is its packed copy";
  EXPECT_EQ(packed_weight_stats().bytes, 0);

  Tensor v = Tensor::from_vector(testing::random_floats(out * in, rng_), {out, in}).eval();
  check_linear(x, v);
  check_linear(x, v);
  ASSERT_EQ(packed_weight_stats().entries, 1);
  // The only handle replaced: the update is written into v's own buffer.
  v = update_slice(v, Tensor::from_vector(testing::random_floats(in, rng_), {1, in}), 0, 5);
  v.eval();
  EXPECT_EQ(packed_weight_stats().entries, 0) << "v's buffer was written";
  check_linear(x, v);  // the new values, against the reference
  check_linear(x, v);
  EXPECT_EQ(packed_weight_stats().entries, 1);
}

// A block-quantized weight's decoded panels are kept like a packed f32 weight, for products
// of 16 to 63 rows (where the panel kernel runs and its decoding is a large share): the
// second call decodes into a copy that is kept, the third uses it, every call gives the same
// bits within the accuracy contract, 64 rows and more keep nothing, and dropping the weight
// drops its panels. Without VNNI (no panel kernel) nothing is kept.
TEST_F(PackedWeightTest, QuantizedWeightsKeepTheirDecodedPanelsForFewRows) {
  const bool panels = runtime::cpu::panel_kernel().run != nullptr;
  for (DType format : {DType::Q8_0, DType::Q4_K}) {
    SCOPED_TRACE(dtype_name(format));
    runtime::cpu::clear_packed_weights();
    const int64_t n = 40, k = 512;
    Tensor w = testing::random_block_tensor(format, {n, k}, rng_);
    const std::vector<float> wf = w.astype(DType::F32).to_vector<float>();
    for (const int64_t rows : {int64_t{20}, int64_t{80}}) {
      const std::vector<float> x = testing::random_floats(rows * k, rng_);
      const Tensor xt = Tensor::from_vector(x, {rows, k}).eval();
      const int64_t before = packed_weight_stats().entries, hits = packed_weight_stats().hits;
      std::vector<float> first;
      for (int call = 0; call < 3; ++call) {
        const std::vector<float> y = linear(xt, w).to_vector<float>();
        if (call == 0) {
          first = y;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < n; ++j) {
              double exact = 0;
              for (int64_t i = 0; i < k; ++i) exact += double{x[r * k + i]} * wf[j * k + i];
              ASSERT_NEAR(y[r * n + j], exact,
                          testing::quantized_product_bound(&x[r * k], &wf[j * k], k));
            }
          }
        } else {
          ASSERT_EQ(y, first) << "call " << call << ", " << rows << " rows";
        }
      }
      const int64_t kept = panels && rows < 64 ? 1 : 0;
      EXPECT_EQ(packed_weight_stats().entries - before, kept) << rows << " rows";
      EXPECT_EQ(packed_weight_stats().hits - hits, kept) << rows << " rows: the third call's";
    }
    w = Tensor();
    EXPECT_EQ(packed_weight_stats().entries, 0) << "the weight is gone, so are its panels";
  }
  // Panels larger than the budget are never kept (and not copied on every call).
  set_packed_weight_budget(1024);
  const Tensor w = testing::random_block_tensor(DType::Q8_0, {64, 512}, rng_);
  const Tensor x = Tensor::from_vector(testing::random_floats(20 * 512, rng_), {20, 512}).eval();
  const std::vector<float> first = linear(x, w).to_vector<float>();
  for (int call = 1; call < 3; ++call) EXPECT_EQ(linear(x, w).to_vector<float>(), first);
  EXPECT_EQ(packed_weight_stats().entries, 0);
}

}  // namespace
}  // namespace kiln
