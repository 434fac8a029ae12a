// kiln/distributed.h: process groups and the collective ops' public API. Each collective
// records one node (ops/collective.h) over the group's registry id; a group of one records
// nothing and returns the operand.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/group_registry.h"
#include "comm/host_collective.h"
#include "jit/graph/record.h"
#include "kiln/distributed.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/collective.h"

namespace kiln::distributed {
namespace {

comm::Communicator& communicator(const Group& g) { return *comm::group_info(g.id()).communicator; }

Tensor record_collective(ops::OpKind op, const Tensor& x, const Group& group,
                         ops::Attrs attrs = {}) {
  ops::set_collective_group(group.id(), attrs);
  return jit::record(op, {x}, std::move(attrs));
}

int reduction_code(Reduction r) {
  switch (r) {
    case Reduction::kSum:
      return static_cast<int>(comm::Reduction::kSum);
    case Reduction::kMean:
      return static_cast<int>(comm::Reduction::kMean);
    case Reduction::kMax:
      return static_cast<int>(comm::Reduction::kMax);
    case Reduction::kMin:
      return static_cast<int>(comm::Reduction::kMin);
  }
  return 0;
}

// all_reduce, all_gather, reduce_scatter and broadcast: the node of `op` over `group`. A group
// of one records nothing and returns `x`, after the checks the collective makes, so that a
// program that is wrong on several processes is already wrong on one.
Tensor collective(ops::OpKind op, const Tensor& x, const Group& group, ops::Attrs attrs) {
  if (group.size() == 1) {
    ops::set_collective_group(group.id(), attrs);
    (void)jit::check_op(op, {x}, attrs);
    return x;
  }
  return record_collective(op, x, group, std::move(attrs));
}

}  // namespace

int Group::rank() const { return communicator(*this).rank(); }
int Group::size() const { return communicator(*this).size(); }
std::string Group::backend() const { return communicator(*this).backend_name(); }
std::vector<int> Group::world_ranks() const { return comm::group_info(id_).world_ranks; }
Group Group::split(int color, int key) const {
  return Group(comm::split_group(id_, color, key < 0 ? rank() : key));
}
void Group::barrier() const { communicator(*this).barrier(); }

Group init() { return Group(comm::open_world()); }

Tensor all_reduce(const Tensor& x, Reduction reduction, const Group& group) {
  ops::Attrs attrs;
  attrs.reduction = reduction_code(reduction);
  return collective(ops::OpKind::AllReduce, x, group, std::move(attrs));
}

Tensor all_gather(const Tensor& x, int axis, const Group& group) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return collective(ops::OpKind::AllGather, x, group, std::move(attrs));
}

Tensor reduce_scatter(const Tensor& x, Reduction reduction, int axis, const Group& group) {
  ops::Attrs attrs;
  attrs.reduction = reduction_code(reduction);
  attrs.axis = axis;
  return collective(ops::OpKind::ReduceScatter, x, group, std::move(attrs));
}

Tensor broadcast(const Tensor& x, int root, const Group& group) {
  ops::Attrs attrs;
  attrs.peer = root;
  return collective(ops::OpKind::Broadcast, x, group, std::move(attrs));
}

Tensor send(const Tensor& x, int dst, const Group& group) {
  ops::Attrs attrs;
  attrs.peer = dst;
  return record_collective(ops::OpKind::Send, x, group, attrs);
}

Tensor recv(DType dtype, const std::vector<int64_t>& shape, int src, const Group& group) {
  // The operand only carries the dtype and shape: a constant, which nothing computes.
  ops::Attrs attrs;
  attrs.peer = src;
  return record_collective(ops::OpKind::Recv, Tensor::zeros(shape, dtype), group, attrs);
}

Tensor recv_like(const Tensor& like, int src, const Group& group) {
  return recv(like.dtype(), like.shape(), src, group);
}

Shard shard_of(int64_t extent, const Group& group) {
  const int parts = group.size();
  if (extent < 0 || extent % parts != 0) {
    throw Error(absl::StrCat("[shard_of] extent ", extent,
                             " does not split evenly over a group of ", parts, " ranks"));
  }
  return Shard{extent / parts * group.rank(), extent / parts};
}

Tensor load_shard(const std::string& path, const std::string& name, int axis, const Group& group) {
  return load_safetensors_shard(path, name, axis, group.rank(), group.size());
}

Tensor column_parallel_linear(const Tensor& x, const Tensor& weight_shard, const Tensor& bias_shard,
                              bool gather_output, const Group& group) {
  Tensor y = bias_shard.defined() ? linear(x, weight_shard, bias_shard) : linear(x, weight_shard);
  return gather_output ? all_gather(y, -1, group) : y;
}

Tensor row_parallel_linear(const Tensor& x_shard, const Tensor& weight_shard, const Tensor& bias,
                           const Group& group) {
  Tensor y = all_reduce(linear(x_shard, weight_shard), Reduction::kSum, group);
  return bias.defined() ? y + bias : y;
}

}  // namespace kiln::distributed
