// scaled_dot_product_attention(q, k, v[, mask]): for each query row i of each batch and head,
//   out[i] = Σ_j softmax_j(scale · q[i]·k[j] + mask[i, j]) v[j]
// with key j left out (score -inf) for j > i + causal_offset when attrs.causal: top-left
// aligned (offset 0, as PyTorch's is_causal), or bottom-right with attrs.bottom_right (offset
// Sk - Sq: the last query sees every key). What every layer shares about it: the shape rule
// with its errors, the sizes kernels iterate over, the causal offset, and the reference
// evaluation.
//
// Shapes: q [..., Hq, Sq, D], k [..., Hkv, Sk, D], v [..., Hkv, Sk, Dv] (rank >= 3; rank 2 has
// no heads). The leading dims match; Hq is a multiple of Hkv (grouped-query attention: query
// head h reads key/value head h / (Hq / Hkv)). The mask, when given, is floating and has the
// scores' shape [..., Hq, Sq, Sk] (the public API broadcasts it and turns a bool mask into
// 0 / -inf). The result has q's dtype and the shape [..., Hq, Sq, Dv].
//
// A row whose scores are all -inf has no softmax: its output is NaN, as the composed form's.
#ifndef KILN_OPS_ATTENTION_H_
#define KILN_OPS_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The sizes an attention iterates over. Batch b (0 <= b < batches, q's leading dims and
// heads flattened) reads key/value batch kv_batch(b).
struct AttentionShape {
  int64_t batches = 1;  // q's dims before the last two, multiplied
  int64_t group = 1;    // query heads per key/value head (Hq / Hkv)
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  int64_t kv_batch(int64_t b) const { return b / group; }
};

// From the shapes of q, k and v (already checked by infer_attention).
AttentionShape attention_shape(const Shape& q, const Shape& k, const Shape& v);

// The key position of query 0 under a causal cut: query i sees keys j <= i + offset. 0 when
// top-left aligned, Sk - Sq when bottom-right (negative when Sq > Sk: the first Sq - Sk
// queries then see no key).
inline int64_t causal_offset(const Attrs& attrs, const AttentionShape& s) {
  return attrs.bottom_right ? s.sk - s.sq : 0;
}

absl::StatusOr<ValueType> infer_attention(const std::vector<ValueType>& in, const Attrs& attrs);

// The reference, in double: scores, mask, causal cut, softmax and the weighted sum, one row
// at a time.
void evaluate_attention(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                        base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_ATTENTION_H_
