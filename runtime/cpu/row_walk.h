// Walking the rows of a row op (kRowNorm, kScan, kTopk: the norms, cumsum, topk): each row
// is the anchor operand's values along the anchor axis. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_ROW_WALK_H_
#define KILN_RUNTIME_CPU_ROW_WALK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "jit/fusion/family_geometry.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {

// Calls row(x, stride, r) for every row r (0 <= r < outer * inner) of the anchor's operand 0,
// on all cores: the row's k-th value is x[k * stride], in register class X. Rows along the
// last axis are computed one at a time straight from the prologue (x is read once, the row
// stays in cache); other rows come from the operand evaluated whole.
template <class X, class RowFn>
void for_each_row(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                  const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
                  RowFn&& row) {
  const jit::RowShape rows = jit::row_norm_shape(program, launch);
  const int64_t outer = rows.outer, extent = rows.extent, inner = rows.inner;
  if (extent == 0 || outer * inner == 0) return;
  const int operand = program.anchor_operands[0];
  if (inner == 1) {
    base::parallel_for(outer, std::max<int64_t>(1, 16384 / extent), [&](int64_t r0, int64_t r1) {
      TileEvaluator ev(program, launch, inputs, params, nullptr);
      for (int64_t r = r0; r < r1; ++r) {
        ev.run(1, r * extent, extent);
        row(ev.template values<X>(operand), int64_t{1}, r);
      }
    });
    return;
  }
  const std::vector<X> x = evaluate_operand<X>(program, launch, inputs, params, 0);
  base::parallel_for(outer * inner, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      row(x.data() + (r / inner) * extent * inner + (r % inner), inner, r);
    }
  });
}

// The first flat position of row r in a space whose extent along the axis is `extent`.
inline int64_t row_start(int64_t r, int64_t extent, int64_t inner) {
  return (r / inner) * extent * inner + (r % inner);
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_ROW_WALK_H_
