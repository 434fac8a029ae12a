// The op functors of ops/scalar_math.inc against independent definitions, and the CPU
// device's SIMD specializations against the functors they stand in for.
#include "ops/scalar_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

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

}  // namespace
}  // namespace kiln
