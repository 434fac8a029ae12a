// nn.h: rope, rotary position embedding composed of elementwise ops and one gather, which the
// planner fuses into the kernel that reads the result.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "jit/api/checked_axis.h"
#include "kiln/error.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/infer.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

// Per dim i of a vector of D dims: the frequency of its pair, the sign its partner's term
// takes (- for the pair's first dim, + for its second), and its partner.
struct PairTables {
  std::vector<double> frequency, sign;
  std::vector<int32_t> partner;
};

PairTables pair_tables(int64_t d, RopePairs pairs, double base, double scale,
                       const std::vector<double>& divisors) {
  PairTables t;
  const int64_t half = d / 2;
  const bool adjacent = pairs == RopePairs::Adjacent;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t pair = adjacent ? i / 2 : i % half;
    const bool first = adjacent ? i % 2 == 0 : i < half;
    const double divisor = divisors.empty() ? 1.0 : divisors[static_cast<size_t>(pair)];
    t.frequency.push_back(
        std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(d)) /
        (scale * divisor));
    t.sign.push_back(first ? -1.0 : 1.0);
    t.partner.push_back(static_cast<int32_t>(adjacent ? (i ^ 1) : (i + half) % d));
  }
  return t;
}

// The angles position * frequency, [positions' shape..., D], reduced to [-pi, pi] and given
// as f32: the product and the reduction in double, so that a late position's angle keeps its
// precision, then sin and cos in f32, which vectorize where double's cost 15-20 ns an element.
Tensor angles(const Tensor& positions, const std::vector<double>& frequency) {
  constexpr double kTwoPi = 6.283185307179586;
  std::vector<int64_t> shape = positions.shape();
  shape.push_back(1);
  const Tensor angle = positions.astype(DType::F64).reshape(shape) *
                       Tensor::from_vector(frequency, {static_cast<int64_t>(frequency.size())});
  const Tensor turns = floor(angle * (1.0 / kTwoPi) + 0.5);
  return (angle - turns * kTwoPi).astype(DType::F32);
}

void check_factors(const Tensor& positions, int64_t dims, double base, double scale,
                   const std::vector<double>& divisors) {
  auto fail = [&](const std::string& expected) {
    throw Error(absl::StrCat("[rope] ", expected, " (positions: ", jit::type_text(positions),
                             ", dims: ", dims, ", base: ", base, ", scale: ", scale, ")"));
  };
  if (!positions.defined()) fail("positions must be a defined tensor");
  if (positions.dtype() == DType::Bool) fail("positions must be numbers, not bool");
  if (dims < 2 || dims % 2 != 0) fail("the rotated axis must have an even number of dims");
  if (!(base > 0) || !(scale > 0)) fail("base and scale must be > 0");
  if (!divisors.empty() && static_cast<int64_t>(divisors.size()) * 2 != dims) {
    fail(absl::StrCat("divisors must hold one value per pair, dims / 2, not ", divisors.size()));
  }
  for (double d : divisors) {
    if (!(d > 0)) fail(absl::StrCat("every divisor must be > 0, not ", d));
  }
}

}  // namespace

RopeFactors rope_factors(const Tensor& positions, int64_t dims, RopePairs pairs, double base,
                         double scale, DType dtype, const std::vector<double>& divisors) {
  check_factors(positions, dims, base, scale, divisors);
  if (!is_floating(dtype)) {
    throw Error(
        absl::StrCat("[rope] the factors' dtype must be floating, not ", dtype_name(dtype)));
  }
  const PairTables t = pair_tables(dims, pairs, base, scale, divisors);
  RopeFactors f;
  // The sin and cos tables each compute their own angles: a shared angle table would be
  // stored and each factor recomputed in every kernel that reads it, where these chains cost
  // enough that the planner stores the factors themselves when several rope calls read them.
  f.cos = cos(angles(positions, t.frequency)).astype(dtype);
  f.sin = (sin(angles(positions, t.frequency)) * Tensor::from_vector(t.sign, {dims})).astype(dtype);
  f.partners = Tensor::from_vector(t.partner, {dims});
  return f;
}

Tensor rope(const Tensor& x, const RopeFactors& factors) {
  const bool ok = x.defined() && is_floating(x.dtype()) && x.ndim() >= 1 && factors.cos.defined() &&
                  factors.sin.defined() && factors.partners.defined() &&
                  factors.partners.shape() == std::vector<int64_t>{x.shape().back()};
  if (!ok) {
    throw Error(absl::StrCat("[rope] expected a floating x [..., D] and factors for D dims (x: ",
                             jit::type_text(x), ", cos: ", jit::type_text(factors.cos),
                             ", partners: ", jit::type_text(factors.partners), ")"));
  }
  absl::StatusOr<ops::Shape> joint = ops::broadcast_shapes(factors.cos.shape(), x.shape());
  if (!joint.ok() || *joint != x.shape()) {
    throw Error(absl::StrCat("[rope] the positions' shape followed by D, ",
                             ops::format_shape(factors.cos.shape()),
                             ", must broadcast to x's shape (x: ", jit::type_text(x), ")"));
  }
  // A cast to the dtype a factor already has would still record a node, on every call.
  auto as_x = [&](const Tensor& f) { return f.dtype() == x.dtype() ? f : f.astype(x.dtype()); };
  const Tensor turned = take(x, factors.partners, static_cast<int>(x.ndim() - 1));
  return x * as_x(factors.cos) + turned * as_x(factors.sin);
}

Tensor rope(const Tensor& x, const Tensor& positions, RopePairs pairs, double base, double scale) {
  if (!x.defined() || x.ndim() < 1) {
    throw Error(absl::StrCat(
        "[rope] x must be a tensor of at least one axis (x: ", jit::type_text(x), ")"));
  }
  return rope(x, rope_factors(positions, x.shape().back(), pairs, base, scale,
                              is_floating(x.dtype()) ? x.dtype() : DType::F32));
}

}  // namespace kiln
