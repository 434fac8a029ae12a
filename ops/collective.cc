#include "ops/collective.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/infer.h"
#include "runtime/distributed/group_registry.h"

namespace kiln::ops {
namespace {

namespace dr = distributed_runtime;

dr::CollectiveKind collective_kind(OpKind op) {
  switch (op) {
    case OpKind::AllReduce:
      return dr::CollectiveKind::kAllReduce;
    case OpKind::AllGather:
      return dr::CollectiveKind::kAllGather;
    case OpKind::ReduceScatter:
      return dr::CollectiveKind::kReduceScatter;
    case OpKind::Broadcast:
      return dr::CollectiveKind::kBroadcast;
    case OpKind::Send:
      return dr::CollectiveKind::kSend;
    case OpKind::Recv:
      return dr::CollectiveKind::kRecv;
    default:
      break;
  }
  throw std::logic_error(absl::StrCat("internal error: ", op_name(op), " is not a collective"));
}

constexpr int kMaxCollectiveRank = 8;

absl::Status check_reduction(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs) {
  const auto r = static_cast<dr::Reduction>(attrs.reduction);
  if (attrs.reduction < 0 || attrs.reduction > static_cast<int>(dr::Reduction::kMin)) {
    return op_error(op, in, absl::StrCat("has no reduction number ", attrs.reduction));
  }
  if (in[0].dtype == DType::Bool) {
    return op_error(op, in, "cannot combine bool values (expected a numeric dtype)");
  }
  if (r == dr::Reduction::kMean && !is_floating(in[0].dtype)) {
    return op_error(op, in, "mean needs a floating dtype (use astype first, or sum)");
  }
  return absl::OkStatus();
}

absl::Status check_peer(OpKind op, const std::vector<ValueType>& in, const Attrs& attrs,
                        const dr::Communicator& comm) {
  const char* role = op == OpKind::Broadcast ? "root"
                     : op == OpKind::Send    ? "destination"
                                             : "source";
  if (attrs.peer < 0 || attrs.peer >= comm.size()) {
    return op_error(op, in,
                    absl::StrCat("names ", role, " rank ", attrs.peer,
                                 ", but the group has ranks 0 to ", comm.size() - 1));
  }
  if (op != OpKind::Broadcast && attrs.peer == comm.rank()) {
    return op_error(op, in,
                    absl::StrCat("names this process's own rank ", attrs.peer, " as its ", role,
                                 " (expected another rank of the group)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValueType> infer_collective(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs) {
  const dr::Communicator* comm = nullptr;
  try {
    comm = dr::group_info(attrs.group).communicator.get();
  } catch (const Error& e) {
    return op_error(op, in, e.what());
  }
  if (in[0].shape.size() > kMaxCollectiveRank) {
    return op_error(op, in, absl::StrCat("takes at most ", kMaxCollectiveRank, " dimensions"));
  }
  ValueType out = in[0];
  const int size = comm->size();
  switch (collective_kind(op)) {
    case dr::CollectiveKind::kAllReduce:
      if (absl::Status s = check_reduction(op, in, attrs); !s.ok()) return s;
      return out;
    case dr::CollectiveKind::kAllGather:
    case dr::CollectiveKind::kReduceScatter: {
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
    case dr::CollectiveKind::kBroadcast:
    case dr::CollectiveKind::kSend:
    case dr::CollectiveKind::kRecv:
      if (absl::Status s = check_peer(op, in, attrs, *comm); !s.ok()) return s;
      return out;
  }
  return out;
}

dr::CollectiveCall collective_call(OpKind op, const Attrs& attrs, const ValueType& in,
                                   const ValueType& out, const void* in_data, void* out_data) {
  dr::CollectiveCall call;
  call.kind = collective_kind(op);
  call.reduction = static_cast<dr::Reduction>(attrs.reduction);
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
                         const std::vector<HostValue>& in, runtime::Buffer& result) {
  dr::run_host_collective(
      collective_call(op, attrs, in[0].type, out, in[0].buffer->data(), result.data()));
}

}  // namespace kiln::ops
