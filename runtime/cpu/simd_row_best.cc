// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_row_best.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The scalar scan: rows shorter than a vector, and rows with a NaN.
int64_t FirstBestScalar(const float* row, int64_t n, bool want_max) {
  int64_t at = 0;
  for (int64_t k = 1; k < n; ++k) {
    const float x = row[k], best = row[at];
    if (best != best) return at;
    if (x != x || (want_max ? x > best : x < best)) at = k;
  }
  return at;
}

int64_t FirstBestInRowImpl(const float* row, int64_t n, bool want_max) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  if (n < lanes) return FirstBestScalar(row, n, want_max);
  // The best value, lane-wise: min and max are exact, so the order of the lanes does not
  // matter, and the last vector may overlap the one before it.
  auto best = hn::LoadU(d, row);
  auto nan = hn::IsNaN(best);
  for (int64_t k = lanes; k < n; k += lanes) {
    const auto x = hn::LoadU(d, row + (k + lanes <= n ? k : n - lanes));
    nan = hn::Or(nan, hn::IsNaN(x));
    best = want_max ? hn::Max(best, x) : hn::Min(best, x);
  }
  if (!hn::AllFalse(d, nan)) return FirstBestScalar(row, n, want_max);
  best = want_max ? hn::MaxOfLanes(d, best) : hn::MinOfLanes(d, best);
  // Its first position (equal compares -0 and +0 alike, as the scalar scan does).
  for (int64_t k = 0; k < n; k += lanes) {
    const int64_t at = k + lanes <= n ? k : n - lanes;
    const intptr_t lane = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, row + at), best));
    if (lane >= 0) return at + lane;
  }
  return 0;  // not reached: the best value is one of the row's
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/cpu/simd_row_best.h"

namespace kiln::runtime::cpu {

HWY_EXPORT(FirstBestInRowImpl);

int64_t simd_first_best_in_row(const float* row, int64_t n, bool want_max) {
  return HWY_DYNAMIC_DISPATCH(FirstBestInRowImpl)(row, n, want_max);
}

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
