// Sums over at most two elements per result (four in f64) are computed as expressions
// (jit/fusion/short_sum.h): checked element by element, bit for bit, against the reference
// evaluator (which adds each reduction's elements in double and rounds once), over every
// axis layout, dtype and fusion neighbour, with their kernel counts.
#include "jit/fusion/short_sum.h"

#include <random>
#include <vector>

#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

Tensor random_input(const std::vector<int64_t>& shape, std::mt19937_64& rng,
                    DType dtype = DType::F32) {
  const std::vector<float> values = testing::random_floats(testing::count(shape), rng);
  const Tensor x = Tensor::from_vector(values, shape);
  return dtype == DType::F32 ? x : x.astype(dtype);
}

// Evaluates `t` alone and checks every element against the reference evaluator, exactly;
// returns the kernels the sync launched.
int64_t check_against_reference(const Tensor& t) {
  const std::vector<double> want = testing::values(testing::reference_tensor(t));
  reset_stats();
  eval({t});
  const int64_t kernels = stats().kernels_launched;
  const std::vector<double> got = testing::values(t);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "element " << i << " of " << t.shape().size() << "-d result";
  }
  return kernels;
}

TEST(ShortSum, EveryAxisLayoutAndDtypeMatchesTheReductionBitForBit) {
  std::mt19937_64 rng(testing::test_seed());
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> axes;
  };
  const std::vector<Case> cases = {
      {{301, 2}, {1}},      {{301, 3}, {-1}},       {{4, 77}, {0}}, {{2, 50, 3}, {1}},
      {{2, 33, 2}, {0, 2}}, {{37, 1}, {1}},         {{3}, {0}},     {{2, 2}, {0, 1}},
      {{5, 4, 9}, {1}},     {{1, 2, 1, 2}, {1, 3}}, {{64, 5}, {1}},  // 5: a reduction kernel
  };
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (const Case& c : cases) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " axes of rank " << c.shape.size()
                                          << " keepdims " << keepdims);
        const Tensor x = random_input(c.shape, rng, dtype);
        check_against_reference(sum(x * x - 0.25, c.axes, keepdims));
        check_against_reference(sum(x, c.axes, keepdims) * 3.0);
      }
    }
  }
}

TEST(ShortSum, OnlyFloatingSumsOfTwoTermsOrFourOfF64AreUnrolled) {
  std::mt19937_64 rng(testing::test_seed());
  const Tensor x2 = random_input({16, 2}, rng), x5 = random_input({16, 5}, rng);
  const auto is_unrolled = [](const Tensor& t) {
    const auto& node = detail::TensorAccess::node(t);
    const jit::Trace trace = jit::build_trace({node.get()});
    return jit::is_unrolled_sum(trace, trace.outputs[0]);
  };
  const Tensor d2 = x2.astype(DType::F64);
  EXPECT_TRUE(is_unrolled(sum(x2, 1)));
  EXPECT_TRUE(is_unrolled(sum(x2.astype(DType::BF16), 1)));
  EXPECT_TRUE(is_unrolled(sum(x2.slice(0, 0, 1), {0, 1})));   // 2 terms over two axes
  EXPECT_FALSE(is_unrolled(sum(x2.slice(0, 0, 2), {0, 1})));  // 4 terms of f32
  EXPECT_TRUE(is_unrolled(sum(d2.slice(0, 0, 2), {0, 1})));   // 4 terms of f64
  EXPECT_FALSE(is_unrolled(sum(d2.slice(0, 0, 3), {0, 1})));  // 6
  EXPECT_FALSE(is_unrolled(sum(x5, 1)));
  EXPECT_FALSE(is_unrolled(sum(x2.astype(DType::I32), 1)));
  EXPECT_FALSE(is_unrolled(mean(x2, {1})));
  EXPECT_FALSE(is_unrolled(max(x2, 1)));
}

// k-means' nearest center: the squared distances by broadcasting, summed over the
// coordinates, then argmin. A sum of two f32 coordinates (up to four f64) fuses into the
// argmin's kernel, so the distances are never stored; more keep the reduction kernel.
TEST(ShortSum, DistancesAndTheirArgminAreOneKernel) {
  std::mt19937_64 rng(testing::test_seed());
  for (DType dtype : {DType::F32, DType::F64}) {
    for (int64_t dims : {2, 3, 4, 5}) {
      SCOPED_TRACE(::testing::Message() << dims << " coordinates of " << dtype_name(dtype));
      const Tensor points = random_input({1000, dims}, rng, dtype).eval();
      const Tensor centers = random_input({7, dims}, rng, dtype).eval();
      const Tensor d2 = sum(square(points.unsqueeze(1) - centers.unsqueeze(0)), 2);
      const bool unrolled = dims <= (dtype == DType::F64 ? jit::kMaxUnrolledSum : 2);
      EXPECT_EQ(check_against_reference(argmin(d2, 1)), unrolled ? 1 : 2);
      EXPECT_EQ(check_against_reference(d2), 1);
    }
  }
}

// A sum read through a reshape that strides cannot express is stored first, then read.
TEST(ShortSum, ReadThroughAReshapeItIsStoredFirst) {
  std::mt19937_64 rng(testing::test_seed());
  const Tensor x = random_input({6, 4, 2}, rng);
  const Tensor flat = sum(x * x + 1.0, 2).transpose(0, 1).reshape({24});
  check_against_reference(flat * 2.0 + 1.0);
  check_against_reference(sum(x, 2).reshape({3, 8}).transpose(0, 1) - 1.0);
}

}  // namespace
}  // namespace kiln
