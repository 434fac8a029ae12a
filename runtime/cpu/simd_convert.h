// Vectorized float -> bf16 conversion for the CPU executor (Highway, with the instruction set
// chosen at run time). Each gives exactly what BFloat16(float) in kiln/dtype.h gives: round
// to nearest even, NaN kept a quiet NaN. A 16-bit kernel rounds every value it computes, so
// a scalar conversion made bf16 row norms several times slower than f32 ones.
#ifndef KILN_RUNTIME_CPU_SIMD_CONVERT_H_
#define KILN_RUNTIME_CPU_SIMD_CONVERT_H_

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::runtime::cpu {

// v[i] = float(BFloat16(v[i])): each value rounded to what bf16 holds.
void round_floats_to_bf16(float* v, size_t n);

// out[i] = BFloat16(in[i]).
void floats_to_bf16(const float* in, BFloat16* out, size_t n);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_CONVERT_H_
