// The API a C++ numerics user types: arange over a range, linspace, eye, clamp, pad, roll,
// norm and dot against independent loops; compound assignment, methods and single-axis
// reductions against the free functions; the seeded generator; and the errors of each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(NumericsApi, ArangeOverARangeMatchesNumpysCount) {
  struct Case {
    double start, stop, step;
    std::vector<double> want;
  };
  const Case cases[] = {
      {2, 7, 1, {2, 3, 4, 5, 6}},
      {0, 1, 0.25, {0, 0.25, 0.5, 0.75}},
      {5, 0, -2, {5, 3, 1}},
      {0, 1, 0.3, {0, 0.3, 0.6, 0.8999999999999999}},  // numpy: ceil(1 / 0.3) = 4 values
      {3, 3, 1, {}},
      {3, 1, 1, {}},  // an empty range, not an error
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.start << ":" << c.stop << ":" << c.step);
    const Tensor t = Tensor::arange(c.start, c.stop, c.step, DType::F64);
    ASSERT_EQ(t.shape(), std::vector<int64_t>{static_cast<int64_t>(c.want.size())});
    const std::vector<double> got = t.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_DOUBLE_EQ(got[i], c.start + static_cast<double>(i) * c.step) << i;
      EXPECT_NEAR(got[i], c.want[i], 1e-15) << i;
    }
  }
  EXPECT_EQ(Tensor::arange(-3, 3, 2, DType::I32).to_vector<int32_t>(),
            (std::vector<int32_t>{-3, -1, 1}));
  testing::expect_error([] { Tensor::arange(0, 1, 0); }, {"[arange]", "step 0", "step != 0"});
  testing::expect_error([] { Tensor::arange(0, kInf, 1); }, {"[arange]", "finite"});
}

TEST(NumericsApi, LinspaceEndsExactlyAtStop) {
  for (int64_t num : {0, 1, 2, 7, 50}) {
    SCOPED_TRACE(num);
    const std::vector<double> got =
        Tensor::linspace(-1.5, 2.2, num, DType::F64).to_vector<double>();
    ASSERT_EQ(static_cast<int64_t>(got.size()), num);
    for (int64_t i = 0; i < num; ++i) {
      const double want =
          i == num - 1 && num > 1 ? 2.2 : -1.5 + static_cast<double>(i) * (3.7 / (num - 1));
      EXPECT_EQ(got[i], num == 1 ? -1.5 : want) << i;
    }
  }
  const std::vector<float> f = Tensor::linspace(0, 1, 5).to_vector<float>();
  EXPECT_EQ(f, (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  testing::expect_error([] { Tensor::linspace(0, 1, -1); }, {"[linspace]", "num -1"});
}

TEST(NumericsApi, EyeHasOnesOnItsDiagonal) {
  for (int64_t k : {-2, 0, 1, 5}) {
    const int64_t n = 3, m = 5;
    const std::vector<double> got = Tensor::eye(n, m, k, DType::F64).to_vector<double>();
    ASSERT_EQ(got.size(), static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) EXPECT_EQ(got[i * m + j], j - i == k ? 1.0 : 0.0);
    }
  }
  EXPECT_EQ(Tensor::eye(2, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(Tensor::eye(0).shape(), (std::vector<int64_t>{0, 0}));
  // A fused consumer: A + 2 I.
  std::mt19937_64 rng(testing::test_seed() + 51);
  const std::vector<float> a = testing::random_floats(16, rng);
  const std::vector<float> got =
      (Tensor::from_vector(a, {4, 4}) + Tensor::eye(4) * 2.0).to_vector<float>();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], a[i] + (i % 5 == 0 ? 2.0f : 0.0f)) << i;
  testing::expect_error([] { Tensor::eye(-1); }, {"[eye]", "-1"});
}

TEST(NumericsApi, ClampIsNumpysClip) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector(std::vector<float>{-3, -0.5f, 0.25f, 4, nan}, {5});
  const std::vector<float> got = clamp(x, -1.0, 1.0).to_vector<float>();
  const std::vector<float> want = {-1, -0.5f, 0.25f, 1};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
  EXPECT_TRUE(std::isnan(got[4])) << "NaN stays NaN";
  EXPECT_EQ(clamp(x.slice(0, 0, 4), 2.0, 1.0).to_vector<float>(), (std::vector<float>(4, 1.0f)))
      << "lo > hi gives hi";
  // Tensor bounds broadcast: a per-column range.
  const Tensor m = Tensor::from_vector(std::vector<float>{-5, 0, 5, -5, 0, 5}, {2, 3});
  const Tensor lo = Tensor::from_vector(std::vector<float>{-1, 1, -1}, {3});
  const Tensor hi = Tensor::from_vector(std::vector<float>{0, 2, 3}, {3});
  EXPECT_EQ(clamp(m, lo, hi).to_vector<float>(), (std::vector<float>{-1, 1, 3, -1, 1, 3}));
}

TEST(NumericsApi, PadAndRollMatchLoops) {
  std::mt19937_64 rng(testing::test_seed() + 52);
  const std::vector<float> x = testing::random_floats(3 * 4, rng);
  const Tensor t = Tensor::from_vector(x, {3, 4});
  const std::vector<float> padded = pad(t, {{1, 2}, {0, 3}}, -7.0).to_vector<float>();
  ASSERT_EQ(padded.size(), 6u * 7u);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 7; ++j) {
      const bool inside = i >= 1 && i < 4 && j < 4;
      EXPECT_EQ(padded[i * 7 + j], inside ? x[(i - 1) * 4 + j] : -7.0f) << i << "," << j;
    }
  }
  for (int64_t shift : {-9, -1, 0, 1, 3, 4, 11}) {
    for (int axis : {0, 1, -1}) {
      SCOPED_TRACE(::testing::Message() << "shift " << shift << " axis " << axis);
      const std::vector<float> got = roll(t, shift, axis).to_vector<float>();
      const int a = axis < 0 ? axis + 2 : axis;
      const int64_t n = a == 0 ? 3 : 4;
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          int64_t si = i, sj = j;  // where out[i, j] comes from: index - shift, modulo n
          (a == 0 ? si : sj) = (((a == 0 ? i : j) - shift) % n + n) % n;
          EXPECT_EQ(got[i * 4 + j], x[si * 4 + sj]) << i << "," << j;
        }
      }
    }
    const std::vector<float> flat = roll(t, shift).to_vector<float>();
    for (int64_t e = 0; e < 12; ++e) EXPECT_EQ(flat[e], x[((e - shift) % 12 + 12) % 12]) << e;
  }
  testing::expect_error([&] { pad(t, {{1, 1}}); }, {"[pad]", "2 dims", "got 1", "f32[3, 4]"});
  testing::expect_error([&] { pad(t, {{0, 0}, {-1, 0}}); }, {"[pad]", "dim 1", "-1"});
  testing::expect_error([&] { roll(t, 1, 2); }, {"[roll]", "axis 2", "f32[3, 4]"});
}

TEST(NumericsApi, NormAndDotMatchLongDoubleLoops) {
  std::mt19937_64 rng(testing::test_seed() + 53);
  const std::vector<float> x = testing::random_floats(5 * 6, rng);
  const Tensor t = Tensor::from_vector(x, {5, 6});
  auto loop_norm = [&](int row, double ord) {  // row < 0: every element
    long double acc = ord == kInf ? 0.0L : (ord == -kInf ? 1e300L : 0.0L);
    for (int e = 0; e < 30; ++e) {
      if (row >= 0 && e / 6 != row) continue;
      const long double a = std::fabs(static_cast<long double>(x[e]));
      if (ord == kInf) {
        acc = std::max(acc, a);
      } else if (ord == -kInf) {
        acc = std::min(acc, a);
      } else if (ord == 0) {
        acc += a != 0;
      } else {
        acc += std::pow(a, static_cast<long double>(ord));
      }
    }
    if (std::isinf(ord) || ord == 0) return static_cast<double>(acc);
    return static_cast<double>(std::pow(acc, 1.0L / ord));
  };
  for (double ord : {2.0, 1.0, kInf, -kInf, 0.0, 3.0}) {
    SCOPED_TRACE(ord);
    const double whole = norm(t, {}, false, ord).item();
    EXPECT_NEAR(whole, loop_norm(-1, ord), 1e-5 * (1 + loop_norm(-1, ord)));
    const std::vector<float> rows = norm(t, {1}, false, ord).to_vector<float>();
    for (int r = 0; r < 5; ++r) EXPECT_NEAR(rows[r], loop_norm(r, ord), 1e-5 * (1 + rows[r]));
  }
  EXPECT_EQ(norm(Tensor::from_vector(std::vector<int32_t>{3, 4}, {2})).dtype(), DType::F32);
  EXPECT_EQ(norm(Tensor::from_vector(std::vector<int32_t>{3, 4}, {2})).item(), 5.0);

  const std::vector<double> a = testing::random_doubles(100, rng);
  const std::vector<double> b = testing::random_doubles(100, rng);
  long double want = 0;
  for (int i = 0; i < 100; ++i) want += static_cast<long double>(a[i]) * b[i];
  const Tensor d = dot(Tensor::from_vector(a, {100}), Tensor::from_vector(b, {100}));
  EXPECT_EQ(d.shape(), std::vector<int64_t>{});
  EXPECT_NEAR(d.item(), static_cast<double>(want), 1e-12);
  testing::expect_error([&] { dot(t, t); }, {"[dot]", "1-D", "a: f32[5, 6]"});
  testing::expect_error([&] { dot(Tensor::ones({3}), Tensor::ones({4})); },
                        {"[dot]", "a: f32[3]", "b: f32[4]"});
  testing::expect_error([&] { norm(t, {2}); }, {"axis 2"});
}

// `x += y` rebinds x; another handle to the old value keeps it.
TEST(NumericsApi, CompoundAssignmentRebindsTheHandle) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor old = x;
  x += Tensor::from_vector(std::vector<float>{10, 20, 30}, {3});
  x *= 2.0;
  x -= 1.0;
  x /= Tensor::full({}, 4.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{5.25f, 10.75f, 16.25f}));
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor i = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  i /= 2.0;  // integer division gives F32, as i / 2.0 does
  EXPECT_EQ(i.dtype(), DType::F32);
  EXPECT_EQ(i.to_vector<float>(), (std::vector<float>{0.5f, 1.0f}));
}

// Methods and a single int axis give what the free functions with {axis} give; {} still
// means every axis.
TEST(NumericsApi, MethodsAndIntAxesMatchTheFreeFunctions) {
  std::mt19937_64 rng(testing::test_seed() + 54);
  const Tensor x = Tensor::from_vector(testing::random_floats(4 * 5, rng), {4, 5});
  const std::vector<std::pair<Tensor, Tensor>> same = {
      {x.sum(), sum(x)},
      {x.sum(1), sum(x, {1})},
      {sum(x, 1), sum(x, {1})},
      {sum(x, {}), sum(x)},
      {x.sum({}), sum(x)},
      {x.mean(0, true), mean(x, {0}, true)},
      {mean(x, -1), mean(x, {-1})},
      {x.max(int64_t{1}), max(x, {1})},
      {min(x, 0), min(x, {0})},
      {x.min(), min(x)},
      {x.argmax(1), argmax(x, 1)},
      {x.argmin(0), argmin(x, 0)},
      {x.abs(), abs(x)},
      {x.abs().sqrt(), sqrt(abs(x))},
      {x.exp(), exp(x)},
      {x.abs().log(), log(abs(x))},
      {x.square(), square(x)},
  };
  for (size_t i = 0; i < same.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(same[i].first.shape(), same[i].second.shape());
    EXPECT_EQ(same[i].first.dtype(), same[i].second.dtype());
    if (same[i].first.dtype() == DType::I64) {
      EXPECT_EQ(same[i].first.to_vector<int64_t>(), same[i].second.to_vector<int64_t>());
    } else {
      EXPECT_EQ(same[i].first.to_vector<float>(), same[i].second.to_vector<float>());
    }
  }
  EXPECT_EQ(sum(x, {}).shape(), std::vector<int64_t>{});
}

// Several axes sliced in one call equal one slice after another, and a heat-equation
// interior update reads like the math.
TEST(NumericsApi, IndexSlicesSeveralAxesAtOnce) {
  std::mt19937_64 rng(testing::test_seed() + 55);
  const std::vector<float> v = testing::random_floats(5 * 6 * 3, rng);
  const Tensor x = Tensor::from_vector(v, {5, 6, 3});
  const Tensor got = x.index({Slice(1, -1), Slice(), Slice(2, 0, -1)});
  EXPECT_EQ(got.shape(), (std::vector<int64_t>{3, 6, 2}));
  const std::vector<float> g = got.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      for (int64_t k = 0; k < 2; ++k) {
        EXPECT_EQ(g[(i * 6 + j) * 2 + k], v[((i + 1) * 6 + j) * 3 + (2 - k)]) << i << j << k;
      }
    }
  }
  EXPECT_EQ(x.index({}).to_vector<float>(), v);
  EXPECT_EQ(x.index({{0, 2}}).shape(), (std::vector<int64_t>{2, 6, 3}));
  // One explicit step of u_t = lap(u) on the interior, against a loop.
  const int64_t n = 6;
  const std::vector<float> u0 = testing::random_floats(n * n, rng);
  const Tensor u = Tensor::from_vector(u0, {n, n});
  const Slice in(1, -1), up(0, -2), down(2, n);
  const Tensor lap = u.index({up, in}) + u.index({down, in}) + u.index({in, up}) +
                     u.index({in, down}) - 4.0 * u.index({in, in});
  const std::vector<float> l = lap.to_vector<float>();
  for (int64_t i = 1; i < n - 1; ++i) {
    for (int64_t j = 1; j < n - 1; ++j) {
      const float want = u0[(i - 1) * n + j] + u0[(i + 1) * n + j] + u0[i * n + j - 1] +
                         u0[i * n + j + 1] - 4.0f * u0[i * n + j];
      EXPECT_NEAR(l[(i - 1) * (n - 2) + (j - 1)], want, 1e-5f) << i << "," << j;
    }
  }
  testing::expect_error(
      [&] {
        x.index({Slice(), Slice(), Slice(), Slice()});
      },
      {"[slice]", "4 slices", "rank 3", "f32[5, 6, 3]"});
  testing::expect_error([&] { x.index({Slice(0, 1, 0)}); }, {"[slice]", "step"});
}

// A generator advances: draws differ, and the same seed gives the same draws again.
TEST(NumericsApi, GeneratorAdvancesAndRepeatsFromItsSeed) {
  Generator g(2026), h(2026), other(2027);
  const std::vector<float> a = g.rand({64}).to_vector<float>();
  const std::vector<float> b = g.rand({64}).to_vector<float>();
  const std::vector<double> n = g.randn({64}, DType::F64).to_vector<double>();
  EXPECT_NE(a, b);
  EXPECT_EQ(h.rand({64}).to_vector<float>(), a);
  EXPECT_EQ(h.rand({64}).to_vector<float>(), b);
  EXPECT_EQ(h.randn({64}, DType::F64).to_vector<double>(), n);
  EXPECT_NE(other.rand({64}).to_vector<float>(), a);
  for (float v : a) EXPECT_TRUE(v >= 0.0f && v < 1.0f) << v;
  // Each draw is Tensor::rand with the seed the generator hands out.
  Generator s(7), t(7);
  const uint64_t seed = s.next_seed();
  EXPECT_EQ(t.rand({16}).to_vector<float>(), Tensor::rand({16}, seed).to_vector<float>());
}

}  // namespace
}  // namespace kiln
