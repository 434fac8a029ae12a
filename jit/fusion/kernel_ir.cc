#include "jit/fusion/kernel_ir.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ops/custom_functions.h"

namespace kiln::jit {
namespace {

const char* kind_name(InstrKind kind) {
  switch (kind) {
    case InstrKind::kLoad:
      return "load";
    case InstrKind::kParam:
      return "param";
    case InstrKind::kIndexLeaf:
      return "leaf";
    case InstrKind::kUnary:
      return "unary";
    case InstrKind::kBinary:
      return "binary";
    case InstrKind::kWhere:
      return "where";
    case InstrKind::kCast:
      return "cast";
    case InstrKind::kAnchor:
      return "anchor";
    case InstrKind::kCustom:
      return "custom";
    case InstrKind::kGather:
      return "gather";
  }
  return "?";
}

}  // namespace

const char* anchor_name(AnchorKind anchor) {
  switch (anchor) {
    case AnchorKind::kNone:
      return "pointwise";
    case AnchorKind::kReduce:
      return "reduce";
    case AnchorKind::kArgReduce:
      return "argreduce";
    case AnchorKind::kRowNorm:
      return "rownorm";
    case AnchorKind::kScan:
      return "scan";
    case AnchorKind::kTopk:
      return "topk";
    case AnchorKind::kMatmul:
      return "matmul";
    case AnchorKind::kConcat:
      return "concat";
    case AnchorKind::kCustomKernel:
      return "custom_kernel";
    case AnchorKind::kUpdateSlice:
      return "update_slice";
    case AnchorKind::kIndexAdd:
      return "index_add";
    case AnchorKind::kAttention:
      return "attention";
    case AnchorKind::kCollective:
      return "collective";
  }
  return "?";
}

std::string KernelProgram::to_string() const {
  std::string out = absl::StrCat("kernel ", name, " [", anchor_name(anchor));
  if (anchor != AnchorKind::kNone) {
    absl::StrAppend(&out, " ", ops::op_name(anchor_op), " -> ", dtype_name(anchor_dtype));
    if (!anchor_attrs.axes.empty()) {
      absl::StrAppend(&out, " axes=[", absl::StrJoin(anchor_attrs.axes, ","), "]");
    }
    absl::StrAppend(&out, " axis=", anchor_attrs.axis, " keepdims=", anchor_attrs.keepdims);
    if (anchor == AnchorKind::kTopk) {
      absl::StrAppend(&out, anchor_attrs.largest ? " largest" : " smallest");
    }
    if (anchor == AnchorKind::kAttention && anchor_attrs.causal) {
      absl::StrAppend(&out, anchor_attrs.bottom_right ? " causal_bottom_right" : " causal");
    }
    if (anchor == AnchorKind::kScan) {
      if (anchor_attrs.exclusive) absl::StrAppend(&out, " exclusive");
      if (anchor_attrs.reverse) absl::StrAppend(&out, " reverse");
    }
    if (!anchor_attrs.offsets.empty()) {
      absl::StrAppend(&out, " region_starts=[", absl::StrJoin(anchor_attrs.offsets, ","), "]");
    }
    absl::StrAppend(&out, " operands=[", absl::StrJoin(anchor_operands, ","), "]");
    if (anchor_index_input >= 0) absl::StrAppend(&out, " index=in", anchor_index_input);
    if (anchor_start_input >= 0) {
      absl::StrAppend(&out, " start=in", anchor_start_input);
    } else if (anchor_param >= 0) {
      const char* role = anchor == AnchorKind::kUpdateSlice ? " start=p"
                         : anchor == AnchorKind::kAttention ? " scale=p"
                                                            : " eps=p";
      absl::StrAppend(&out, role, anchor_param);
    }
    if (anchor == AnchorKind::kCustomKernel) {
      const ops::CustomKernel* k = ops::custom_kernel(anchor_attrs.function);
      absl::StrAppendFormat(&out, " kernel=%s#%016x", k->name, k->source_hash);
    }
    if (anchor == AnchorKind::kCollective) {
      absl::StrAppend(&out, " group=", anchor_attrs.group, " reduction=", anchor_attrs.reduction,
                      " peer=", anchor_attrs.peer);
    }
  }
  absl::StrAppend(&out, "]\n  spaces: ranks [", absl::StrJoin(space_ranks, ","), "]\n");
  for (size_t i = 0; i < input_dtypes.size(); ++i) {
    absl::StrAppend(&out, "  in", i, ": ", dtype_name(input_dtypes[i]), "\n");
  }
  for (size_t i = 0; i < view_patterns.size(); ++i) {
    absl::StrAppend(&out, "  view", i, ": ", view_patterns[i].to_string(), "\n");
  }
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    absl::StrAppend(&out, "  %", i, " = s", in.space, " ", kind_name(in.kind));
    if (in.kind != InstrKind::kLoad && in.kind != InstrKind::kParam &&
        in.kind != InstrKind::kAnchor) {
      absl::StrAppend(&out, " ", ops::op_name(in.op));
    }
    for (int operand : in.operands) {
      if (operand >= 0) absl::StrAppend(&out, " %", operand);
    }
    if (in.input >= 0) absl::StrAppend(&out, " in", in.input);
    if (in.view >= 0) absl::StrAppend(&out, " view", in.view);
    if (in.param >= 0) absl::StrAppend(&out, " p", in.param);
    if (in.function >= 0) {
      // The name and the source's hash: a kernel is never reused for a different definition.
      const ops::CustomFunction* f = ops::custom_function(in.function);
      absl::StrAppendFormat(&out, " fn=%s#%016x", f->name, f->source_hash);
    }
    absl::StrAppend(&out, " : ", dtype_name(in.dtype), "\n");
  }
  for (const Store& s : stores) {
    absl::StrAppend(&out, "  store %", s.value, " -> out", s.output, " : ",
                    dtype_name(output_dtypes[s.output]), "\n");
  }
  return out;
}

}  // namespace kiln::jit
