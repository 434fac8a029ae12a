// layer_norm and rms_norm of one contiguous f32 row, in the widest vectors the CPU has
// (Highway's run-time dispatch; the executor itself is built for the baseline instruction
// set, where the scalar loops of row_norm_kernel.cc compile to SSE2 without FMA).
#ifndef KILN_RUNTIME_CPU_SIMD_ROW_NORM_H_
#define KILN_RUNTIME_CPU_SIMD_ROW_NORM_H_

#include <cstdint>

namespace kiln::runtime::cpu {

// y = (x - mean) / sqrt(var + eps) * w + b over one row of n floats, with mean and var over
// the row (var about the mean, divided by n). When `center` is false (rms_norm) the mean is
// taken as 0 and b is not read (it may be null). Sums add in f32 lanes within blocks of 512
// elements and in double across blocks, as row_norm_kernel.cc's scalar sums do.
void simd_norm_row(const float* x, float* y, int64_t n, const float* w, const float* b, double eps,
                   bool center);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_ROW_NORM_H_
