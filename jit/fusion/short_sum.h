// Sums over a few elements per result (a 2-D point's coordinates) are computed as an
// expression, not as a reduction kernel: `sum(x, axis)` with at most two elements per
// result (four in f64) is lowered as x's terms added one after another in the sum's own
// dtype, in the order the reduction adds them. It then fuses like an elementwise op: into
// its consumer's kernel (the argmin of k-means' distances), with its producers recomputed
// per term. A reduction kernel over rows of two would spend more on each row than on its
// math, and would store a result that its consumer reads back.
//
// The result is the reduction's bit for bit. The reference and the CPU add a reduction's
// elements in double and round once; f64 terms add in f64 as they do; two terms of f32 or
// narrower add in f32, which rounds the same (lowering.cc says why). Three f32 terms would
// not, and adding them in double would put FP64 into f32 GPU kernels, which Kiln does not
// (a GPU's FP64 rate is a fraction of its FP32 rate), so they stay a reduction. One case
// differs: a sum of only negative zeros is -0, where the reduction, starting from +0, gives
// +0; the two compare equal.
#ifndef KILN_JIT_FUSION_SHORT_SUM_H_
#define KILN_JIT_FUSION_SHORT_SUM_H_

#include <cstdint>

#include "jit/fusion/trace.h"

namespace kiln::jit {

// The most elements per result an f64 sum is unrolled over (f32, f16 and bf16: two). Each
// term recomputes the sum's fused producers, so beyond a few terms a reduction kernel's loop
// costs less.
inline constexpr int64_t kMaxUnrolledSum = 4;

// Whether trace node `node` is a floating-point sum over 1 to 2 elements per result (1 to
// kMaxUnrolledSum in f64), computed as an expression (planner.cc fuses it, lowering.cc
// unrolls it).
bool is_unrolled_sum(const Trace& trace, int node);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_SHORT_SUM_H_
