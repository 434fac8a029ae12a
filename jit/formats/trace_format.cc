#include "jit/formats/trace_format.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/group_registry.h"
#include "comm/host_collective.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"

namespace kiln::jit {
namespace {

using nlohmann::json;
using ops::OpClass;
using ops::OpKind;

// Reads attrs[key] into `out` when present; a value of the wrong type is an error.
template <class T>
absl::Status read_attr(const json& attrs, const char* key, T& out, bool required) {
  if (!attrs.is_object() || !attrs.contains(key)) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing attribute '", key, "'"));
    return absl::OkStatus();
  }
  if (!json_to(attrs.at(key), out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", key, "' has the wrong type: ", attrs.at(key).dump()));
  }
  return absl::OkStatus();
}

// A custom function's or kernel's id from its name in attrs[key] ("function" or "kernel");
// the loading process must have defined it (with `define`) first.
absl::Status read_registered(const json& attrs, const char* key, const char* define, int& id) {
  std::string name;
  if (absl::Status s = read_attr(attrs, key, name, true); !s.ok()) return s;
  const bool is_function = std::string_view(key) == "function";
  std::optional<int> found =
      is_function ? ops::custom_function_id(name) : ops::custom_kernel_id(name);
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("custom ", key, " '", name,
                                            "' is not registered in this process (define it "
                                            "with kiln::",
                                            define, " before loading)"));
  }
  id = *found;
  return absl::OkStatus();
}

// A collective names its group by the world ranks in it (ids are per process), and its
// reduction by name.
void collective_attrs_to_json(OpKind op, const ops::Attrs& a, json& j) {
  j["ranks"] = comm::group_info(a.group).world_ranks;
  if (op == OpKind::AllReduce || op == OpKind::ReduceScatter) {
    j["reduction"] = comm::reduction_name(static_cast<comm::Reduction>(a.reduction));
  }
  if (op == OpKind::AllGather || op == OpKind::ReduceScatter) j["axis"] = a.axis;
  if (op == OpKind::Broadcast) j["root"] = a.peer;
  if (op == OpKind::Send || op == OpKind::Recv) j["peer"] = a.peer;
}

// The group with those world ranks must exist in this process: replaying a collective
// needs the processes it ran over.
absl::Status find_recorded_group(OpKind op, const std::vector<int>& ranks, int& group) {
  try {
    comm::open_world();
  } catch (const Error& e) {
    return absl::FailedPreconditionError(e.what());
  }
  if (std::optional<int> id = comm::find_group(ranks)) {
    group = *id;
    return absl::OkStatus();
  }
  const comm::Communicator& world = *comm::group_info(comm::kWorldGroup).communicator;
  return absl::FailedPreconditionError(absl::StrCat(
      ops::op_name(op), " ran over the processes with world ranks [", absl::StrJoin(ranks, ", "),
      "], but this process is rank ", world.rank(), " of a world of ", world.size(),
      " with no such group: replay a trace with collectives on every rank it was recorded on, "
      "under the same launcher (e.g. mpirun -np ",
      ranks.size(), "; docs/distributed.md)"));
}

absl::Status collective_attrs_from_json(OpKind op, const json& j, ops::Attrs& a) {
  std::vector<int> ranks;
  if (absl::Status s = read_attr(j, "ranks", ranks, true); !s.ok()) return s;
  if (op == OpKind::AllReduce || op == OpKind::ReduceScatter) {
    std::string name = "sum";
    if (absl::Status s = read_attr(j, "reduction", name, false); !s.ok()) return s;
    comm::Reduction r;
    if (!comm::reduction_from_name(name, &r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'reduction' is \"", name, "\" (expected sum, mean, max or min)"));
    }
    a.reduction = static_cast<int>(r);
  }
  absl::Status s;
  if (op == OpKind::AllGather || op == OpKind::ReduceScatter)
    s = read_attr(j, "axis", a.axis, false);
  if (s.ok() && op == OpKind::Broadcast) s = read_attr(j, "root", a.peer, true);
  if (s.ok() && (op == OpKind::Send || op == OpKind::Recv)) s = read_attr(j, "peer", a.peer, true);
  if (!s.ok()) return s;
  return find_recorded_group(op, ranks, a.group);
}

// Attention's "causal_alignment": "top_left" (the default, as files before it) or
// "bottom_right"; only a causal cut has an alignment.
absl::Status read_causal_alignment(const json& j, ops::Attrs& a) {
  std::string alignment = "top_left";
  if (absl::Status s = read_attr(j, "causal_alignment", alignment, false); !s.ok()) return s;
  if (alignment != "top_left" && alignment != "bottom_right") {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'causal_alignment' is \"", alignment,
                                                   "\" (expected top_left or bottom_right)"));
  }
  a.bottom_right = a.causal && alignment == "bottom_right";
  return absl::OkStatus();
}

}  // namespace

json attrs_to_json(OpKind op, const ops::Attrs& a) {
  json j = json::object();
  switch (ops::op_class(op)) {
    case OpClass::kReduce:
      j["axes"] = a.axes;
      j["keepdims"] = a.keepdims;
      break;
    case OpClass::kArgReduce:
      j["axis"] = a.axis;
      j["keepdims"] = a.keepdims;
      break;
    case OpClass::kCast:
      j["dtype"] = dtype_name(a.dtype);
      break;
    case OpClass::kConcat:
      j["axis"] = a.axis;
      break;
    case OpClass::kGather:
      j["axis"] = a.axis;
      if (op == OpKind::DynamicSlice) j["length"] = a.k;
      break;
    case OpClass::kUpdateSlice:
      j["axis"] = a.axis;
      j["start"] = a.start;
      break;
    case OpClass::kAttention:
      j["scale"] = a.scale;
      j["causal"] = a.causal;
      j["causal_alignment"] = a.bottom_right ? "bottom_right" : "top_left";
      break;
    case OpClass::kView:
      if (op == OpKind::Permute) j["axes"] = a.axes;
      if (op == OpKind::Reshape || op == OpKind::BroadcastTo) j["shape"] = a.shape;
      if (op == OpKind::Slice) {
        j["axis"] = a.axis;
        j["start"] = a.start;
        j["stop"] = a.stop;
        j["step"] = a.step;
      }
      break;
    case OpClass::kRowNorm:
      if (op == OpKind::Softmax || op == OpKind::LogSoftmax || op == OpKind::Cumsum) {
        j["axis"] = a.axis;
      }
      if (op == OpKind::Cumsum) {
        j["exclusive"] = a.exclusive;
        j["reverse"] = a.reverse;
      }
      if (op == OpKind::TopkIndices) {
        j["axis"] = a.axis;
        j["k"] = a.k;
        j["largest"] = a.largest;
      }
      if (op == OpKind::LayerNorm || op == OpKind::RmsNorm) j["eps"] = a.eps;
      break;
    case OpClass::kLeaf:
      if (op == OpKind::Rand || op == OpKind::Randn) j["seed"] = a.seed;
      break;
    case OpClass::kCustom:
      // By name: ids are per process; the loading process registers the same function.
      if (const ops::CustomFunction* f = ops::custom_function(a.function)) j["function"] = f->name;
      break;
    case OpClass::kCustomKernel:
      if (const ops::CustomKernel* k = ops::custom_kernel(a.function)) j["kernel"] = k->name;
      break;
    case OpClass::kCollective:
      collective_attrs_to_json(op, a, j);
      break;
    case OpClass::kUnary:  // no attributes
    case OpClass::kBinary:
    case OpClass::kWhere:
    case OpClass::kMatmul:
      break;
  }
  return j;
}

absl::StatusOr<ops::Attrs> attrs_from_json(OpKind op, const json& j) {
  if (!j.is_null() && !j.is_object()) {
    return absl::InvalidArgumentError("\"attrs\" must be an object");
  }
  ops::Attrs a;
  absl::Status s;
  auto read = [&](const char* key, auto& out, bool required) {
    if (s.ok()) s = read_attr(j, key, out, required);
  };
  switch (ops::op_class(op)) {
    case OpClass::kReduce:
      read("axes", a.axes, false);
      read("keepdims", a.keepdims, false);
      break;
    case OpClass::kArgReduce:
      read("axis", a.axis, true);
      read("keepdims", a.keepdims, false);
      break;
    case OpClass::kCast: {
      std::string name;
      read("dtype", name, true);
      if (!s.ok()) return s;
      try {
        a.dtype = dtype_from_name(name);
      } catch (const Error& e) {
        return absl::InvalidArgumentError(e.what());
      }
      break;
    }
    case OpClass::kConcat:
      read("axis", a.axis, true);
      break;
    case OpClass::kGather:
      read("axis", a.axis, true);
      if (op == OpKind::DynamicSlice) read("length", a.k, true);
      break;
    case OpClass::kUpdateSlice:
      read("axis", a.axis, true);
      read("start", a.start, true);
      break;
    case OpClass::kAttention:
      read("scale", a.scale, true);
      read("causal", a.causal, false);
      if (s.ok()) s = read_causal_alignment(j, a);
      break;
    case OpClass::kView:
      if (op == OpKind::Permute) read("axes", a.axes, true);
      if (op == OpKind::Reshape || op == OpKind::BroadcastTo) read("shape", a.shape, true);
      if (op == OpKind::Slice) {
        read("axis", a.axis, true);
        read("start", a.start, true);
        read("stop", a.stop, true);
        read("step", a.step, false);
      }
      break;
    case OpClass::kRowNorm:
      if (op == OpKind::Cumsum) {
        read("axis", a.axis, true);
        read("exclusive", a.exclusive, false);
        read("reverse", a.reverse, false);
      }
      if (op == OpKind::TopkIndices) {
        read("axis", a.axis, true);
        read("k", a.k, true);
        read("largest", a.largest, false);
      }
      if (op == OpKind::Softmax || op == OpKind::LogSoftmax) read("axis", a.axis, false);
      if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
        if (!j.is_object() || !j.contains("axis")) a.axis = -1;
      }
      if (op == OpKind::LayerNorm) a.eps = 1e-5;
      if (op == OpKind::RmsNorm) a.eps = 1e-6;
      if (op == OpKind::LayerNorm || op == OpKind::RmsNorm) read("eps", a.eps, false);
      break;
    case OpClass::kLeaf:
      if (op == OpKind::Rand || op == OpKind::Randn) read("seed", a.seed, true);
      break;
    case OpClass::kCustom:
      if (s.ok()) s = read_registered(j, "function", "define_elementwise", a.function);
      break;
    case OpClass::kCustomKernel:
      if (s.ok()) s = read_registered(j, "kernel", "define_kernel", a.function);
      break;
    case OpClass::kCollective:
      if (s.ok()) s = collective_attrs_from_json(op, j, a);
      break;
    case OpClass::kUnary:  // no attributes
    case OpClass::kBinary:
    case OpClass::kWhere:
    case OpClass::kMatmul:
      break;
  }
  if (!s.ok()) return s;
  return a;
}

json scalar_to_json(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

absl::StatusOr<double> scalar_from_json(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"value\" must be a number or \"nan\", \"inf\", \"-inf\", got ", value.dump()));
}

}  // namespace kiln::jit
