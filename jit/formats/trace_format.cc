// The `kiln.trace` attribute schema (trace_format.h): one table names every attribute a
// node may carry, with its JSON key and how its value is kept in ops::Attrs, and both
// attrs_to_json and attrs_from_json walk it, so the writer and the reader cannot drift
// apart. Also a constant's value as JSON.
#include "jit/formats/trace_format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/group_registry.h"
#include "comm/host_collective.h"
#include "kiln/error.h"
#include "ops/collective.h"
#include "ops/custom_functions.h"

namespace kiln::jit {
namespace {

using nlohmann::json;
using ops::OpClass;
using ops::OpKind;

// What reading one node's attributes builds up: the Attrs, and a collective's world ranks,
// which name its group only once every other field has been read and checked.
struct AttrReader {
  OpKind op;
  ops::Attrs attrs;
  std::vector<int> ranks;
};

// How one attribute's JSON value maps to ops::Attrs. `write` may leave the key out (a custom
// function this process does not know); `read` gets the file's value, or the field's default
// when the file leaves it out; `finish`, when set, runs once every field has been read.
struct AttrCodec {
  void (*write)(const ops::Attrs& attrs, const char* key, json& out);
  absl::Status (*read)(const json& value, const char* key, AttrReader& reader);
  absl::Status (*finish)(AttrReader& reader) = nullptr;
};

absl::Status wrong_type(const char* key, const json& value) {
  return absl::InvalidArgumentError(
      absl::StrCat("attribute '", key, "' has the wrong type: ", value.dump()));
}

// A field stored as is in Attrs::*kMember, read only when the JSON value has exactly its
// type (json_to).
template <auto kMember>
constexpr AttrCodec member() {
  return {[](const ops::Attrs& attrs, const char* key, json& out) { out[key] = attrs.*kMember; },
          [](const json& value, const char* key, AttrReader& reader) {
            return json_to(value, reader.attrs.*kMember) ? absl::OkStatus()
                                                         : wrong_type(key, value);
          }};
}

// The string a field is written as; a value of another type is an error.
absl::StatusOr<std::string> read_string(const json& value, const char* key) {
  std::string text;
  if (!json_to(value, text)) return wrong_type(key, value);
  return text;
}

// astype's dtype, by name.
constexpr AttrCodec kDtype = {
    [](const ops::Attrs& attrs, const char* key, json& out) { out[key] = dtype_name(attrs.dtype); },
    [](const json& value, const char* key, AttrReader& reader) {
      absl::StatusOr<std::string> name = read_string(value, key);
      if (!name.ok()) return name.status();
      try {
        reader.attrs.dtype = dtype_from_name(*name);
      } catch (const Error& e) {
        return absl::InvalidArgumentError(e.what());
      }
      return absl::OkStatus();
    }};

// update_slice's "starts" over a region (Attrs::offsets), written only for a region write:
// a write along one axis has none, as files before region writes.
constexpr AttrCodec kRegionStarts = {[](const ops::Attrs& attrs, const char* key, json& out) {
                                       if (!attrs.offsets.empty()) out[key] = attrs.offsets;
                                     },
                                     member<&ops::Attrs::offsets>().read};

// Attention's "causal_alignment": "top_left" (the default, as files before it) or
// "bottom_right"; only a causal cut has an alignment, so `causal` is read first.
constexpr AttrCodec kCausalAlignment = {
    [](const ops::Attrs& attrs, const char* key, json& out) {
      out[key] = attrs.bottom_right ? "bottom_right" : "top_left";
    },
    [](const json& value, const char* key, AttrReader& reader) {
      absl::StatusOr<std::string> alignment = read_string(value, key);
      if (!alignment.ok()) return alignment.status();
      if (*alignment != "top_left" && *alignment != "bottom_right") {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", key, "' is \"", *alignment,
                                                       "\" (expected top_left or bottom_right)"));
      }
      reader.attrs.bottom_right = reader.attrs.causal && *alignment == "bottom_right";
      return absl::OkStatus();
    }};

// A custom function or kernel is written by name: ids are per process, and the loading
// process must have registered the same name (with `define`) first.
absl::Status read_registered(const json& value, const char* key, const char* define,
                             std::optional<int> (*find)(std::string_view), int& id) {
  absl::StatusOr<std::string> name = read_string(value, key);
  if (!name.ok()) return name.status();
  std::optional<int> found = find(*name);
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("custom ", key, " '", *name,
                                            "' is not registered in this process (define it "
                                            "with kiln::",
                                            define, " before loading)"));
  }
  id = *found;
  return absl::OkStatus();
}

constexpr AttrCodec kCustomFunction = {
    [](const ops::Attrs& attrs, const char* key, json& out) {
      if (const ops::CustomFunction* f = ops::custom_function(attrs.function)) out[key] = f->name;
    },
    [](const json& value, const char* key, AttrReader& reader) {
      return read_registered(value, key, "define_elementwise", ops::custom_function_id,
                             reader.attrs.function);
    }};

constexpr AttrCodec kCustomKernel = {
    [](const ops::Attrs& attrs, const char* key, json& out) {
      if (const ops::CustomKernel* k = ops::custom_kernel(attrs.function)) out[key] = k->name;
    },
    [](const json& value, const char* key, AttrReader& reader) {
      return read_registered(value, key, "define_kernel", ops::custom_kernel_id,
                             reader.attrs.function);
    }};

// The group with those world ranks must exist in this process: replaying a collective
// needs the processes it ran over.
absl::Status find_recorded_group(OpKind op, const std::vector<int>& ranks, ops::Attrs& attrs) {
  try {
    comm::open_world();
  } catch (const Error& e) {
    return absl::FailedPreconditionError(e.what());
  }
  if (std::optional<int> id = comm::find_group(ranks)) {
    ops::set_collective_group(*id, attrs);
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

// A collective names its group by the world ranks in it (group ids are per process).
constexpr AttrCodec kGroupRanks = {
    [](const ops::Attrs& attrs, const char* key, json& out) {
      out[key] = comm::group_info(attrs.group).world_ranks;
    },
    [](const json& value, const char* key, AttrReader& reader) {
      return json_to(value, reader.ranks) ? absl::OkStatus() : wrong_type(key, value);
    },
    [](AttrReader& reader) { return find_recorded_group(reader.op, reader.ranks, reader.attrs); }};

// all_reduce's and reduce_scatter's reduction, by name.
constexpr AttrCodec kReduction = {
    [](const ops::Attrs& attrs, const char* key, json& out) {
      out[key] = comm::reduction_name(static_cast<comm::Reduction>(attrs.reduction));
    },
    [](const json& value, const char* key, AttrReader& reader) {
      absl::StatusOr<std::string> name = read_string(value, key);
      if (!name.ok()) return name.status();
      comm::Reduction r;
      if (!comm::reduction_from_name(*name, &r)) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", key, "' is \"", *name,
                                                       "\" (expected sum, mean, max or min)"));
      }
      reader.attrs.reduction = static_cast<int>(r);
      return absl::OkStatus();
    }};

enum class Presence {
  kRequired,  // a file without it is an error
  kOptional,  // a file may leave it out
};

// One attribute of the ops it belongs to: its JSON key, its codec, and what a file that
// leaves it out means.
struct AttrField {
  OpClass op_class;
  std::vector<OpKind> only;  // the ops of op_class that carry it; empty: all of them
  const char* key;
  AttrCodec codec;
  Presence presence;
  json absent = nullptr;  // kOptional: read in place of a missing value (null: Attrs' default)

  bool applies_to(OpKind op) const {
    return ops::op_class(op) == op_class &&
           (only.empty() || std::find(only.begin(), only.end(), op) != only.end());
  }
};

// Every attribute a trace file holds. Attribute names are the C++ argument names. The
// reader walks an op's fields in this order and reports the first bad one, so the order of
// one op's rows is part of the format's error messages. Unary, binary, where and matmul ops
// have no attributes; a constant's value is the node's "value", not an attribute.
const std::vector<AttrField>& attr_fields() {
  using A = ops::Attrs;
  constexpr Presence kRequired = Presence::kRequired, kOptional = Presence::kOptional;
  // Kept a row a line: clang-format would spread the longer rows over several.
  // clang-format off
  static const auto* fields = new std::vector<AttrField>{
      {OpClass::kReduce, {}, "axes", member<&A::axes>(), kOptional},
      {OpClass::kReduce, {}, "keepdims", member<&A::keepdims>(), kOptional},
      {OpClass::kArgReduce, {}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kArgReduce, {}, "keepdims", member<&A::keepdims>(), kOptional},
      {OpClass::kCast, {}, "dtype", kDtype, kRequired},
      {OpClass::kConcat, {}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kGather, {}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kGather, {OpKind::DynamicSlice}, "length", member<&A::k>(), kRequired},
      {OpClass::kUpdateSlice, {}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kUpdateSlice, {OpKind::UpdateSlice}, "start", member<&A::start>(), kRequired},
      {OpClass::kUpdateSlice, {OpKind::UpdateSlice}, "region_starts", kRegionStarts, kOptional},
      {OpClass::kAttention, {}, "scale", member<&A::scale>(), kRequired},
      {OpClass::kAttention, {}, "causal", member<&A::causal>(), kOptional},
      {OpClass::kAttention, {}, "causal_alignment", kCausalAlignment, kOptional, "top_left"},
      {OpClass::kView, {OpKind::Permute}, "axes", member<&A::axes>(), kRequired},
      {OpClass::kView, {OpKind::Reshape, OpKind::BroadcastTo}, "shape", member<&A::shape>(),
          kRequired},
      {OpClass::kView, {OpKind::Slice}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kView, {OpKind::Slice}, "start", member<&A::start>(), kRequired},
      {OpClass::kView, {OpKind::Slice}, "stop", member<&A::stop>(), kRequired},
      {OpClass::kView, {OpKind::Slice}, "step", member<&A::step>(), kOptional},
      {OpClass::kRowNorm, {OpKind::Cumsum}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kRowNorm, {OpKind::Cumsum}, "exclusive", member<&A::exclusive>(), kOptional},
      {OpClass::kRowNorm, {OpKind::Cumsum}, "reverse", member<&A::reverse>(), kOptional},
      {OpClass::kRowNorm, {OpKind::TopkIndices}, "axis", member<&A::axis>(), kRequired},
      {OpClass::kRowNorm, {OpKind::TopkIndices}, "k", member<&A::k>(), kRequired},
      {OpClass::kRowNorm, {OpKind::TopkIndices}, "largest", member<&A::largest>(), kOptional},
      {OpClass::kRowNorm, {OpKind::Softmax, OpKind::LogSoftmax}, "axis", member<&A::axis>(),
          kOptional, -1},
      {OpClass::kRowNorm, {OpKind::LayerNorm}, "eps", member<&A::eps>(), kOptional, 1e-5},
      {OpClass::kRowNorm, {OpKind::RmsNorm}, "eps", member<&A::eps>(), kOptional, 1e-6},
      {OpClass::kLeaf, {OpKind::Rand, OpKind::Randn}, "seed", member<&A::seed>(), kRequired},
      {OpClass::kCustom, {}, "function", kCustomFunction, kRequired},
      {OpClass::kCustomKernel, {}, "kernel", kCustomKernel, kRequired},
      {OpClass::kCollective, {}, "ranks", kGroupRanks, kRequired},
      {OpClass::kCollective, {OpKind::AllReduce, OpKind::ReduceScatter}, "reduction", kReduction,
          kOptional, "sum"},
      {OpClass::kCollective, {OpKind::AllGather, OpKind::ReduceScatter}, "axis",
          member<&A::axis>(), kOptional},
      {OpClass::kCollective, {OpKind::Broadcast}, "root", member<&A::peer>(), kRequired},
      {OpClass::kCollective, {OpKind::Send, OpKind::Recv}, "peer", member<&A::peer>(), kRequired},
  };
  // clang-format on
  return *fields;
}

}  // namespace

json attrs_to_json(OpKind op, const ops::Attrs& a) {
  json j = json::object();
  for (const AttrField& field : attr_fields()) {
    if (field.applies_to(op)) field.codec.write(a, field.key, j);
  }
  return j;
}

absl::StatusOr<ops::Attrs> attrs_from_json(OpKind op, const json& j) {
  if (!j.is_null() && !j.is_object()) {
    return absl::InvalidArgumentError("\"attrs\" must be an object");
  }
  AttrReader reader{op, {}, {}};
  std::vector<const AttrField*> applied;
  for (const AttrField& field : attr_fields()) {
    if (!field.applies_to(op)) continue;
    const json* value = nullptr;
    if (j.is_object() && j.contains(field.key)) {
      value = &j.at(field.key);
    } else if (field.presence == Presence::kRequired) {
      return absl::InvalidArgumentError(absl::StrCat("missing attribute '", field.key, "'"));
    } else if (!field.absent.is_null()) {
      value = &field.absent;
    }
    if (value != nullptr) {
      if (absl::Status s = field.codec.read(*value, field.key, reader); !s.ok()) return s;
    }
    applied.push_back(&field);
  }
  for (const AttrField* field : applied) {
    if (field->codec.finish == nullptr) continue;
    if (absl::Status s = field->codec.finish(reader); !s.ok()) return s;
  }
  return std::move(reader.attrs);
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
