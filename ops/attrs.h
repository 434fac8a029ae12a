// The attributes an op node carries. One flat value type: each op uses the fields its
// catalog entry names (see ops/infer.cc and the trace-file writer), the rest stay default.
#ifndef KILN_OPS_ATTRS_H_
#define KILN_OPS_ATTRS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::ops {

struct Attrs {
  std::vector<int64_t> shape;  // reshape, broadcast_to; leaves: their own shape
  std::vector<int> axes;       // sum mean max min (sorted, non-negative), permute
  bool keepdims = false;       // reductions
  int axis = 0;                // argmax argmin concat slice softmax log_softmax cumsum topk
  int64_t start = 0;           // slice: the first element taken (normalized, see infer_slice)
  // update_slice over a region: where the update starts along every dim (entry `axis`, whose
  // start is `start`, is 0). Empty: along the axis only, the other dims whole.
  std::vector<int64_t> offsets;
  int64_t stop = 0;          // slice
  int64_t step = 1;          // slice: nonzero; negative walks the axis backwards
  double value = 0.0;        // constant
  double eps = 0.0;          // layer_norm rms_norm
  uint64_t seed = 0;         // rand randn
  DType dtype = DType::F32;  // astype; leaves: their own dtype
  std::string name;          // input
  int function = -1;         // custom: the registered function's id
  int64_t k = 0;             // topk_indices dynamic_slice: the result's extent along axis
  bool largest = true;       // topk_indices: the k largest (else the k smallest)
  double scale = 1.0;        // scaled_dot_product_attention: the factor on q·k
  bool causal = false;       // scaled_dot_product_attention: key j only for query i >= j
  // scaled_dot_product_attention with causal: query i sits at key position Sk - Sq + i (the
  // last query sees every key) instead of at i (PyTorch's is_causal).
  bool bottom_right = false;
  bool exclusive = false;  // cumsum: y[i] sums the elements before i (y[0] = 0)
  bool reverse = false;    // cumsum: sums from the end of the axis
  // Collectives (kCollective). `axis` is also all_gather's and reduce_scatter's axis.
  // The group as it was when the op was recorded (ops::set_collective_group): the shape rule
  // reads its size and this process's rank from here, never from the live registry.
  int group = -1;       // the process group's id (comm/group_registry.h)
  int group_size = 0;   // its number of ranks (0: not set, an error at inference)
  int group_rank = -1;  // this process's rank in it
  int reduction = 0;    // all_reduce reduce_scatter: a comm::Reduction
  int peer = 0;         // broadcast: the root; send: the destination; recv: the source rank
};

}  // namespace kiln::ops

#endif  // KILN_OPS_ATTRS_H_
