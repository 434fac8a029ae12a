// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_row_norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Σ term(x[k]) over k in [0, n): two vector accumulators in f32 within each block of 512
// elements, the blocks' sums added in double (so a long row keeps near-double accuracy).
// The last partial vector is read through a zero-padded copy and masked after `term`.
template <class Term>
HWY_INLINE double row_sum(const float* x, int64_t n, Term term) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t kBlock = 512;
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
    int64_t k = begin;
    for (; k + 2 * lanes <= end; k += 2 * lanes) {
      acc0 = hn::Add(acc0, term(hn::LoadU(d, x + k)));
      acc1 = hn::Add(acc1, term(hn::LoadU(d, x + k + lanes)));
    }
    for (; k + lanes <= end; k += lanes) acc0 = hn::Add(acc0, term(hn::LoadU(d, x + k)));
    if (k < end) {
      HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)] = {};
      std::copy(x + k, x + end, tail);
      const auto valid = hn::FirstN(d, static_cast<size_t>(end - k));
      acc1 = hn::Add(acc1, hn::IfThenElseZero(valid, term(hn::Load(d, tail))));
    }
    total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1))));
  }
  return total;
}

void NormRowImpl(const float* x, float* y, int64_t n, const float* w, const float* b, double eps,
                 bool center) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const double mean =
      center ? row_sum(x, n, [](auto v) { return v; }) / static_cast<double>(n) : 0.0;
  const auto vmean = hn::Set(d, static_cast<float>(mean));
  const double sq = row_sum(x, n, [vmean](auto v) {
    const auto c = hn::Sub(v, vmean);
    return hn::Mul(c, c);
  });
  const auto scale =
      hn::Set(d, static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + eps)));
  // (x - mean) * scale * w (+ b): the scalar form's order of operations, vector by vector.
  auto normed = [&](auto v, auto vw, auto vb) {
    const auto scaled = hn::Mul(hn::Mul(hn::Sub(v, vmean), scale), vw);
    return center ? hn::Add(scaled, vb) : scaled;
  };
  const auto zero = hn::Zero(d);
  int64_t k = 0;
  for (; k + lanes <= n; k += lanes) {
    const auto vb = center ? hn::LoadU(d, b + k) : zero;
    hn::StoreU(normed(hn::LoadU(d, x + k), hn::LoadU(d, w + k), vb), d, y + k);
  }
  if (k < n) {
    HWY_ALIGN float xs[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float ws[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float bs[HWY_MAX_BYTES / sizeof(float)] = {};
    std::copy(x + k, x + n, xs);
    std::copy(w + k, w + n, ws);
    if (center) std::copy(b + k, b + n, bs);
    hn::Store(normed(hn::Load(d, xs), hn::Load(d, ws), hn::Load(d, bs)), d, xs);
    std::copy(xs, xs + (n - k), y + k);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/cpu/simd_row_norm.h"

namespace kiln::runtime::cpu {

HWY_EXPORT(NormRowImpl);

void simd_norm_row(const float* x, float* y, int64_t n, const float* w, const float* b, double eps,
                   bool center) {
  HWY_DYNAMIC_DISPATCH(NormRowImpl)(x, y, n, w, b, eps, center);
}

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
