// Sums over a few elements per result (a point's two or three coordinates) are computed as
// an expression, not as a reduction kernel: `sum(x, axis)` with at most kMaxUnrolledSum
// elements per result is lowered as x's terms added one after another, in double, in the
// order the reduction adds them. It then fuses like an elementwise op: into its consumer's
// kernel (the argmin of k-means' distances), with its producers recomputed per term. A
// reduction kernel over rows of two would spend more on each row than on its math, and
// would store a result that its consumer reads back.
//
// The result is the reduction's bit for bit: each term is converted to double and added in
// the reduction's order, as the reference evaluator does, then rounded once; two terms of
// f32 or narrower add in f32, which rounds the same (lowering.cc says why). One case
// differs: a sum of only negative zeros is -0, where the reduction, starting from +0, gives
// +0; the two compare equal.
#ifndef KILN_JIT_FUSION_SHORT_SUM_H_
#define KILN_JIT_FUSION_SHORT_SUM_H_

#include <cstdint>

#include "jit/fusion/trace.h"

namespace kiln::jit {

// The most elements per result a sum is unrolled over. Each term recomputes the sum's fused
// producers, so beyond a few terms a reduction kernel's loop costs less.
inline constexpr int64_t kMaxUnrolledSum = 4;

// Whether trace node `node` is a floating-point sum over 1 to kMaxUnrolledSum elements per
// result, computed as an expression (planner.cc fuses it, lowering.cc unrolls it).
bool is_unrolled_sum(const Trace& trace, int node);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_SHORT_SUM_H_
