// Vectorized float <-> bf16/f16 conversion for the CPU executor (Highway, with the
// instruction set chosen at run time). Each gives exactly what BFloat16(float), Half(float)
// and Half's float() in kiln/dtype.h give: round to nearest even (f16 with subnormals), NaN
// kept a NaN. A 16-bit kernel rounds every value it computes, so a scalar conversion made
// bf16 row norms several times slower than f32 ones, and f16 GEMM epilogues twice as slow
// as the product. f16 uses the F16C instructions where the target has them (AVX2 and up);
// other targets convert one value at a time.
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

// v[i] = float(Half(v[i])).
void round_floats_to_f16(float* v, size_t n);

// out[i] = Half(in[i]).
void floats_to_f16(const float* in, Half* out, size_t n);

// out[i] = float(in[i]).
void f16_to_floats(const Half* in, float* out, size_t n);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_CONVERT_H_
