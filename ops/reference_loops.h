// What the per-class reference evaluations (ops/elementwise.cc, ops/view.cc, ops/matmul.cc,
// ...) share: numpy broadcasting as strides, a row-major walk over a shape with any number of
// strided offsets, and the rounding of an operand to its compute dtype. Kept beside the
// evaluator rather than in ops/element_access.h because only these reference loops need them.
#ifndef KILN_OPS_REFERENCE_LOOPS_H_
#define KILN_OPS_REFERENCE_LOOPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/dtype.h"
#include "ops/value_type.h"

namespace kiln::ops {

using Strides = std::vector<int64_t>;

// Element strides of `in` seen through numpy broadcasting to `out` (0 on broadcast dims).
inline Strides broadcast_strides(const Shape& in, const Shape& out) {
  Strides contiguous = contiguous_strides(in);
  Strides strides(out.size(), 0);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[offset + i] = in[i] == 1 ? 0 : contiguous[i];
  }
  return strides;
}

// Calls f(i, offsets) for each element i of `shape` in row-major order, where offsets[k]
// walks `strides[k]` (starting at bases[k]).
template <class F>
void for_each_index(const Shape& shape, const std::vector<Strides>& strides, F&& f,
                    std::vector<int64_t> offsets = {}) {
  int64_t count = numel(shape);
  if (count == 0) return;
  offsets.resize(strides.size(), 0);
  const int ndim = static_cast<int>(shape.size());
  std::vector<int64_t> index(ndim, 0);
  for (int64_t i = 0; i < count; ++i) {
    f(i, offsets);
    for (int d = ndim - 1; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] += strides[k][d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// Rounds a double to what dtype `dt` can hold (the value an operand has once cast).
inline double round_to(DType dt, double v) {
  switch (dt) {
    case DType::F16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BF16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::F8E4M3:
      return static_cast<float>(Float8E4M3(static_cast<float>(v)));
    case DType::F8E5M2:
      return static_cast<float>(Float8E5M2(static_cast<float>(v)));
    case DType::F32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

}  // namespace kiln::ops

#endif  // KILN_OPS_REFERENCE_LOOPS_H_
