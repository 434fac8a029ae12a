#include "ops/collective.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/group_registry.h"
#include "kiln/error.h"
#include "ops/infer.h"

namespace kiln::ops {
namespace {

comm::CollectiveKind collective_kind(OpKind op) {
  switch (op) {
    case OpKind::AllReduce:
      return comm::CollectiveKind::kAllReduce;
    case OpKind::AllGather:
      return comm::CollectiveKind::kAllGather;
    case OpKind::ReduceScatter:
      return comm::CollectiveKind::kReduceScatter;
    case OpKind::Broadcast:
      return comm::CollectiveKind::kBroadcast;
    case OpKind::Send:
      return comm::CollectiveKind::kSend;
    case OpKind::Recv:
      return comm::CollectiveKind::kRecv;
    default:
      break;
  }
  throw std::logic_error(absl::StrCat("internal error: ", op_name(op), " is not a collective"));
}

constexpr int kMaxCollectiveRank = 8;

absl::Status check_reduction(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs) {
  const auto r = static_cast<comm::Reduction>(attrs.reduction);
  if (attrs.reduction < 0 || attrs.reduction > static_cast<int>(comm::Reduction::kMin)) {
    return op_error(op, in, absl::StrCat("has no reduction number ", attrs.reduction));
  }
  if (in[0].dtype == DType::Bool) {
    return op_error(op, in, "cannot combine bool values (expected a numeric dtype)");
  }
  if (r == comm::Reduction::kMean && !is_floating(in[0].dtype)) {
    return op_error(op, in, "mean needs a floating dtype (use astype first, or sum)");
  }
  return absl::OkStatus();
}

absl::Status check_peer(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs) {
  const char* role = op == OpKind::Broadcast ? "root"
                     : op == OpKind::Send    ? "destination"
                                             : "source";
  if (attrs.peer < 0 || attrs.peer >= attrs.group_size) {
    return op_error(op, in,
                    absl::StrCat("names ", role, " rank ", attrs.peer,
                                 ", but the group has ranks 0 to ", attrs.group_size - 1));
  }
  if (op != OpKind::Broadcast && attrs.peer == attrs.group_rank) {
    return op_error(op, in,
                    absl::StrCat("names this process's own rank ", attrs.peer, " as its ", role,
                                 " (expected another rank of the group)"));
  }
  return absl::OkStatus();
}

}  // namespace

void set_collective_group(int group, Attrs& attrs) {
  const comm::Communicator& comm = *comm::group_info(group).communicator;
  attrs.group = group;
  attrs.group_size = comm.size();
  attrs.group_rank = comm.rank();
}

absl::StatusOr<ValueType> infer_collective(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs) {
  if (attrs.group_size < 1 || attrs.group_rank < 0 || attrs.group_rank >= attrs.group_size) {
    return op_error(
        op, in,
        absl::StrCat("names group ", attrs.group, " of size ", attrs.group_size, " and rank ",
                     attrs.group_rank, " (expected a group recorded through kiln/distributed.h)"));
  }
  if (in[0].shape.size() > kMaxCollectiveRank) {
    return op_error(op, in, absl::StrCat("takes at most ", kMaxCollectiveRank, " dimensions"));
  }
  ValueType out = in[0];
  const int size = attrs.group_size;
  switch (collective_kind(op)) {
    case comm::CollectiveKind::kAllReduce:
      if (absl::Status s = check_reduction(op, in, attrs); !s.ok()) return s;
      return out;
    case comm::CollectiveKind::kAllGather:
    case comm::CollectiveKind::kReduceScatter: {
      if (op == OpKind::ReduceScatter) {
        if (absl::Status s = check_reduction(op, in, attrs); !s.ok()) return s;
      }
      absl::StatusOr<int> axis = normalize_axis(attrs.axis, static_cast<int>(in[0].shape.size()));
      if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
      attrs.axis = *axis;
      int64_t& extent = out.shape[static_cast<size_t>(*axis)];
      if (op == OpKind::AllGather) {
        if (extent > std::numeric_limits<int64_t>::max() / size) {
          return op_error(op, in,
                          absl::StrCat("axis ", *axis, " would hold more than 2^63 elements over ",
                                       size, " ranks"));
        }
        extent *= size;
      } else if (extent % size != 0) {
        return op_error(op, in,
                        absl::StrCat("cannot split axis ", *axis, " (extent ", extent,
                                     ") evenly over a group of ", size, " ranks"));
      } else {
        extent /= size;
      }
      return out;
    }
    case comm::CollectiveKind::kBroadcast:
    case comm::CollectiveKind::kSend:
    case comm::CollectiveKind::kRecv:
      if (absl::Status s = check_peer(op, in, attrs); !s.ok()) return s;
      return out;
  }
  return out;
}

comm::CollectiveCall collective_call(OpKind op, const Attrs& attrs, const ValueType& in,
                                     const ValueType& out, const void* in_data, void* out_data) {
  comm::CollectiveCall call;
  call.kind = collective_kind(op);
  call.reduction = static_cast<comm::Reduction>(attrs.reduction);
  call.group = attrs.group;
  call.peer = attrs.peer;
  call.axis = attrs.axis;
  call.dtype = in.dtype;
  call.in_shape = in.shape;
  call.out_shape = out.shape;
  call.in = in_data;
  call.out = out_data;
  return call;
}

void evaluate_collective(OpKind op, const Attrs& attrs, const ValueType& out,
                         const std::vector<HostValue>& in, base::Buffer& result) {
  comm::run_host_collective(
      collective_call(op, attrs, in[0].type, out, in[0].buffer->data(), result.data()));
}

}  // namespace kiln::ops
