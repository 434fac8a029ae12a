// Vectorized float math for the CPU executor, through Google Highway's contrib/math with
// runtime dispatch to the best instruction set the machine has (SSE4, AVX2, AVX-512).
// Special values follow libm: exp overflows to inf, log(0) = -inf, log(x < 0) = NaN, NaN in
// gives NaN out; sin/cos arguments outside Highway's accurate range use libm.
// Each of these stands in for an op functor of ops/scalar_math.inc on f32 and gives the same
// special values (sigmoid, silu and gelu evaluate the functor's formula, so gelu(-inf) and
// silu(-inf) are NaN as there); tests/scalar_math_test.cc holds each to a few ulps of it.
#ifndef KILN_RUNTIME_CPU_SIMD_MATH_H_
#define KILN_RUNTIME_CPU_SIMD_MATH_H_

#include <cstddef>
#include <cstdint>

namespace kiln::runtime::cpu {

void simd_exp(const float* in, float* out, size_t n);
void simd_log(const float* in, float* out, size_t n);
void simd_tanh(const float* in, float* out, size_t n);
void simd_sin(const float* in, float* out, size_t n);
void simd_cos(const float* in, float* out, size_t n);
void simd_sigmoid(const float* in, float* out, size_t n);  // 1 / (1 + exp(-x))
void simd_silu(const float* in, float* out, size_t n);     // x / (1 + exp(-x))
void simd_erf(const float* in, float* out, size_t n);
void simd_gelu(const float* in, float* out, size_t n);  // 0.5 x erfc(-x / sqrt(2))
void simd_log1p(const float* in, float* out, size_t n);
void simd_expm1(const float* in, float* out, size_t n);
// out[i] = powf(a[i], b[i]), negative bases included; zero, infinite and NaN operands go
// through powf itself.
void simd_pow(const float* a, const float* b, float* out, size_t n);
// out[i] = a[i] + b[i] (and -, *, /): IEEE single operations, so the same bits as the
// scalar functors, in the widest vectors the machine has (the executor is built for the
// baseline instruction set).
void simd_add(const float* a, const float* b, float* out, size_t n);
void simd_sub(const float* a, const float* b, float* out, size_t n);
void simd_mul(const float* a, const float* b, float* out, size_t n);
void simd_div(const float* a, const float* b, float* out, size_t n);
// out[i] = in[i] * s and in[i] / s: the same IEEE single operations with one scalar operand.
void simd_mul_scalar(const float* in, float s, float* out, size_t n);
void simd_div_scalar(const float* in, float s, float* out, size_t n);
// One key tile of attention's online softmax over `rows` rows of `cols` scores (row stride
// ld; `in` may be `out`). Per row r: the new running max M = max(max[r], the row's max), NaN
// skipped; out = exp(in - M) (M taken as 0 while it is -inf); alpha[r] = exp(max[r] - M), the
// factor that rescales what earlier tiles summed; sum[r] = sum[r] * alpha[r] + Σ out;
// max[r] = M.
void online_softmax_tile(const float* in, float* out, int64_t rows, int64_t cols, int64_t ld,
                         float* max, float* sum, float* alpha);
// The instruction set chosen at run time, e.g. "AVX2".
const char* simd_target_name();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_MATH_H_
