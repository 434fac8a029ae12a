// Vectorized float math for the CPU executor, through Google Highway's contrib/math with
// runtime dispatch to the best instruction set the machine has (SSE4, AVX2, AVX-512).
// Special values follow libm: exp overflows to inf, log(0) = -inf, log(x < 0) = NaN, NaN in
// gives NaN out; sin/cos arguments outside Highway's accurate range use libm.
#ifndef KILN_RUNTIME_CPU_SIMD_MATH_H_
#define KILN_RUNTIME_CPU_SIMD_MATH_H_

#include <cstddef>

namespace kiln::runtime::cpu {

void simd_exp(const float* in, float* out, size_t n);
void simd_log(const float* in, float* out, size_t n);
void simd_tanh(const float* in, float* out, size_t n);
void simd_sin(const float* in, float* out, size_t n);
void simd_cos(const float* in, float* out, size_t n);
// The instruction set chosen at run time, e.g. "AVX2".
const char* simd_target_name();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_MATH_H_
