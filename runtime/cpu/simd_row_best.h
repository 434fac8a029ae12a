// The position of a row's largest or smallest f32 value, in the widest vectors the machine
// has (runtime dispatch, as simd_math.h): the arg-reductions over short rows (k-means'
// nearest of 16 centers), which a scalar scan spends on branches.
#ifndef KILN_RUNTIME_CPU_SIMD_ROW_BEST_H_
#define KILN_RUNTIME_CPU_SIMD_ROW_BEST_H_

#include <cstdint>

namespace kiln::runtime::cpu {

// The first position of the largest (want_max) or smallest value of row[0, n), n > 0; the
// first NaN's when the row has one (NaN propagates, as in the reference evaluator).
int64_t simd_first_best_in_row(const float* row, int64_t n, bool want_max);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_ROW_BEST_H_
