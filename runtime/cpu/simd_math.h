// Vectorized float math for the CPU executor, through Google Highway's contrib/math with
// runtime dispatch to the best instruction set the machine has (SSE4, AVX2, AVX-512).
// Special values follow libm: exp overflows to inf, log(0) = -inf, log(x < 0) = NaN, NaN in
// gives NaN out; sin/cos arguments outside Highway's accurate range use libm.
// Each of these stands in for an op functor of ops/scalar_math.inc on f32 and gives the same
// special values (sigmoid, silu and gelu evaluate the functor's formula, so gelu(-inf) and
// silu(-inf) are NaN as there); tests/ops/scalar_math_test.cc holds each to a few ulps of it.
#ifndef KILN_RUNTIME_CPU_SIMD_MATH_H_
#define KILN_RUNTIME_CPU_SIMD_MATH_H_

#include <cstddef>
#include <cstdint>

namespace kiln::runtime::cpu {

// The f32 unary ops with a vector loop here, one line each, keyed by the op's OpKind
// (ops/op_catalog.h): X(Enum, name) declares simd_<name> below, which the tile evaluator runs
// for an f32 `Enum` instruction instead of the op functor's loop (simd_unary). The one list keeps
// the loops, the evaluator and the code generator from disagreeing about which ops have vector
// math.
//
// These have a per-vector function <name>_vec in simd_math-inl.h: simd_<name> applies it to
// each vector (simd_math.cc), and the code generator spells the op as a call of it
// (compiled_pointwise.cc). sigmoid is 1 / (1 + exp(-x)), silu x / (1 + exp(-x)) and gelu
// 0.5 x erfc(-x / sqrt(2)).
#define KILN_SIMD_UNARY_VECTOR_OPS(X) \
  X(Exp, exp)                         \
  X(Log, log)                         \
  X(Tanh, tanh)                       \
  X(Sigmoid, sigmoid)                 \
  X(Silu, silu)                       \
  X(Erf, erf)                         \
  X(Gelu, gelu)                       \
  X(Log1p, log1p)                     \
  X(Expm1, expm1)
// These compute in f64 and round once (Highway's f32 sin and cos are 3 ulps off and reach
// 1.0000001), so they have no f32 vector function and the code generator leaves them out.
#define KILN_SIMD_UNARY_F64_OPS(X) \
  X(Sin, sin)                      \
  X(Cos, cos)
#define KILN_SIMD_UNARY_OPS(X) KILN_SIMD_UNARY_VECTOR_OPS(X) KILN_SIMD_UNARY_F64_OPS(X)

// out[i] = op(in[i]) for i in [0, n), e.g. simd_exp.
#define KILN_DECLARE_SIMD_UNARY(Enum, name) void simd_##name(const float* in, float* out, size_t n);
KILN_SIMD_UNARY_OPS(KILN_DECLARE_SIMD_UNARY)
#undef KILN_DECLARE_SIMD_UNARY

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
// Attention for a few query rows, read in place where the GEMM core would pack a copy of every
// key and value. simd_dot_rows: out[j] = sum over i < depth of q[i] * rows[j * ld + i], for
// j < n (one query against n keys). simd_weighted_rows: acc[i] += sum over j < n of
// p[j] * rows[j * ld + i], for i < depth (a row of probabilities times n values). Both
// accumulate with fused multiply-adds, lane by lane, then across the lanes.
void simd_dot_rows(const float* q, const float* rows, int64_t ld, int64_t n, int64_t depth,
                   float* out);
void simd_weighted_rows(const float* p, const float* rows, int64_t ld, int64_t n, int64_t depth,
                        float* acc);
// The instruction set chosen at run time, e.g. "AVX2".
const char* simd_target_name();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SIMD_MATH_H_
