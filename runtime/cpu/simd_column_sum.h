// Column sums on the CPU: whole rows of f32 added into double accumulators, in the widest
// vectors the machine has (runtime dispatch, as simd_math.h).
#ifndef KILN_RUNTIME_CPU_SIMD_COLUMN_SUM_H_
#define KILN_RUNTIME_CPU_SIMD_COLUMN_SUM_H_

#include <cstdint>

namespace kiln::runtime::cpu {

// acc[j] += v[r * ld + j] for r = 0, 1, ..., rows - 1 in that order, for j in [0, cols): the
// same additions, in the same order, as the plain loop, so the same bits. The accumulators
// of a block of columns stay in registers across all the rows, so each is read and written
// once per call instead of once per row.
void simd_add_rows_to_doubles(const float* v, int64_t rows, int64_t ld, int64_t cols, double* acc);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_COLUMN_SUM_H_
