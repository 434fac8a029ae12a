// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_column_sum.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AddRowsToDoublesImpl(const float* v, int64_t rows, int64_t ld, int64_t cols, double* acc) {
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as a vector has doubles
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  int64_t j = 0;
  // Four vectors of columns at a time: four independent additions per row in flight.
  for (; j + 4 * lanes <= cols; j += 4 * lanes) {
    auto a0 = hn::LoadU(dd, acc + j), a1 = hn::LoadU(dd, acc + j + lanes);
    auto a2 = hn::LoadU(dd, acc + j + 2 * lanes), a3 = hn::LoadU(dd, acc + j + 3 * lanes);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = v + r * ld + j;
      a0 = hn::Add(a0, hn::PromoteTo(dd, hn::LoadU(df, row)));
      a1 = hn::Add(a1, hn::PromoteTo(dd, hn::LoadU(df, row + lanes)));
      a2 = hn::Add(a2, hn::PromoteTo(dd, hn::LoadU(df, row + 2 * lanes)));
      a3 = hn::Add(a3, hn::PromoteTo(dd, hn::LoadU(df, row + 3 * lanes)));
    }
    hn::StoreU(a0, dd, acc + j);
    hn::StoreU(a1, dd, acc + j + lanes);
    hn::StoreU(a2, dd, acc + j + 2 * lanes);
    hn::StoreU(a3, dd, acc + j + 3 * lanes);
  }
  for (; j + lanes <= cols; j += lanes) {
    auto a = hn::LoadU(dd, acc + j);
    for (int64_t r = 0; r < rows; ++r)
      a = hn::Add(a, hn::PromoteTo(dd, hn::LoadU(df, v + r * ld + j)));
    hn::StoreU(a, dd, acc + j);
  }
#else
  int64_t j = 0;
#endif
  for (; j < cols; ++j) {
    double a = acc[j];
    for (int64_t r = 0; r < rows; ++r) a += static_cast<double>(v[r * ld + j]);
    acc[j] = a;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/cpu/simd_column_sum.h"

namespace kiln::runtime::cpu {

HWY_EXPORT(AddRowsToDoublesImpl);

void simd_add_rows_to_doubles(const float* v, int64_t rows, int64_t ld, int64_t cols, double* acc) {
  HWY_DYNAMIC_DISPATCH(AddRowsToDoublesImpl)(v, rows, ld, cols, acc);
}

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
