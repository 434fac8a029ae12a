// Elementwise ops against long-double references computed here, element by element.
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "kiln/debug.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::close;
using testing::values;

double tolerance(DType dt) {
  switch (dt) {
    case DType::F64:
      return 1e-12;
    case DType::F32:
      return 2e-6;
    case DType::F16:
      return 2e-3;
    case DType::BF16:
      return 1.6e-2;
    default:
      return 0;
  }
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<long double(long double)> ref;
  float lo, hi;
};

std::vector<UnaryCase> unary_cases() {
  auto sigmoid_ref = [](long double x) { return 1 / (1 + std::exp(-x)); };
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](long double x) { return -x; }, -3, 3},
      {"abs", [](const Tensor& x) { return abs(x); }, [](long double x) { return std::fabs(x); },
       -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, [](long double x) { return std::exp(x); }, -4,
       4},
      {"log", [](const Tensor& x) { return log(x); }, [](long double x) { return std::log(x); },
       0.01f, 9},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](long double x) { return std::sqrt(x); },
       0, 9},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); },
       [](long double x) { return 1 / std::sqrt(x); }, 0.1f, 9},
      {"sin", [](const Tensor& x) { return sin(x); }, [](long double x) { return std::sin(x); }, -6,
       6},
      {"cos", [](const Tensor& x) { return cos(x); }, [](long double x) { return std::cos(x); }, -6,
       6},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](long double x) { return std::tanh(x); },
       -4, 4},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, -8, 8},
      {"relu", [](const Tensor& x) { return relu(x); }, [](long double x) { return x > 0 ? x : 0; },
       -3, 3},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](long double x) { return 0.5L * x * (1 + std::erf(x / std::sqrt(2.0L))); }, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); },
       [=](long double x) { return x * sigmoid_ref(x); }, -6, 6},
      {"erf", [](const Tensor& x) { return erf(x); }, [](long double x) { return std::erf(x); }, -3,
       3},
      {"floor", [](const Tensor& x) { return floor(x); },
       [](long double x) { return std::floor(x); }, -5, 5},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](long double x) { return std::ceil(x); },
       -5, 5},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); },
       [](long double x) { return 1 / x; }, 0.2f, 5},
      {"square", [](const Tensor& x) { return square(x); }, [](long double x) { return x * x; }, -3,
       3},
      {"log1p", [](const Tensor& x) { return log1p(x); },
       [](long double x) { return std::log1p(x); }, -0.9f, 5},
      {"expm1", [](const Tensor& x) { return expm1(x); },
       [](long double x) { return std::expm1(x); }, -3, 3},
  };
}

TEST(Elementwise, EveryUnaryOpMatchesLongDoubleInEveryFloatDtype) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  for (const UnaryCase& c : unary_cases()) {
    for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt));
      Tensor x =
          Tensor::from_vector(testing::random_floats(257, rng, c.lo, c.hi), {257}).astype(dt);
      Tensor y = c.op(x);
      ASSERT_EQ(y.dtype(), dt);
      std::vector<double> in = values(x), out = values(y);
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_TRUE(close(c.ref(in[i]), out[i], tolerance(dt))) << "x = " << in[i];
      }
    }
  }
}

// log1p and expm1 keep full relative precision where 1 + x rounds to 1 in f32.
TEST(Elementwise, Log1pAndExpm1AreAccurateNearZero) {
  const std::vector<float> x = {1e-7f, -3e-8f, 1e-20f, 0.0f, -0.0f};
  const std::vector<float> lp = log1p(Tensor::from_vector(x, {5})).to_vector<float>();
  const std::vector<float> em = expm1(Tensor::from_vector(x, {5})).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const long double v = x[i];
    EXPECT_NEAR(lp[i], static_cast<double>(std::log1p(v)), 1e-6 * std::fabs(x[i])) << x[i];
    EXPECT_NEAR(em[i], static_cast<double>(std::expm1(v)), 1e-6 * std::fabs(x[i])) << x[i];
  }
  EXPECT_EQ(log1p(Tensor::full({1}, -1.0)).item(), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(log1p(Tensor::full({1}, -2.0)).item()));
  EXPECT_EQ(expm1(Tensor::full({1}, 3, DType::I32)).dtype(), DType::F32);
}

TEST(Elementwise, MathOfIntegersGivesF32AndArithmeticKeepsIntegers) {
  Tensor i = Tensor::from_vector<int32_t>({-2, 0, 3}, {3});
  EXPECT_EQ(exp(i).dtype(), DType::F32);
  EXPECT_EQ(sigmoid(i).dtype(), DType::F32);
  EXPECT_TRUE(close(std::exp(3.0L), values(exp(i))[2], 2e-6));
  EXPECT_EQ(neg(i).to_vector<int32_t>(), (std::vector<int32_t>{2, 0, -3}));
  EXPECT_EQ(abs(i).to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 3}));
  EXPECT_EQ(relu(i).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 3}));
  EXPECT_EQ(square(i).to_vector<int32_t>(), (std::vector<int32_t>{4, 0, 9}));
  EXPECT_EQ(floor(i).to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 3}));
  EXPECT_EQ(logical_not(i).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  // Integer overflow wraps as two's complement (never UB).
  Tensor big = Tensor::from_vector<int32_t>({2147483647, -2147483647 - 1}, {2});
  EXPECT_EQ((big + 1).to_vector<int32_t>(), (std::vector<int32_t>{-2147483647 - 1, -2147483647}));
  EXPECT_EQ(neg(big).to_vector<int32_t>()[1], -2147483647 - 1);
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<long double(long double, long double)> ref;
};

TEST(Elementwise, EveryBinaryOpBroadcastsAndMatchesLongDouble) {
  std::vector<BinaryCase> cases = {
      {"add", [](auto& a, auto& b) { return a + b; },
       [](long double a, long double b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return a - b; },
       [](long double a, long double b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return a * b; },
       [](long double a, long double b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return a / b; },
       [](long double a, long double b) { return a / b; }},
      {"pow", [](auto& a, auto& b) { return pow(a, b); },
       [](long double a, long double b) { return std::pow(a, b); }},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](long double a, long double b) { return std::max(a, b); }},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](long double a, long double b) { return std::min(a, b); }},
  };
  // Shape pairs covering size-1 dims on either side, rank differences and 0-d operands.
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 4}, {3, 4}}, {{3, 1}, {1, 4}},    {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}},
      {{}, {2, 3}},     {{2, 1, 3}, {4, 1}}, {{1}, {}},        {{0, 3}, {1, 3}}};
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  for (const BinaryCase& c : cases) {
    for (const auto& [sa, sb] : shapes) {
      for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt));
        Tensor a = Tensor::from_vector(testing::random_floats(testing::count(sa), rng, 0.5f, 3), sa)
                       .astype(dt);
        Tensor b = Tensor::from_vector(testing::random_floats(testing::count(sb), rng, 0.5f, 3), sb)
                       .astype(dt);
        Tensor y = c.op(a, b);
        std::vector<int64_t> out_shape = y.shape();
        std::vector<double> va = values(a), vb = values(b), vy = values(y);
        ASSERT_EQ(static_cast<int64_t>(vy.size()), testing::count(out_shape));
        for (int64_t i = 0; i < testing::count(out_shape); ++i) {
          std::vector<int64_t> idx = testing::unravel(i, out_shape);
          long double want =
              c.ref(va[testing::broadcast_source(idx, sa)], vb[testing::broadcast_source(idx, sb)]);
          EXPECT_TRUE(close(want, vy[i], tolerance(dt)));
        }
      }
    }
  }
}

TEST(Elementwise, BroadcastShapesFollowNumpy) {
  EXPECT_EQ((Tensor::zeros({2, 1, 3}) + Tensor::zeros({4, 1})).shape(),
            (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ((Tensor::zeros({}) + Tensor::zeros({5})).shape(), (std::vector<int64_t>{5}));
  EXPECT_EQ((Tensor::zeros({0, 1}) + Tensor::zeros({1, 7})).shape(), (std::vector<int64_t>{0, 7}));
  EXPECT_EQ((Tensor::zeros({1}) * Tensor::zeros({})).shape(), (std::vector<int64_t>{1}));
}

TEST(Elementwise, ComparisonsAndLogicalOpsGiveBool) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, NAN}, {4});
  Tensor b = Tensor::from_vector<int32_t>({2, 2, 2, 2}, {4});
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ((a > b).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ((a >= b).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ((a > 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ((2.5 > a).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  // An integer tensor against a fractional scalar compares in F32, not truncated.
  EXPECT_EQ((b < 2.5).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  Tensor p = Tensor::from_vector<bool>({true, true, false, false}, {4});
  Tensor q = Tensor::from_vector<float>({1, 0, 1, 0}, {4});
  EXPECT_EQ(logical_and(p, q).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(logical_or(p, q).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(logical_not(q).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
}

TEST(Elementwise, PromotionAndNonPromotingScalars) {
  Tensor i32 = Tensor::ones({2}, DType::I32);
  Tensor i64 = Tensor::ones({2}, DType::I64);
  Tensor f16 = Tensor::ones({2}, DType::F16);
  Tensor bf16 = Tensor::ones({2}, DType::BF16);
  Tensor f32 = Tensor::ones({2}, DType::F32);
  Tensor b = Tensor::ones({2}, DType::Bool);
  EXPECT_EQ((i32 + i64).dtype(), DType::I64);
  EXPECT_EQ((i64 + f16).dtype(), DType::F16);
  EXPECT_EQ((f16 + bf16).dtype(), DType::F32);
  EXPECT_EQ((b + i32).dtype(), DType::I32);
  EXPECT_EQ((b + b).dtype(), DType::Bool);
  EXPECT_EQ((i32 / i32).dtype(), DType::F32);
  EXPECT_EQ((i32 / 2).to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
  // Scalars take the tensor's dtype ...
  EXPECT_EQ((f16 * 3.0).dtype(), DType::F16);
  EXPECT_EQ((bf16 + 1e10).dtype(), DType::BF16);
  EXPECT_EQ((i32 * 3.0).dtype(), DType::I32);
  EXPECT_EQ((2.0 - i64).dtype(), DType::I64);
  // ... except a fractional scalar with an integer tensor, which gives F32 (as in PyTorch).
  EXPECT_EQ((i32 * 0.5).dtype(), DType::F32);
  EXPECT_EQ((i32 * 0.5).to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ((b + 1.0).dtype(), DType::I64);
  EXPECT_EQ((b + b).to_vector<bool>(), (std::vector<bool>{true, true}));
}

TEST(Elementwise, IntegerArithmeticIsExact) {
  Tensor a = Tensor::from_vector<int64_t>({7, -7, 3, (int64_t{1} << 62) + 1}, {4});
  Tensor b = Tensor::from_vector<int64_t>({2, 2, 0, 1}, {4});
  EXPECT_EQ((a * b).to_vector<int64_t>(),
            (std::vector<int64_t>{14, -14, 0, (int64_t{1} << 62) + 1}));
  EXPECT_EQ((a - b).to_vector<int64_t>()[3], int64_t{1} << 62);
  EXPECT_EQ(pow(a, b).to_vector<int64_t>(),
            (std::vector<int64_t>{49, 49, 1, (int64_t{1} << 62) + 1}));
  EXPECT_EQ(maximum(a, b).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 2, 3, (int64_t{1} << 62) + 1}));
  std::vector<float> q = (a / b).to_vector<float>();
  EXPECT_EQ(q[0], 3.5f);
  EXPECT_EQ(q[1], -3.5f);
  EXPECT_TRUE(std::isinf(q[2]));
}

TEST(Elementwise, NaNPropagatesThroughMaximumAndMinimum) {
  Tensor a = Tensor::from_vector<float>({NAN, 1, 2}, {3});
  Tensor b = Tensor::from_vector<float>({0, NAN, 1}, {3});
  std::vector<float> mx = maximum(a, b).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_EQ(mx[2], 2.0f);
  std::vector<float> mn = minimum(a, b).to_vector<float>();
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mn[2], 1.0f);
}

TEST(Elementwise, WhereBroadcastsAllThreeAndPromotes) {
  Tensor cond = Tensor::from_vector<bool>({true, false}, {2, 1});
  Tensor a = Tensor::from_vector<int32_t>({1, 2, 3}, {3});
  Tensor b = Tensor::full({}, -0.5, DType::F32);
  Tensor y = where(cond, a, b);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3, -0.5f, -0.5f, -0.5f}));
}

TEST(Elementwise, CastsTruncateSaturateAndMapNaNToZero) {
  Tensor x = Tensor::from_vector<float>({-2.7f, 2.7f, 1e20f, -1e20f, NAN, 0.0f}, {6});
  EXPECT_EQ(x.astype(DType::I32).to_vector<int32_t>(),
            (std::vector<int32_t>{-2, 2, 2147483647, -2147483647 - 1, 0, 0}));
  EXPECT_EQ(x.astype(DType::Bool).to_vector<bool>(),
            (std::vector<bool>{true, true, true, true, true, false}));
  Tensor i = Tensor::from_vector<int64_t>({(int64_t{1} << 32) + 5}, {1});
  EXPECT_EQ(i.astype(DType::I32).item(), 5);  // keeps the low 32 bits
  EXPECT_EQ(Tensor::from_vector<float>({65519.0f}, {1}).astype(DType::F16).item(), 65504.0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The f32 SIMD math keeps libm's special values (overflow, zeros, negatives, inf and NaN) and
// the functors' formulas' (sigmoid, silu and gelu of -inf), through the CPU executor.
TEST(Elementwise, F32MathKeepsSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f,  88.0f, 88.8f,    100.0f,    -100.0f, -200.0f,
                          inf,  -inf,  nan,  1e-40f, 3e38f, 50000.0f, -45000.0f, 0.5f};
  for (size_t shift = 0; shift < 3; ++shift) {  // tails of different lengths
    std::vector<float> v(x.begin() + shift, x.end());
    Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
    struct Case {
      const char* name;
      Tensor got;
      float (*ref)(float);
    };
    std::vector<Case> cases = {
        {"exp", exp(t), [](float a) { return std::exp(a); }},
        {"log", log(t), [](float a) { return std::log(a); }},
        {"tanh", tanh(t), [](float a) { return std::tanh(a); }},
        {"sin", sin(t), [](float a) { return std::sin(a); }},
        {"cos", cos(t), [](float a) { return std::cos(a); }},
        {"sigmoid", sigmoid(t), [](float a) { return 1.0f / (1.0f + std::exp(-a)); }},
        {"silu", silu(t), [](float a) { return a / (1.0f + std::exp(-a)); }},
        {"gelu", gelu(t), [](float a) { return 0.5f * a * std::erfc(-a * 0.70710678f); }},
        {"erf", erf(t), [](float a) { return std::erf(a); }},
        {"log1p", log1p(t), [](float a) { return std::log1p(a); }},
        {"expm1", expm1(t), [](float a) { return std::expm1(a); }},
        // Negative bases with integer and fractional exponents.
        {"pow(x, 3)", pow(t, 3.0), [](float a) { return std::pow(a, 3.0f); }},
        {"pow(x, -2)", pow(t, -2.0), [](float a) { return std::pow(a, -2.0f); }},
        {"pow(x, 0.5)", pow(t, 0.5), [](float a) { return std::pow(a, 0.5f); }},
        {"pow(-2, x)", pow(Tensor::full(t.shape(), -2.0), t),
         [](float a) { return std::pow(-2.0f, a); }}};
    for (Case& c : cases) {
      std::vector<float> got = c.got.to_vector<float>();
      for (size_t i = 0; i < v.size(); ++i) {
        float want = c.ref(v[i]);
        SCOPED_TRACE(std::string(c.name) + "(" + std::to_string(v[i]) + ")");
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << got[i];
        } else if (std::isinf(want) || want == 0.0f) {
          EXPECT_EQ(got[i], want);
        } else {
          EXPECT_NEAR(got[i], want, 4e-7f * std::fabs(want) + 1e-37f);
        }
      }
    }
  }
}

// One kernel of a long chain whose early values are read again late (x, a, b), with
// registers of all three classes (f32, f64 and the integer class, which also holds where's
// condition): a register overwritten while its value is still to be read, or a tile boundary
// handled wrong, shows up here. Over 5000 elements (two full tiles and a partial one), each
// checked against long double computed in the same order.
TEST(Elementwise, LongChainsKeepEveryLiveValue) {
  std::mt19937_64 rng(testing::test_seed() + 7);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 5000;
  const std::vector<float> xs = testing::random_floats(n, rng, -1, 1);
  const std::vector<double> zs = testing::random_doubles(n, rng, -3, 3);
  std::vector<int64_t> ks(n);
  for (int64_t e = 0; e < n; ++e) ks[e] = static_cast<int64_t>(rng() % 201) - 100;
  Tensor x = Tensor::from_vector(xs, {n}), z = Tensor::from_vector(zs, {n});
  Tensor k = Tensor::from_vector(ks, {n});
  Tensor a = x * 1.5, b = a + x, c = exp(b * 0.25), d = c - a;
  Tensor f = tanh(d * d) + b;
  Tensor g = where(x > 0.0, f, a);
  Tensor h = (k * 3 + 1).astype(DType::F32) * g;
  Tensor zz = z * 2.0 + x.astype(DType::F64);
  reset_stats();
  eval({h, zz});
  EXPECT_EQ(stats().kernels_launched, 1);
  const std::vector<double> got_h = values(h), got_zz = values(zz);
  for (int64_t e = 0; e < n; ++e) {
    const long double xe = xs[e], ae = xe * 1.5L, be = ae + xe, ce = std::exp(be * 0.25L);
    const long double de = ce - ae, fe = std::tanh(de * de) + be;
    const long double ge = xe > 0 ? fe : ae;
    const long double he = static_cast<long double>(ks[e] * 3 + 1) * ge;
    EXPECT_TRUE(close(he, got_h[e], 1e-5)) << "h at " << e;
    EXPECT_TRUE(close(zs[e] * 2.0L + xe, got_zz[e], 1e-14)) << "zz at " << e;
  }
}

}  // namespace
}  // namespace kiln
