// The tile evaluator's elementwise loops: out = op(a) and out = op(a, b) over the values of
// a tile's registers, for any unary or binary op of the catalog. Each call dispatches once to
// the op's functor (ops/scalar_math.inc), so the loop body is one known inline function and
// vectorizes; f32 transcendentals and arithmetic run the Highway loops of simd_math.h
// instead. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_ELEMENTWISE_LOOPS_H_
#define KILN_RUNTIME_CPU_ELEMENTWISE_LOOPS_H_

#include <cstdint>

#include "ops/op_catalog.h"

namespace kiln::runtime::cpu {

// out = op(a) over n values of register class T (float, double or int64_t). Integer results
// are not wrapped to a dtype: the caller does that. Throws kiln::Error for an op without an
// integer form on int64 values.
template <class T>
void unary_loop(ops::OpKind op, const T* a, T* out, int64_t n);
extern template void unary_loop<float>(ops::OpKind, const float*, float*, int64_t);
extern template void unary_loop<double>(ops::OpKind, const double*, double*, int64_t);
extern template void unary_loop<int64_t>(ops::OpKind, const int64_t*, int64_t*, int64_t);

// out = op(a, b) over n values: operands of register class T, results of type R (T, or
// int64 0/1 for comparisons and logical ops).
template <class T, class R>
void binary_loop(ops::OpKind op, const T* a, const T* b, R* out, int64_t n);
extern template void binary_loop<float, float>(ops::OpKind, const float*, const float*, float*,
                                               int64_t);
extern template void binary_loop<double, double>(ops::OpKind, const double*, const double*, double*,
                                                 int64_t);
extern template void binary_loop<int64_t, int64_t>(ops::OpKind, const int64_t*, const int64_t*,
                                                   int64_t*, int64_t);
extern template void binary_loop<float, int64_t>(ops::OpKind, const float*, const float*, int64_t*,
                                                 int64_t);
extern template void binary_loop<double, int64_t>(ops::OpKind, const double*, const double*,
                                                  int64_t*, int64_t);

// out = op(in) over n f32 values, exactly as the evaluator computes an f32 unary
// instruction (simd_math.h where it has the op). Elementwise: the same bits however the
// values are cut into runs, so a GEMM may apply it to the rows it finishes.
void unary_f32(ops::OpKind op, const float* in, float* out, int64_t n);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_ELEMENTWISE_LOOPS_H_
