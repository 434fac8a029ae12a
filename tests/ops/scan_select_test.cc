// cumsum and topk (row ops beside the norms): values against loops written here from
// numpy's and PyTorch's definitions, every element checked on fresh random inputs; the
// order topk selects in (ties, NaN, smallest); fusion; errors at record time; trace files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// numpy.cumsum along each axis of a [4, 5, 6] x, through a fused prologue, in double.
TEST(Cumsum, MatchesARunningSumOnEveryAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<float> xv = testing::random_floats(120, rng);
  Tensor x = Tensor::from_vector(xv, shape);
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const std::vector<float> got = cumsum(x * 2.0f, axis - 3).to_vector<float>();
    ASSERT_EQ(got.size(), xv.size());
    for (int64_t e = 0; e < 120; ++e) {
      std::vector<int64_t> at = testing::unravel(e, shape);
      double want = 0;
      for (int64_t k = 0; k <= at[axis]; ++k) {
        std::vector<int64_t> from = at;
        from[axis] = k;
        want += 2.0 * xv[(from[0] * 5 + from[1]) * 6 + from[2]];
      }
      EXPECT_NEAR(got[e], want, 1e-5 * (1 + std::abs(want))) << "element " << e;
    }
  }
}

// A padding mask's running count gives position ids (PyTorch's mask.cumsum(-1) - 1): bool
// and i32 sum in I64, and integers wrap instead of saturating.
TEST(Cumsum, IntegersAndBoolSumInI64) {
  Tensor mask =
      Tensor::from_vector<bool>({true, true, true, false, false, false, true, true}, {2, 4});
  Tensor positions = cumsum(mask, -1) - 1;
  EXPECT_EQ(positions.dtype(), DType::I64);
  EXPECT_EQ(positions.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, -1, -1, 0, 1}));
  Tensor i = Tensor::from_vector(std::vector<int32_t>{2147483647, 1, -5}, {3});
  EXPECT_EQ(cumsum(i, 0).to_vector<int64_t>(),
            (std::vector<int64_t>{2147483647, 2147483648LL, 2147483643LL}));
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(cumsum(Tensor::from_vector(std::vector<int64_t>{big, 1}, {2}), 0).to_vector<int64_t>(),
            (std::vector<int64_t>{big, std::numeric_limits<int64_t>::min()}));
}

// A long row: the sum runs across every tile and thread chunk.
TEST(Cumsum, LongRowsOfOnesCountExactly) {
  Tensor ones = Tensor::ones({3, 5000});
  const std::vector<float> got = cumsum(ones, 1).to_vector<float>();
  for (int64_t e = 0; e < 15000; ++e) ASSERT_EQ(got[e], static_cast<float>(e % 5000 + 1)) << e;
}

// topk against a full stable sort of each row written here, for random rows with ties
// (values drawn from a few levels), on both axes, largest and smallest.
TEST(Topk, MatchesAStableSortOfEachRow) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  std::uniform_int_distribution<int> level(-4, 4);
  const int64_t rows = 7, cols = 50;
  std::vector<float> xv(rows * cols);
  for (float& v : xv) v = 0.5f * static_cast<float>(level(rng));
  Tensor x = Tensor::from_vector(xv, {rows, cols});
  for (bool largest : {true, false}) {
    for (int64_t k : {int64_t{1}, int64_t{6}, cols}) {
      SCOPED_TRACE(std::string(largest ? "largest" : "smallest") + " k " + std::to_string(k));
      TopK t = topk(x, k, -1, largest);
      ASSERT_EQ(t.indices.shape(), (std::vector<int64_t>{rows, k}));
      ASSERT_EQ(t.indices.dtype(), DType::I64);
      const std::vector<int64_t> idx = t.indices.to_vector<int64_t>();
      const std::vector<float> val = t.values.to_vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int64_t> order(cols);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? xv[r * cols + a] > xv[r * cols + b]
                         : xv[r * cols + a] < xv[r * cols + b];
        });
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(idx[r * k + j], order[j]) << "row " << r << " pick " << j;
          EXPECT_EQ(val[r * k + j], xv[r * cols + order[j]]) << "row " << r << " pick " << j;
        }
      }
    }
  }
  // Along axis 0: the columns' picks.
  TopK t = topk(x, 3, 0);
  const std::vector<int64_t> idx = t.indices.to_vector<int64_t>();
  for (int64_t c = 0; c < cols; ++c) {
    std::vector<int64_t> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return xv[a * cols + c] > xv[b * cols + c]; });
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(idx[j * cols + c], order[j]) << "column " << c;
  }
}

// NaN counts as the largest value (PyTorch's topk): first among the largest, last among
// the smallest; -0 and 0 are equal, so position decides.
TEST(Topk, NanIsLargestAndEqualValuesGoByPosition) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector(std::vector<float>{1, nan, -inf, 0, -0.0f, inf}, {6});
  EXPECT_EQ(topk(x, 6).indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 5, 0, 3, 4, 2}));
  EXPECT_EQ(topk(x, 6, 0, false).indices.to_vector<int64_t>(),
            (std::vector<int64_t>{2, 3, 4, 0, 5, 1}));
  const std::vector<float> v = topk(x, 2).values.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], inf);
  Tensor i = Tensor::from_vector(std::vector<int32_t>{3, -1, 3, 7}, {4});
  EXPECT_EQ(topk(i, 3).indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(topk(i, 3).values.to_vector<int32_t>(), (std::vector<int32_t>{7, 3, 3}));
}

// k = 0 selects nothing, along any axis and in every register class: empty results of the
// right shape, and nothing written (an empty output may have no storage; fuzz_ops found the
// kernel offsetting its null pointer for an axis other than the last).
TEST(Topk, ZeroKGivesEmptyResultsAlongAnyAxis) {
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    Tensor x = Tensor::from_vector(std::vector<float>(24, 1.0f), {3, 4, 2}).astype(dt);
    for (int axis : {0, 1, 2}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " axis " << axis);
      TopK none = topk(x, 0, axis);
      std::vector<int64_t> want = {3, 4, 2};
      want[axis] = 0;
      EXPECT_EQ(none.indices.shape(), want);
      EXPECT_EQ(none.values.shape(), want);
      EXPECT_TRUE(none.indices.to_vector<int64_t>().empty());
    }
  }
}

// Greedy and top-k sampling's shapes: logits from a matmul, the top 5 of each row, their
// softmax. The selection is one kernel; its values gather from the stored logits.
TEST(Topk, SelectsFromComputedLogitsInFewKernels) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  const std::vector<float> hv = testing::random_floats(2 * 8, rng);
  const std::vector<float> wv = testing::random_floats(8 * 300, rng);
  Tensor logits = matmul(Tensor::from_vector(hv, {2, 8}), Tensor::from_vector(wv, {8, 300}));
  TopK t = topk(logits, 5);
  Tensor probs = softmax(t.values);
  reset_stats();
  eval({probs, t.indices});
  EXPECT_EQ(stats().kernels_launched, 3) << "matmul, topk, softmax of the gathered values";
  const std::vector<float> p = probs.to_vector<float>();
  const std::vector<int64_t> idx = t.indices.to_vector<int64_t>();
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<double> row(300);
    for (int64_t n = 0; n < 300; ++n) {
      for (int64_t d = 0; d < 8; ++d) row[n] += double{hv[r * 8 + d]} * wv[d * 300 + n];
    }
    std::vector<int64_t> order(300);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    double total = 0;
    for (int64_t j = 0; j < 5; ++j) total += std::exp(row[order[j]] - row[order[0]]);
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(idx[r * 5 + j], order[j]) << "row " << r;
      EXPECT_NEAR(p[r * 5 + j], std::exp(row[order[j]] - row[order[0]]) / total, 1e-5);
    }
  }
}

TEST(ScanSelect, BadOperandsAreClearErrorsWhenRecorded) {
  Tensor x = Tensor::zeros({2, 3});
  testing::expect_error([&] { topk(x, 4); }, {"[topk_indices]", "k 4", "extent 3", "0 <= k <= 3"});
  testing::expect_error([&] { topk(x, -1, 0); }, {"[topk_indices]", "k -1", "extent 2"});
  testing::expect_error([&] { topk(x, 1, 2); }, {"[topk_indices]", "axis 2", "rank 2"});
  testing::expect_error([&] { topk(x.astype(DType::Bool), 1); }, {"[topk_indices]", "not bool"});
  testing::expect_error([&] { topk(Tensor::zeros({}), 0); }, {"[topk_indices]", "rank >= 1"});
  testing::expect_error([&] { cumsum(x, -3); }, {"[cumsum]", "axis -3", "rank 2"});
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(6, 0.0f)) << "x stays valid";
}

TEST(ScanSelect, TraceFilesDumpLoadAndReplay) {
  Tensor x = Tensor::from_vector(std::vector<float>{3, 1, 2, 5, 4, 6}, {2, 3});
  TopK t = topk(x, 2, 1, /*largest=*/false);
  std::vector<Tensor> outs = {cumsum(x, 0), t.indices, t.values};
  const std::string json = dump_trace(outs, DumpFormat::Json);
  EXPECT_NE(json.find("\"op\":\"cumsum\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"largest\":false"), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) inputs[in.name] = x;
  std::vector<Tensor> again = trace.run(inputs);
  EXPECT_EQ(again[0].to_vector<float>(), (std::vector<float>{3, 1, 2, 8, 5, 8}));
  EXPECT_EQ(again[1].to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 0}));
  EXPECT_EQ(again[2].to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
}

}  // namespace
}  // namespace kiln
