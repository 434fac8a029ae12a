// Walking a strided view of an iteration space by runs: the positions of a tile along the
// innermost dim, each run one base offset plus multiples of the view's last stride, so the
// tile evaluator's loads, gathers and index leaves (and view_offsets) loop over runs without
// an offset per element. Private to runtime/cpu.
#ifndef KILN_RUNTIME_CPU_VIEW_RUNS_H_
#define KILN_RUNTIME_CPU_VIEW_RUNS_H_

#include <algorithm>
#include <cstdint>

#include "jit/fusion/kernel_ir.h"
#include "ops/value_type.h"

namespace kiln::runtime::cpu {

// Calls fn(e, run, base) for each run of positions [begin, begin + n) along the last dim of
// `shape`: positions e .. e + run - 1 read view offsets base, base + stride, ... with
// stride the view's last stride.
template <class Fn>
void for_each_run(const ops::Shape& shape, const jit::ViewParams& v, int64_t begin, int64_t n,
                  Fn fn) {
  const int rank = static_cast<int>(shape.size());
  // The position's index per dim, in a plain array (no rank exceeds kMaxRank): this loop runs
  // once per run, and runs can be two elements long (a point's coordinates).
  int64_t idx[ops::kMaxRank];
  int64_t rest = begin;
  int64_t base = v.offset;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : rest % shape[d];
    rest = shape[d] == 0 ? 0 : rest / shape[d];
    base += idx[d] * v.strides[d];
  }
  const int last = rank - 1;
  const int64_t extent = shape[last];
  const int64_t stride = v.strides[last];
  int64_t at = idx[last];  // the position along the last dim
  int64_t e = 0;
  while (e < n) {
    const int64_t run = std::min(n - e, extent - at);
    fn(e, run, base);
    e += run;
    base += run * stride;
    at += run;
    if (at < extent) continue;
    base -= extent * stride;
    at = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++idx[d];
      base += v.strides[d];
      if (idx[d] < shape[d]) break;
      base -= shape[d] * v.strides[d];
      idx[d] = 0;
    }
  }
}

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_VIEW_RUNS_H_
