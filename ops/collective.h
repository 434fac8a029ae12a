// Collectives: all_reduce all_gather reduce_scatter broadcast send recv exchange a tensor
// with the other processes of a group (comm/). This file holds what every
// layer shares about them: the shape rule and the reference evaluation (which moves the
// same bytes through the same group as the devices do).
//
//   all_reduce(x, reduction)        out = x combined over the ranks (sum mean max min)
//   all_gather(x, axis)             out.shape[axis] = x.shape[axis] * group size, rank order
//   reduce_scatter(x, reduction, axis)  x.shape[axis] = k * group size; out: this rank's k
//   broadcast(x, root)              out = root's x
//   send(x, peer)                   out = x, sent to peer when computed
//   recv(like, peer)                out: like's dtype and shape, from peer (like is not read)
#ifndef KILN_OPS_COLLECTIVE_H_
#define KILN_OPS_COLLECTIVE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "comm/host_collective.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// Names `group` in attrs with its size and this process's rank, read from the group registry
// once, when the op is recorded or loaded. Throws kiln::Error for an unknown group.
void set_collective_group(int group, Attrs& attrs);

// The output type of collective `op`, attrs.axis made non-negative; an error names the op,
// the operand, the group and what was expected.
absl::StatusOr<ValueType> infer_collective(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs);

// The call that runs collective `op` over host buffers `in` and `out`.
comm::CollectiveCall collective_call(OpKind op, const Attrs& attrs, const ValueType& in,
                                     const ValueType& out, const void* in_data, void* out_data);

// The reference evaluation: the collective itself, over this process's group.
void evaluate_collective(OpKind op, const Attrs& attrs, const ValueType& out,
                         const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_COLLECTIVE_H_
