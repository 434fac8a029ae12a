// The op functors of ops/scalar_math.inc against independent definitions, and the CPU
// device's SIMD specializations against the functors they stand in for.
#include "ops/scalar_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "runtime/cpu/simd_convert.h"
#include "runtime/cpu/simd_math.h"

namespace kiln {
namespace {

using ops::OpKind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Every unary and binary op of the catalog has a functor the host can call on double.
TEST(ScalarMathTest, EveryElementwiseCatalogOpHasAFunctor) {
  int count = 0;
  const ops::OpInfo* ops_list = ops::all_ops(&count);
  int elementwise = 0;
  for (int i = 0; i < count; ++i) {
    const ops::OpInfo& info = ops_list[i];
    if (info.op_class == ops::OpClass::kUnary) {
      EXPECT_NO_THROW(math::apply_unary(info.kind, 0.5)) << info.name;
      ++elementwise;
    } else if (info.op_class == ops::OpClass::kBinary) {
      EXPECT_NO_THROW(math::apply_binary(info.kind, 0.5, 2.0)) << info.name;
      ++elementwise;
    } else {
      EXPECT_THROW(math::apply_unary(info.kind, 0.5), std::logic_error) << info.name;
    }
  }
  EXPECT_GE(elementwise, 34);
}

TEST(ScalarMathTest, FloatingFunctorsMatchLibm) {
  for (double x : {-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 7.25}) {
    EXPECT_EQ(math::apply_unary(OpKind::Exp, x), std::exp(x));
    EXPECT_EQ(math::apply_unary(OpKind::Tanh, x), std::tanh(x));
    EXPECT_EQ(math::apply_unary(OpKind::Erf, x), std::erf(x));
    EXPECT_DOUBLE_EQ(math::apply_unary(OpKind::Sigmoid, x), 1.0 / (1.0 + std::exp(-x)));
    // Through erfc in the functor, through erf here: a few ulps apart.
    EXPECT_NEAR(math::apply_unary(OpKind::Gelu, x), 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))),
                1e-15 * std::max(1.0, std::fabs(x)));
    EXPECT_DOUBLE_EQ(math::apply_unary(OpKind::Silu, x), x / (1.0 + std::exp(-x)));
    EXPECT_EQ(math::apply_unary(OpKind::Floor, x), std::floor(x));
    EXPECT_EQ(math::apply_binary(OpKind::Pow, std::fabs(x), 1.5), std::pow(std::fabs(x), 1.5));
  }
  // Float registers call the f32 functions.
  EXPECT_EQ(math::apply_unary(OpKind::Exp, 1.5f), std::exp(1.5f));
  EXPECT_EQ(math::apply_unary(OpKind::Rsqrt, 4.0f), 0.5f);
}

TEST(ScalarMathTest, NanRulesAreTheDocumentedOnes) {
  EXPECT_TRUE(std::isnan(math::apply_unary(OpKind::Relu, kNaN)));
  EXPECT_EQ(math::apply_unary(OpKind::Relu, -kInf), 0.0);
  EXPECT_TRUE(std::isnan(math::apply_binary(OpKind::Maximum, kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(math::apply_binary(OpKind::Maximum, 1.0, kNaN)));
  EXPECT_TRUE(std::isnan(math::apply_binary(OpKind::Minimum, 1.0, kNaN)));
  EXPECT_EQ(math::apply_binary(OpKind::Maximum, -kInf, 1.0), 1.0);
  // NaN is true as a truth value.
  EXPECT_EQ(math::apply_binary(OpKind::LogicalAnd, kNaN, 1.0), 1.0);
  EXPECT_EQ(math::apply_unary(OpKind::LogicalNot, kNaN), 0.0);
  EXPECT_EQ(math::apply_binary(OpKind::Ne, kNaN, kNaN), 1.0);
}

TEST(ScalarMathTest, IntegerFunctorsWrapInsteadOfOverflowing) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(math::apply_binary<int64_t>(OpKind::Add, max, 1), min);
  EXPECT_EQ(math::apply_binary<int64_t>(OpKind::Mul, max, 2), -2);
  EXPECT_EQ(math::apply_unary<int64_t>(OpKind::Neg, min), min);
  EXPECT_EQ(math::apply_unary<int64_t>(OpKind::Abs, -7), 7);
  EXPECT_EQ(math::apply_binary<int64_t>(OpKind::Pow, 3, 5), 243);
  EXPECT_EQ(math::apply_binary<int64_t>(OpKind::Pow, -1, -3), -1);
  EXPECT_EQ(math::apply_binary<int64_t>(OpKind::Pow, 2, -1), 0);
  EXPECT_EQ(math::apply_unary<int64_t>(OpKind::Floor, 9), 9);
  EXPECT_THROW(math::apply_unary<int64_t>(OpKind::Exp, 1), std::logic_error);
  EXPECT_THROW(math::apply_binary<int64_t>(OpKind::Div, 1, 2), std::logic_error);
}

TEST(ScalarMathTest, InferenceTraitsComeFromTheFunctors) {
  EXPECT_TRUE(math::keeps_integers(OpKind::Neg));
  EXPECT_FALSE(math::keeps_integers(OpKind::Exp));
  EXPECT_FALSE(math::keeps_integers(OpKind::Div));
  EXPECT_TRUE(math::gives_bool(OpKind::Lt));
  EXPECT_TRUE(math::gives_bool(OpKind::LogicalNot));
  EXPECT_FALSE(math::gives_bool(OpKind::Maximum));
}

// (Philox's known answers are in creation_test.cc.)
TEST(ScalarMathTest, RandomLeavesStayInTheirRanges) {
  // Uniforms stay in [0, 1) and normals are finite, even for the extreme words.
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = math::rand_uniform(i, 7, 24);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_TRUE(std::isfinite(math::rand_normal(i, 7)));
  }
}

// Each SIMD specialization of the CPU device agrees with the functor it replaces, over
// ordinary values and the special ones, to a few float ulps.
TEST(ScalarMathTest, SimdSpecializationsAgreeWithTheirFunctors) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> wide(-60.0f, 60.0f);
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           88.0f,
                           -88.0f,
                           1e-30f,
                           3.0e38f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  while (in.size() < 4099) in.push_back(wide(rng));
  struct Specialization {
    OpKind op;
    void (*simd)(const float*, float*, size_t);
    bool positive_only;
  };
  const Specialization cases[] = {{OpKind::Exp, runtime::cpu::simd_exp, false},
                                  {OpKind::Log, runtime::cpu::simd_log, true},
                                  {OpKind::Tanh, runtime::cpu::simd_tanh, false},
                                  {OpKind::Sin, runtime::cpu::simd_sin, false},
                                  {OpKind::Cos, runtime::cpu::simd_cos, false}};
  for (const Specialization& c : cases) {
    std::vector<float> x = in;
    if (c.positive_only) {
      for (float& v : x) v = std::fabs(v);
    }
    std::vector<float> out(x.size(), -1.0f);
    c.simd(x.data(), out.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = math::apply_unary(c.op, x[i]);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(out[i])) << ops::op_name(c.op) << "(" << x[i] << ")";
      } else if (std::isinf(expected)) {
        EXPECT_EQ(out[i], expected) << ops::op_name(c.op) << "(" << x[i] << ")";
      } else {
        const float tolerance = 4e-7f * std::max(1.0f, std::fabs(expected)) + 1e-37f;
        EXPECT_NEAR(out[i], expected, tolerance) << ops::op_name(c.op) << "(" << x[i] << ")";
      }
    }
  }
}

// How far float `got` is from `exact`, in units of the float spacing at `exact`; below the
// normal range that spacing is 2^-149, so tiny results are held to an absolute bound.
double ulps_from(float got, double exact) {
  int exponent = 0;
  std::frexp(exact, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// Whether a SIMD result `got` stands in for the functor's `functor`: the same NaN, infinity or
// signed zero where the functor gives one, and within `max_ulps` of the exact value `exact`
// elsewhere. Where the functor's result underflows to zero, a SIMD version may keep a few
// subnormal ulps of the true value (gelu does near x = -14.2, where erfcf has underflowed).
testing::AssertionResult stands_in_for(float got, float functor, double exact, double max_ulps) {
  bool ok;
  if (std::isnan(functor)) {
    ok = std::isnan(got);
  } else if (std::isinf(functor)) {
    ok = got == functor;
  } else if (functor == 0.0f) {
    ok = std::signbit(got) == std::signbit(functor) && std::fabs(got) <= 16 * 1.4e-45f;
  } else {
    ok = std::isfinite(got) && ulps_from(got, exact) <= max_ulps;
  }
  if (ok) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "got " << got << ", functor " << functor << ", exact "
                                     << exact << " (" << ulps_from(got, exact) << " ulps)";
}

// Floats from every binade of both signs, a dense run where the functions bend, and the
// special values and the thresholds where the SIMD versions switch formulas or clamp.
std::vector<float> sweep_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float past_overflow = std::nextafter(88.72283f, inf);
  const float above_minus_one = std::nextafter(-1.0f, 0.0f);
  const float below_minus_one = std::nextafter(-1.0f, -inf);
  std::vector<float> x = {
      0.0f, -0.0f, inf, -inf, nan, 1.4e-45f, -1.4e-45f, 1.2e-38f, -1.2e-38f, 1e-30f, -1e-30f,
      3.4e38f, -3.4e38f, 5.9604645e-08f, -5.9604645e-08f,
      // exp's overflow and clamps; log1p's pole; expm1's reduction steps
      88.72283f, past_overflow, 89.0f, -88.0f, -103.9f, -104.5f, -1.0f, above_minus_one,
      below_minus_one, 0.34657359f, -0.34657359f, 17.33f, -17.33f,
      // erf and gelu where they change formula (|x| = 1, 3; x / sqrt(2) = 0, +-3, 3.9, and
      // +-0.5, +-1, +-2, where they changed before 2026-12-05), clamp (10.5) and underflow
      1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 0.70710677f, -0.70710677f, 1.4142135f, -1.4142135f, 2.828427f,
      -2.828427f, 4.2426405f, -4.2426405f, 5.5154328f, 5.5154333f, -5.5154328f, 3.92f, -3.92f,
      10.5f, -10.5f, 14.2f, -14.2f, 14.85f, -14.85f,
      // where f32 sin, cos and tanh fits once returned 1.0000001; sin and cos's f64 range
      3.235955e-06f, 1.570789f, 8.839648f, -8.839648f, 39000.0f, -39000.0f, 39001.0f};
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 8191) {
    x.push_back(std::bit_cast<float>(bits));
    x.push_back(-std::bit_cast<float>(bits));
  }
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> dense(-20.0f, 20.0f);
  for (int i = 0; i < 100000; ++i) x.push_back(dense(rng));
  return x;
}

// Runs `check` once per instruction set Highway compiled that this machine has (AVX2 and SSE4
// differ: only the first fuses multiply-adds), then restores the normal dispatch.
template <class Check>
void on_every_simd_target(Check check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(runtime::cpu::simd_target_name());
    check();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The vectorized float -> bf16 conversions against the scalar BFloat16(float) bit for bit:
// every high half with low halves at and around the rounding tie (ties to even both ways),
// which also covers infinities, NaNs whose rounding would carry into infinity, subnormals
// and zeros. Odd lengths exercise the scalar tail.
TEST(ScalarMathTest, SimdBf16ConversionsMatchTheScalarOneOnEveryTarget) {
  std::vector<float> x;
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xc000u, 0xffffu}) {
      x.push_back(std::bit_cast<float>(high << 16 | low));
    }
  }
  on_every_simd_target([&] {
    for (size_t n : {x.size(), x.size() - 5, size_t{3}}) {
      std::vector<float> rounded(x.begin(), x.begin() + n);
      std::vector<BFloat16> stored(n);
      runtime::cpu::round_floats_to_bf16(rounded.data(), n);
      runtime::cpu::floats_to_bf16(x.data(), stored.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t want = BFloat16(x[i]).bits;
        ASSERT_EQ(stored[i].bits, want) << std::hex << std::bit_cast<uint32_t>(x[i]);
        ASSERT_EQ(std::bit_cast<uint32_t>(rounded[i]), uint32_t{want} << 16)
            << std::hex << std::bit_cast<uint32_t>(x[i]);
      }
    }
  });
}

// The same for f16, both ways: floats around every f16 value (each high half with low halves
// around the rounding ties of normal and subnormal f16 values), and every f16 bit pattern
// widened. NaN only has to stay a NaN (F16C quiets a signalling one).
TEST(ScalarMathTest, SimdF16ConversionsMatchTheScalarOnesOnEveryTarget) {
  std::vector<float> x;
  for (uint32_t high = 0; high <= 0xffffu; ++high) {
    for (uint32_t low :
         {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      x.push_back(std::bit_cast<float>(high << 16 | low));
    }
  }
  std::vector<Half> every_half(0x10000);
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) every_half[bits].bits = bits;
  auto same = [](float got, float want) {
    return std::isnan(want) ? std::isnan(got)
                            : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want);
  };
  on_every_simd_target([&] {
    for (size_t n : {x.size(), x.size() - 5, size_t{3}}) {
      std::vector<float> rounded(x.begin(), x.begin() + n);
      std::vector<Half> stored(n);
      runtime::cpu::round_floats_to_f16(rounded.data(), n);
      runtime::cpu::floats_to_f16(x.data(), stored.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const Half want(x[i]);
        ASSERT_TRUE(same(static_cast<float>(stored[i]), static_cast<float>(want)))
            << std::hex << std::bit_cast<uint32_t>(x[i]) << " gave " << stored[i].bits;
        ASSERT_TRUE(same(rounded[i], static_cast<float>(want)))
            << std::hex << std::bit_cast<uint32_t>(x[i]);
      }
    }
    std::vector<float> widened(every_half.size());
    runtime::cpu::f16_to_floats(every_half.data(), widened.data(), every_half.size());
    for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
      ASSERT_TRUE(same(widened[bits], static_cast<float>(every_half[bits]))) << std::hex << bits;
    }
  });
}

// The SIMD arithmetic (two arrays, or an array and one scalar) is the IEEE single op, bit
// for bit, on every target: random values across the exponent range, signed zeros,
// infinities and NaN, at a length with a ragged tail.
TEST(ScalarMathTest, SimdArithmeticIsTheScalarOpBitForBit) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> a = {0.0f,
                          -0.0f,
                          std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          1e-40f,
                          3e38f};
  while (a.size() < 1003) a.push_back(std::bit_cast<float>(bits(rng)));
  std::vector<float> b(a.rbegin(), a.rend());
  using Binary = void (*)(const float*, const float*, float*, size_t);
  using WithScalar = void (*)(const float*, float, float*, size_t);
  const std::pair<Binary, float (*)(float, float)> binaries[] = {
      {runtime::cpu::simd_add, [](float x, float y) { return x + y; }},
      {runtime::cpu::simd_sub, [](float x, float y) { return x - y; }},
      {runtime::cpu::simd_mul, [](float x, float y) { return x * y; }},
      {runtime::cpu::simd_div, [](float x, float y) { return x / y; }}};
  const std::pair<WithScalar, float (*)(float, float)> with_scalar[] = {
      {runtime::cpu::simd_mul_scalar, [](float x, float y) { return x * y; }},
      {runtime::cpu::simd_div_scalar, [](float x, float y) { return x / y; }}};
  auto same_bits = [](float want, float got) {
    return std::isnan(want) ? std::isnan(got)
                            : std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(got);
  };
  on_every_simd_target([&] {
    std::vector<float> out(a.size());
    for (size_t op = 0; op < std::size(binaries); ++op) {
      std::fill(out.begin(), out.end(), -7.0f);
      binaries[op].first(a.data(), b.data(), out.data(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(same_bits(binaries[op].second(a[i], b[i]), out[i])) << op << " at " << i;
      }
    }
    for (size_t op = 0; op < std::size(with_scalar); ++op) {
      for (float s : {b[7], 0.125f, -3.0f, 0.0f}) {
        std::fill(out.begin(), out.end(), -7.0f);
        with_scalar[op].first(a.data(), s, out.data(), a.size());
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_TRUE(same_bits(with_scalar[op].second(a[i], s), out[i])) << op << " at " << i;
        }
      }
    }
  });
}

// The SIMD transcendentals added after exp/log/tanh/sin/cos, against double-precision
// references: the bounds are the largest errors measured over every float of each working
// range on AVX2 and SSE4 (sigmoid 2.5, silu 2.4, erf 1.3, gelu 4.3, log1p 1.4, expm1 1.6),
// rounded up; tanh, a rational fit, 4.6 with FMA and 5.7 without over this sweep; sin and
// cos, computed in f64 and rounded once, half an ulp. docs/semantics.md states these bounds.
// Every result also stays inside its function's range ([-1, 1], or [0, 1] for sigmoid).
TEST(ScalarMathTest, SimdTranscendentalsStandInForTheirFunctors) {
  struct Case {
    OpKind op;
    void (*simd)(const float*, float*, size_t);
    double (*exact)(float);
    double max_ulps;
  };
  const Case cases[] = {
      {OpKind::Sigmoid, runtime::cpu::simd_sigmoid,
       [](float x) { return 1.0 / (1.0 + std::exp(-static_cast<double>(x))); }, 3},
      {OpKind::Silu, runtime::cpu::simd_silu,
       [](float x) { return x / (1.0 + std::exp(-static_cast<double>(x))); }, 3},
      {OpKind::Erf, runtime::cpu::simd_erf, [](float x) { return std::erf(double{x}); }, 2},
      // The functor's formula in double, from the same float t = -x / sqrt(2).
      {OpKind::Gelu, runtime::cpu::simd_gelu,
       [](float x) { return 0.5 * x * std::erfc(double{-x * 0.70710678118654752440f}); }, 5},
      {OpKind::Log1p, runtime::cpu::simd_log1p, [](float x) { return std::log1p(double{x}); }, 2},
      {OpKind::Expm1, runtime::cpu::simd_expm1, [](float x) { return std::expm1(double{x}); }, 2},
      {OpKind::Tanh, runtime::cpu::simd_tanh, [](float x) { return std::tanh(double{x}); }, 6},
      {OpKind::Exp, runtime::cpu::simd_exp, [](float x) { return std::exp(double{x}); }, 3},
      {OpKind::Log, runtime::cpu::simd_log, [](float x) { return std::log(double{x}); }, 3},
      {OpKind::Sin, runtime::cpu::simd_sin, [](float x) { return std::sin(double{x}); }, 0.501},
      {OpKind::Cos, runtime::cpu::simd_cos, [](float x) { return std::cos(double{x}); }, 0.501},
  };
  // The range each function's results must stay in (NaN aside).
  const auto in_range = [](OpKind op, float y) {
    switch (op) {
      case OpKind::Sigmoid:
        return y >= 0.0f && y <= 1.0f;
      case OpKind::Exp:
        return y >= 0.0f;
      case OpKind::Erf:
      case OpKind::Tanh:
      case OpKind::Sin:
      case OpKind::Cos:
        return y >= -1.0f && y <= 1.0f;
      default:
        return true;
    }
  };
  const std::vector<float> x = sweep_inputs();
  on_every_simd_target([&] {
    for (const Case& c : cases) {
      std::vector<float> out(x.size());
      c.simd(x.data(), out.data(), x.size());
      int failures = 0;
      for (size_t i = 0; i < x.size() && failures < 10; ++i) {
        const float functor = math::apply_unary(c.op, x[i]);
        const testing::AssertionResult r =
            stands_in_for(out[i], functor, c.exact(x[i]), c.max_ulps);
        EXPECT_TRUE(r) << ops::op_name(c.op) << "(" << x[i] << ")";
        const bool ranged = std::isnan(out[i]) || in_range(c.op, out[i]);
        EXPECT_TRUE(ranged) << ops::op_name(c.op) << "(" << std::hexfloat << x[i]
                            << ") = " << out[i] << std::defaultfloat
                            << " is outside the function's range";
        failures += r && ranged ? 0 : 1;
      }
    }
  });
}

// pow over bases from every binade of both signs against integer, half-integer and other
// exponents: a negative base takes the sign of an odd integer exponent and gives NaN for a
// non-integer one; zero, infinite and NaN operands follow powf.
TEST(ScalarMathTest, SimdPowStandsInForItsFunctor) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials = {0.0f,  -0.0f, 1.0f, -1.0f, 0.5f,     -0.5f,    2.0f,
                                       -2.0f, inf,   -inf, nan,   1.4e-45f, -3.4e38f, 3.4e38f};
  const std::vector<float> exponents = {
      0.0f,  -0.0f,  1.0f,        -1.0f,       2.0f,  -2.0f,       3.0f,  -3.0f,  7.0f,
      -7.0f, 0.5f,   -0.5f,       2.5f,        -2.5f, 0.33333334f, 1e-3f, 127.0f, -149.0f,
      1e10f, -1e10f, 16777216.0f, 16777217.0f, inf,   -inf,        nan};
  std::vector<float> a, b;
  for (float base : specials) {
    for (float e : exponents) {
      a.push_back(base);
      b.push_back(e);
    }
  }
  for (float e : exponents) {
    for (uint32_t bits = 0; bits < 0x7f800000u; bits += 65521) {
      const float base = std::bit_cast<float>(bits);
      a.insert(a.end(), {base, -base});
      b.insert(b.end(), {e, e});
    }
  }
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> log2_base(-30.0f, 30.0f), exponent(-30.0f, 30.0f);
  for (int i = 0; i < 100000; ++i) {
    a.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(log2_base(rng)));
    b.push_back(i % 3 ? exponent(rng) : std::round(exponent(rng)));
  }
  on_every_simd_target([&] {
    std::vector<float> out(a.size());
    runtime::cpu::simd_pow(a.data(), b.data(), out.data(), a.size());
    int failures = 0;
    for (size_t i = 0; i < a.size() && failures < 10; ++i) {
      const float functor = math::apply_binary(OpKind::Pow, a[i], b[i]);
      const double exact = std::pow(double{a[i]}, double{b[i]});
      const testing::AssertionResult r = stands_in_for(out[i], functor, exact, 1);
      EXPECT_TRUE(r) << "pow(" << a[i] << ", " << b[i] << ")";
      failures += r ? 0 : 1;
    }
  });
}

}  // namespace
}  // namespace kiln
