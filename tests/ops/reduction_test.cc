// Reductions over any axes against long-double loops written here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::close;

// Reduces `data` of `shape` over `axes` (non-negative) with `kind` in long double.
std::vector<long double> reference_reduce(const std::vector<double>& data,
                                          const std::vector<int64_t>& shape,
                                          const std::vector<int>& axes, const std::string& kind) {
  std::vector<int64_t> out_shape;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out_shape.push_back(shape[d]);
  }
  int64_t out_n = testing::count(out_shape);
  std::vector<long double> acc(out_n, kind == "max" ? -INFINITY : kind == "min" ? INFINITY : 0);
  std::vector<int64_t> counts(out_n, 0);
  for (int64_t i = 0; i < testing::count(shape); ++i) {
    std::vector<int64_t> idx = testing::unravel(i, shape);
    int64_t o = 0;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) o = o * shape[d] + idx[d];
    }
    long double v = data[i];
    if (kind == "max")
      acc[o] = std::max(acc[o], v);
    else if (kind == "min")
      acc[o] = std::min(acc[o], v);
    else
      acc[o] += v;
    ++counts[o];
  }
  if (kind == "mean") {
    for (int64_t o = 0; o < out_n; ++o) acc[o] /= counts[o];
  }
  return acc;
}

TEST(Reduction, SumMeanMaxMinOverEveryAxisSubset) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {3, 4, 5};
  std::vector<std::vector<int>> axis_sets = {{},     {0},    {1},  {2},      {0, 1},
                                             {0, 2}, {1, 2}, {-1}, {-3, -1}, {2, 0}};
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor x = Tensor::from_vector(testing::random_floats(60, rng), shape).astype(dt);
    std::vector<double> data = testing::values(x);
    for (const std::vector<int>& axes : axis_sets) {
      std::vector<int> normalized;
      for (int a : axes) normalized.push_back(a < 0 ? a + 3 : a);
      if (axes.empty()) normalized = {0, 1, 2};
      for (const std::string kind : {"sum", "mean", "max", "min"}) {
        for (bool keepdims : {false, true}) {
          SCOPED_TRACE(kind + " " + dtype_name(dt) + " keepdims " + std::to_string(keepdims));
          Tensor y = kind == "sum"    ? sum(x, axes, keepdims)
                     : kind == "mean" ? mean(x, axes, keepdims)
                     : kind == "max"  ? max(x, axes, keepdims)
                                      : min(x, axes, keepdims);
          std::vector<int64_t> want_shape;
          for (int d = 0; d < 3; ++d) {
            bool reduced = std::find(normalized.begin(), normalized.end(), d) != normalized.end();
            if (!reduced) want_shape.push_back(shape[d]);
            if (reduced && keepdims) want_shape.push_back(1);
          }
          EXPECT_EQ(y.shape(), want_shape);
          EXPECT_EQ(y.dtype(), dt);
          std::vector<long double> want = reference_reduce(data, shape, normalized, kind);
          std::vector<double> got = testing::values(y);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_TRUE(close(want[i], got[i], dt == DType::F32 ? 1e-5 : 1e-12));
          }
        }
      }
    }
  }
}

// Sums and means over leading or middle axes of shapes large enough for the column path
// (runtime/cpu/reduce_kernel.cc): few columns and many rows (rows split across cores),
// columns wider than one chunk, several outer blocks, a middle block of two axes, and a
// fused prologue. Every output against the long-double loop.
TEST(Reduction, ColumnAndMiddleAxisSumsMatchReference) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> axes;
  };
  const std::vector<Case> cases = {{{5000, 3}, {0}},         {{30, 9000}, {0}},
                                   {{700, 45}, {0}},         {{4, 700, 33}, {1}},
                                   {{6, 40, 50, 7}, {1, 2}}, {{3, 2, 1030, 4}, {0, 1}}};
  for (const Case& c : cases) {
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor x = Tensor::from_vector(testing::random_floats(testing::count(c.shape), rng), c.shape)
                     .astype(dt)
                     .eval();
      Tensor operand = x * 2.0 + 1.0;  // evaluated twice: alone here, fused below
      const std::vector<double> data = testing::values(operand);
      for (const std::string kind : {"sum", "mean"}) {
        SCOPED_TRACE(::testing::Message()
                     << kind << " " << dtype_name(dt) << " of " << ::testing::PrintToString(c.shape)
                     << " over " << ::testing::PrintToString(c.axes));
        Tensor y = kind == "sum" ? sum(x * 2.0 + 1.0, c.axes) : mean(x * 2.0 + 1.0, c.axes);
        const std::vector<long double> want = reference_reduce(data, c.shape, c.axes, kind);
        const std::vector<double> got = testing::values(y);
        ASSERT_EQ(got.size(), want.size());
        // The CPU adds f32 in double; a GPU adds f32 in f32 (as PyTorch does), whose error
        // grows with the magnitudes added: a few times sqrt(n) roundings of their sum.
        std::vector<double> magnitudes(data.size());
        for (size_t i = 0; i < data.size(); ++i) magnitudes[i] = std::fabs(data[i]);
        const std::vector<long double> added = reference_reduce(magnitudes, c.shape, c.axes, kind);
        int64_t n = 1;
        for (int axis : c.axes) n *= c.shape[axis];
        const bool f32_sums = dt == DType::F32 && default_device().type != DeviceType::CPU;
        for (size_t i = 0; i < got.size(); ++i) {
          const double rounding =
              f32_sums ? 4 * std::sqrt(static_cast<double>(n)) * 0x1p-24 * added[i] : 0;
          ASSERT_TRUE(std::fabs(static_cast<double>(want[i]) - got[i]) <= rounding ||
                      close(want[i], got[i], dt == DType::F32 ? 1e-6 : 1e-12))
              << "output " << i << ": want " << static_cast<double>(want[i]) << " got " << got[i];
        }
      }
    }
  }
}

TEST(Reduction, IntegerAndBoolSumsGiveI64) {
  Tensor b = Tensor::from_vector<bool>({true, true, false, true}, {2, 2});
  EXPECT_EQ(sum(b).dtype(), DType::I64);
  EXPECT_EQ(sum(b).item(), 3);
  Tensor i = Tensor::from_vector<int32_t>({2147483647, 2147483647}, {2});
  EXPECT_EQ(sum(i).to_vector<int64_t>()[0], int64_t{4294967294});  // no I32 overflow
  EXPECT_EQ(max(i).dtype(), DType::I32);
  EXPECT_THROW(mean(i), Error);
}

TEST(Reduction, EmptyExtentsFollowNumpy) {
  Tensor e = Tensor::zeros({2, 0});
  EXPECT_EQ(sum(e, {1}).to_vector<float>(), (std::vector<float>{0, 0}));
  std::vector<float> m = mean(e, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
  EXPECT_EQ(sum(e, {0}).shape(), (std::vector<int64_t>{0}));
  testing::expect_error([&] { max(e, {1}); }, {"[max]", "empty", "f32[2, 0]"});
  testing::expect_error([&] { argmin(e, 1); }, {"[argmin]", "empty"});
  EXPECT_EQ(sum(Tensor::full({}, 4.0)).item(), 4.0);  // 0-d: reduce over no axes
}

TEST(Reduction, MaxPropagatesNaN) {
  Tensor x = Tensor::from_vector<float>({1, NAN, 3, 4}, {2, 2});
  std::vector<float> m = max(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 4.0f);
}

TEST(Reduction, ArgmaxArgminFirstIndexAlongAnyAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {4, 3, 5};
  std::vector<float> data = testing::random_floats(60, rng);
  for (int i = 0; i < 60; i += 7) data[i] = data[i + 1];  // create ties
  Tensor x = Tensor::from_vector(data, shape);
  for (int axis : {0, 1, 2, -1}) {
    int a = axis < 0 ? axis + 3 : axis;
    for (bool keepdims : {false, true}) {
      Tensor hi = argmax(x, axis, keepdims);
      Tensor lo = argmin(x, axis, keepdims);
      EXPECT_EQ(hi.dtype(), DType::I64);
      std::vector<int64_t> got_hi = hi.to_vector<int64_t>(), got_lo = lo.to_vector<int64_t>();
      std::vector<int64_t> outer_shape = shape;
      outer_shape[a] = 1;
      for (int64_t o = 0; o < testing::count(outer_shape); ++o) {
        std::vector<int64_t> idx = testing::unravel(o, outer_shape);
        int64_t best_hi = 0, best_lo = 0;
        auto at = [&](int64_t k) {
          idx[a] = k;
          return data[(idx[0] * 3 + idx[1]) * 5 + idx[2]];
        };
        for (int64_t k = 1; k < shape[a]; ++k) {
          if (at(k) > at(best_hi)) best_hi = k;
          if (at(k) < at(best_lo)) best_lo = k;
        }
        EXPECT_EQ(got_hi[o], best_hi);
        EXPECT_EQ(got_lo[o], best_lo);
      }
    }
  }
  EXPECT_EQ(argmax(Tensor::from_vector<float>({1, NAN, 5}, {3}), 0).item(), 1);  // NaN is max
}

// Many short rows (several tiles of rows per evaluator run, split over threads), with ties
// and NaNs: max, min, argmax and argmin over the last axis against a loop, f32 and i32.
void check_short_rows(std::mt19937_64& rng, int64_t width);

TEST(Reduction, ShortRowsOverTheLastAxisMatchALoop) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  SCOPED_TRACE(testing::test_seed());
  // Widths below, at and above a vector of f32 (f32 rows scan in vectors: simd_row_best.h),
  // with an overlapping last vector.
  for (const int64_t width : {7, 8, 16, 21, 64}) {
    SCOPED_TRACE(width);
    check_short_rows(rng, width);
  }
}

void check_short_rows(std::mt19937_64& rng, int64_t width) {
  const int64_t rows = 3001;
  std::vector<float> data = testing::random_floats(rows * width, rng);
  for (int64_t i = 0; i < rows * width; i += 11) data[i] = data[i + 1 < rows * width ? i + 1 : i];
  for (int64_t i = 5; i < rows * width; i += 97) data[i] = NAN;
  std::vector<int32_t> ints(rows * width);
  for (int64_t i = 0; i < rows * width; ++i) ints[i] = static_cast<int32_t>(rng() % 9) - 4;
  const Tensor f = Tensor::from_vector(data, {rows, width});
  const Tensor n = Tensor::from_vector(ints, {rows, width});
  const std::vector<float> fmax = max(f, 1).to_vector<float>(), fmin = min(f, 1).to_vector<float>();
  const std::vector<int64_t> fargmax = argmax(f, 1).to_vector<int64_t>();
  const std::vector<int64_t> fargmin = argmin(f, -1).to_vector<int64_t>();
  const std::vector<int32_t> nmax = max(n, 1).to_vector<int32_t>();
  const std::vector<int64_t> nargmin = argmin(n, 1).to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t hi = 0, lo = 0, ihi = 0, ilo = 0;
    for (int64_t k = 1; k < width; ++k) {
      const float x = data[r * width + k];
      const float best_hi = data[r * width + hi], best_lo = data[r * width + lo];
      if (!std::isnan(best_hi) && (std::isnan(x) || x > best_hi)) hi = k;
      if (!std::isnan(best_lo) && (std::isnan(x) || x < best_lo)) lo = k;
      if (ints[r * width + k] > ints[r * width + ihi]) ihi = k;
      if (ints[r * width + k] < ints[r * width + ilo]) ilo = k;
    }
    ASSERT_EQ(fargmax[r], hi) << "row " << r;
    ASSERT_EQ(fargmin[r], lo) << "row " << r;
    const float want_max = data[r * width + hi], want_min = data[r * width + lo];
    ASSERT_TRUE(std::isnan(want_max) ? std::isnan(fmax[r]) : fmax[r] == want_max) << r;
    ASSERT_TRUE(std::isnan(want_min) ? std::isnan(fmin[r]) : fmin[r] == want_min) << r;
    ASSERT_EQ(nmax[r], ints[r * width + ihi]) << "row " << r;
    ASSERT_EQ(nargmin[r], ilo) << "row " << r;
  }
}

}  // namespace
}  // namespace kiln
