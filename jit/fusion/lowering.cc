// Lowering (lowering.h): a kernel group becomes its Kernel IR program and launch. Index
// maps, which say where each read lands, are in index_map.cc; this file emits the
// instructions, slots and spaces, and names the kernel.
#include "jit/fusion/lowering.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/host_collective.h"
#include "jit/fusion/index_map.h"
#include "jit/fusion/short_sum.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/gather.h"
#include "ops/infer.h"

namespace kiln::jit {
namespace {

using ops::OpClass;
using ops::OpKind;
using ops::Shape;

class Lowerer {
 public:
  Lowerer(const Trace& trace, const FusionPlan& plan, const KernelGroup& group)
      : trace_(trace), plan_(plan), group_(group) {}

  LoweredKernel run() {
    KernelProgram& program = out_.program;
    KernelLaunch& launch = out_.launch;
    const int anchor = group_.anchor_node;
    program.anchor = group_.anchor;
    const Shape& domain = trace_.nodes[anchor >= 0 ? anchor : group_.stores[0]].type->shape;
    launch.spaces.push_back(domain);
    if (anchor >= 0) {
      const TraceNode& a = trace_.nodes[anchor];
      program.anchor_op = a.op;
      program.anchor_attrs.axes = a.attrs->axes;
      program.anchor_attrs.keepdims = a.attrs->keepdims;
      program.anchor_attrs.axis = a.attrs->axis;
      program.anchor_attrs.largest = a.attrs->largest;
      program.anchor_attrs.causal = a.attrs->causal;
      program.anchor_attrs.bottom_right = a.attrs->bottom_right;
      program.anchor_attrs.exclusive = a.attrs->exclusive;
      program.anchor_attrs.reverse = a.attrs->reverse;
      program.anchor_attrs.offsets = a.attrs->offsets;
      program.anchor_dtype = a.type->dtype;
      if (a.param_slot >= 0) program.anchor_param = param_slot(a.param_slot);
      record_computed_node(anchor);
      std::vector<int> operands(a.args.begin(), a.args.end());
      if (a.op == OpKind::Attention) operands.resize(3);  // the score (space 4) comes below
      if (a.op == OpKind::UpdateSlice) {
        input_slot(a.args[0]);  // x: input 0, the buffer output 0 starts as
        if (a.args.size() == 3) program.anchor_start_input = input_slot(a.args[2]);
        operands = {a.args[1]};
      }
      if (a.op == OpKind::IndexAdd) {
        input_slot(a.args[0]);  // x: input 0, the buffer output 0 starts as
        program.anchor_index_input = input_slot(a.args[2]);
        operands = {a.args[1]};
      }
      for (int arg : operands) {
        const Shape& s = trace_.nodes[arg].type->shape;
        int space = static_cast<int>(launch.spaces.size());
        launch.spaces.push_back(s);
        // Operands arrive in the dtype the anchor computes in (arg-reductions and topk
        // compare as is).
        int v = value(arg, space, IndexMap::identity(s.size()));
        const bool compares =
            group_.anchor == AnchorKind::kArgReduce || group_.anchor == AnchorKind::kTopk;
        program.anchor_operands.push_back(compares ? v : cast(v, a.type->dtype));
      }
      if (a.op == OpKind::Attention && a.args.size() == 4) lower_attention_score(a);
    }
    for (int store : group_.stores) {
      int v = value(store, 0, IndexMap::identity(domain.size()), /*computing=*/true);
      int slot = static_cast<int>(launch.outputs.size());
      launch.outputs.push_back(store);
      program.output_dtypes.push_back(trace_.nodes[store].type->dtype);
      program.stores.push_back({cast(v, trace_.nodes[store].type->dtype), slot});
      record_computed_node(store);
    }
    for (const Shape& s : launch.spaces) program.space_ranks.push_back(static_cast<int>(s.size()));
    program.num_params = static_cast<int>(launch.params.size());
    program.name = name();
    std::sort(launch.nodes.begin(), launch.nodes.end());
    return std::move(out_);
  }

 private:
  bool is_store(int node) const {
    return std::find(group_.stores.begin(), group_.stores.end(), node) != group_.stores.end();
  }
  // Records that this kernel computes trace node `node` (for dumps and logs).
  void record_computed_node(int node) {
    if (std::find(out_.launch.nodes.begin(), out_.launch.nodes.end(), node) ==
        out_.launch.nodes.end()) {
      out_.launch.nodes.push_back(node);
    }
  }

  int emit(Instr in) {
    std::vector<int64_t> key{static_cast<int64_t>(in.kind),
                             static_cast<int64_t>(in.op),
                             static_cast<int64_t>(in.dtype),
                             in.space,
                             in.operands[0],
                             in.operands[1],
                             in.operands[2],
                             in.input,
                             in.view,
                             in.param};
    auto [it, inserted] =
        instr_memo_.try_emplace(key, static_cast<int>(out_.program.instrs.size()));
    if (inserted) out_.program.instrs.push_back(in);
    return it->second;
  }

  int cast(int v, DType to) {
    const Instr& in = out_.program.instrs[v];
    if (in.dtype == to) return v;
    Instr conversion;
    conversion.kind = InstrKind::kCast;
    conversion.op = OpKind::Astype;
    conversion.dtype = to;
    conversion.space = in.space;
    conversion.operands[0] = v;
    return emit(conversion);
  }

  int param_slot(int trace_param) {
    auto& params = out_.launch.params;
    auto it = std::find(params.begin(), params.end(), trace_param);
    if (it != params.end()) return static_cast<int>(it - params.begin());
    params.push_back(trace_param);
    return static_cast<int>(params.size() - 1);
  }

  int view_slot(const IndexMap& map, const Shape& node_shape, int space) {
    ViewParams v = map.to_view(node_shape, out_.launch.spaces[space].size());
    out_.program.view_patterns.push_back(
        view_pattern(out_.launch.spaces[space], v, ops::numel(node_shape)));
    out_.launch.views.push_back(std::move(v));
    return static_cast<int>(out_.launch.views.size() - 1);
  }

  // The kernel's input slot reading materialized node `node`.
  int input_slot(int node) {
    auto& inputs = out_.launch.inputs;
    auto it = std::find(inputs.begin(), inputs.end(), node);
    if (it != inputs.end()) return static_cast<int>(it - inputs.begin());
    inputs.push_back(node);
    out_.program.input_dtypes.push_back(trace_.nodes[node].type->dtype);
    return static_cast<int>(inputs.size() - 1);
  }

  int load(int node, int space, const IndexMap& map) {
    Instr in;
    in.kind = InstrKind::kLoad;
    // A block-quantized weight is read as the f32 values its blocks decode to.
    const DType stored = trace_.nodes[node].type->dtype;
    in.dtype = is_block_quantized(stored) ? DType::F32 : stored;
    in.space = space;
    in.input = input_slot(node);
    in.view = view_slot(map, trace_.nodes[node].type->shape, space);
    return emit(in);
  }

  // Gather `node` (take, take_along_axis, dynamic_slice; ops/gather.h) in `space`. Its
  // indices are computed here like any operand; x is read from its buffer (the planner
  // stores every gather's x) through a view that leaves the gathered axis to the index.
  int gather(const TraceNode& n, int node, int space, const IndexMap& map) {
    const int x = n.args[0], indices = n.args[1];
    const Shape& x_shape = trace_.nodes[x].type->shape;
    const int axis = n.attrs->axis;
    const GatherMaps maps = gather_maps(n, node, x_shape, trace_.nodes[indices].type->shape, map);
    if (!plan_.materialized[x]) {
      throw std::logic_error(
          absl::StrCat("internal error: the x of gather node ", node, " is not stored"));
    }
    Instr in;
    in.kind = InstrKind::kGather;
    in.op = n.op;
    in.dtype = n.type->dtype;
    in.space = space;
    in.operands[0] = cast(value(indices, space, maps.indices), DType::I64);
    in.input = input_slot(x);
    in.view = view_slot(maps.x, x_shape, space);
    ViewParams& view = out_.launch.views[in.view];
    view.gather_stride = ops::contiguous_strides(x_shape)[axis];
    view.gather_extent = n.op == OpKind::DynamicSlice
                             ? ops::slice_start_count(x_shape[axis], n.type->shape[axis])
                             : x_shape[axis];
    ViewPattern& pattern = out_.program.view_patterns[in.view];
    pattern.access = ViewAccess::kGathered;
    pattern.broadcast_dims.clear();
    return emit(in);
  }

  // An attention's score in space 4 (the scores' shape), from kAnchor there, the raw score
  // q·k times the scale: the softmax's input of a hand-written attention (its q·kᵀ node
  // becomes kAnchor), or the raw score plus the explicit op's mask.
  void lower_attention_score(const TraceNode& a) {
    const int space = static_cast<int>(out_.launch.spaces.size());
    const Shape& shape = trace_.nodes[a.args[3]].type->shape;
    out_.launch.spaces.push_back(shape);
    const DType score_dtype = a.type->dtype == DType::F64 ? DType::F64 : DType::F32;
    for (const FusedAttention& f : plan_.attention) {
      if (f.attention != group_.anchor_node) continue;
      raw_scores_ = f.raw_scores;
      record_computed_node(f.softmax);
      const int v = value(a.args[3], space, IndexMap::identity(shape.size()));
      out_.program.anchor_operands.push_back(cast(v, score_dtype));
      return;
    }
    Instr raw;
    raw.kind = InstrKind::kAnchor;
    raw.dtype = score_dtype;
    raw.space = space;
    Instr sum;
    sum.kind = InstrKind::kBinary;
    sum.op = OpKind::Add;
    sum.dtype = score_dtype;
    sum.space = space;
    sum.operands = {emit(raw),
                    cast(value(a.args[3], space, IndexMap::identity(shape.size())), score_dtype),
                    -1};
    out_.program.anchor_operands.push_back(emit(sum));
  }

  // The instruction computing `node` in `space`, indexed through `map`.
  int value(int node, int space, const IndexMap& map, bool computing = false) {
    std::vector<int64_t> key = map.key();
    key.push_back(node);
    key.push_back(space);
    if (auto it = value_memo_.find(key); it != value_memo_.end()) return it->second;
    int result = compute_value(node, space, map, computing);
    value_memo_[key] = result;
    return result;
  }

  int compute_value(int node, int space, const IndexMap& map, bool computing) {
    const TraceNode& n = trace_.nodes[node];
    if (node == raw_scores_ && space == 4) {  // a hand-written attention's q·kᵀ
      record_computed_node(node);
      Instr in;
      in.kind = InstrKind::kAnchor;
      in.dtype = n.type->dtype;
      in.space = space;
      return emit(in);
    }
    if (node == group_.anchor_node) {
      Instr in;
      in.kind = InstrKind::kAnchor;
      in.dtype = n.type->dtype;
      in.space = 0;
      return emit(in);
    }
    if (plan_.materialized[node] &&
        !(computing || (space == 0 && is_store(node) && !map.flat &&
                        map.key() == IndexMap::identity(n.type->shape.size()).key()))) {
      return load(node, space, map);
    }
    record_computed_node(node);
    if (is_unrolled_sum(trace_, node)) return unrolled_sum(n, node, space, map);
    Instr in;
    in.dtype = n.type->dtype;
    in.space = space;
    in.op = n.op;
    switch (ops::op_class(n.op)) {
      case OpClass::kLeaf:
        if (n.op == OpKind::Constant) {
          in.kind = InstrKind::kParam;
          in.param = param_slot(n.param_slot);
        } else {
          in.kind = InstrKind::kIndexLeaf;
          in.view = view_slot(map, n.type->shape, space);
          if (n.param_slot >= 0) in.param = param_slot(n.param_slot);
        }
        return emit(in);
      case OpClass::kView:
        return value(n.args[0], space,
                     view_argument_map(n, node, trace_.nodes[n.args[0]].type->shape,
                                       out_.launch.spaces[space].size(), map));
      case OpClass::kCast:
        return cast(value(n.args[0], space, map), n.type->dtype);
      case OpClass::kUnary:  // elementwise: operands below
        in.kind = InstrKind::kUnary;
        break;
      case OpClass::kBinary:
        in.kind = InstrKind::kBinary;
        break;
      case OpClass::kWhere:
        in.kind = InstrKind::kWhere;
        break;
      case OpClass::kCustom:
        in.kind = InstrKind::kCustom;
        in.function = n.attrs->function;
        break;
      case OpClass::kGather:
        return gather(n, node, space, map);
      case OpClass::kReduce:  // anchors: reached only as the group's anchor, above
      case OpClass::kArgReduce:
      case OpClass::kMatmul:
      case OpClass::kConcat:
      case OpClass::kRowNorm:
      case OpClass::kCustomKernel:
      case OpClass::kUpdateSlice:
      case OpClass::kAttention:
      case OpClass::kCollective:
        throw std::logic_error(
            absl::StrCat("internal error: ", ops::op_name(n.op), " inlined as elementwise"));
    }
    // Elementwise: operands cast to the dtype the op computes in.
    std::vector<int> operands;
    std::vector<DType> dtypes;
    for (int a : n.args) dtypes.push_back(trace_.nodes[a].type->dtype);
    const bool logical =
        n.op == OpKind::LogicalNot || n.op == OpKind::LogicalAnd || n.op == OpKind::LogicalOr;
    for (size_t k = 0; k < n.args.size(); ++k) {
      int a = n.args[k];
      int v = value(a, space, broadcast_map(map, trace_.nodes[a].type->shape, n.type->shape, node));
      DType want = n.type->dtype;
      if (logical || (n.op == OpKind::Where && k == 0))
        want = DType::Bool;
      else if (n.op == OpKind::Custom)
        want = DType::F32;
      else if (ops::is_comparison(n.op) || ops::op_class(n.op) == OpClass::kUnary ||
               n.op == OpKind::Div) {
        want = ops::compute_dtype(n.op, dtypes);
      }
      operands.push_back(cast(v, want));
    }
    std::copy(operands.begin(), operands.end(), in.operands.begin());
    if (ops::op_class(n.op) == OpClass::kUnary && !logical) {
      in.dtype = ops::compute_dtype(n.op, dtypes);
      return cast(emit(in), n.type->dtype);
    }
    return emit(in);
  }

  // A short sum (jit/fusion/short_sum.h) as its terms added in the order the reduction adds
  // them (row-major over the reduced axes): f64 terms in f64, as the reduction adds them;
  // the two terms of f32 or less in f32. The reduction adds those in double and rounds once,
  // and double's 53 bits are at least twice f32's 24 plus two, so rounding the exact sum to
  // double and then to f32 gives the f32 sum (Figueroa, "When is double rounding
  // innocuous?", 1995).
  int unrolled_sum(const TraceNode& n, int node, int space, const IndexMap& map) {
    const int x = n.args[0];
    const Shape& from = trace_.nodes[x].type->shape;
    const std::vector<int>& axes = n.attrs->axes;
    const DType sum_dtype = n.type->dtype == DType::F64 ? DType::F64 : DType::F32;
    std::vector<int64_t> position(axes.size(), 0);
    int total = -1;
    while (true) {
      const IndexMap term_map = summed_term_map(map, from, axes, n.attrs->keepdims, position, node);
      const int term = cast(value(x, space, term_map), sum_dtype);
      if (total < 0) {
        total = term;
      } else {
        Instr add;
        add.kind = InstrKind::kBinary;
        add.op = OpKind::Add;
        add.dtype = sum_dtype;
        add.space = space;
        add.operands = {total, term, -1};
        total = emit(add);
      }
      int d = static_cast<int>(axes.size()) - 1;  // the next position, the last axis fastest
      while (d >= 0 && ++position[d] == from[axes[d]]) position[d--] = 0;
      if (d < 0) break;
    }
    return cast(total, n.type->dtype);
  }

  // Named after what it computes: the anchor's op, then the fused ops in trace order.
  std::string name() const {
    std::vector<std::string> parts{
        group_.anchor_node >= 0 ? ops::op_name(trace_.nodes[group_.anchor_node].op) : "pointwise"};
    std::vector<int> nodes = out_.launch.nodes;
    std::sort(nodes.begin(), nodes.end());
    int shown = 0, hidden = 0;
    for (int n : nodes) {
      const OpKind op = trace_.nodes[n].op;
      const OpClass c = ops::op_class(op);
      if (n == group_.anchor_node || c == OpClass::kLeaf || c == OpClass::kView) continue;
      std::string name = op == OpKind::Custom
                             ? ops::custom_function(trace_.nodes[n].attrs->function)->name
                             : ops::op_name(op);
      if (std::find(parts.begin(), parts.end(), name) != parts.end()) continue;
      if (shown < 5) {
        parts.push_back(name);
        ++shown;
      } else {
        ++hidden;
      }
    }
    if (hidden > 0) parts.push_back(absl::StrCat("and", hidden, "more"));
    if (parts.size() == 1 && group_.anchor_node < 0) parts.push_back("copy");
    return absl::StrJoin(parts, "_");
  }

  const Trace& trace_;
  const FusionPlan& plan_;
  const KernelGroup& group_;
  LoweredKernel out_;
  int raw_scores_ = -1;  // a hand-written attention's q·kᵀ node, read as kAnchor in space 4
  absl::flat_hash_map<std::vector<int64_t>, int> value_memo_;
  absl::flat_hash_map<std::vector<int64_t>, int> instr_memo_;
};

// An op that reads its inputs and writes its output as whole plan buffers (a custom kernel,
// a collective): space 0 is the output's shape, space k + 1 input k's.
LoweredKernel lower_whole_buffer_op(const Trace& trace, const KernelGroup& group, AnchorKind anchor,
                                    const std::string& name) {
  LoweredKernel out;
  const int node = group.anchor_node;
  const TraceNode& n = trace.nodes[node];
  KernelProgram& program = out.program;
  KernelLaunch& launch = out.launch;
  program.anchor = anchor;
  program.anchor_op = n.op;
  program.anchor_dtype = n.type->dtype;
  program.name = name;
  launch.spaces.push_back(n.type->shape);
  for (int a : n.args) {
    launch.spaces.push_back(trace.nodes[a].type->shape);
    if (n.op == ops::OpKind::Recv) continue;  // its operand gives only its type
    launch.inputs.push_back(a);
    program.input_dtypes.push_back(trace.nodes[a].type->dtype);
  }
  launch.outputs.push_back(node);
  program.output_dtypes.push_back(n.type->dtype);
  for (const Shape& s : launch.spaces) program.space_ranks.push_back(static_cast<int>(s.size()));
  launch.nodes.push_back(node);
  return out;
}

LoweredKernel lower_custom_kernel(const Trace& trace, const KernelGroup& group) {
  const ops::Attrs& attrs = *trace.nodes[group.anchor_node].attrs;
  LoweredKernel out = lower_whole_buffer_op(trace, group, AnchorKind::kCustomKernel,
                                            ops::custom_kernel(attrs.function)->name);
  out.program.anchor_attrs.function = attrs.function;
  return out;
}

// A collective, named for what it moves: "all_reduce_sum_f32", "send_to_1_bf16".
LoweredKernel lower_collective(const Trace& trace, const KernelGroup& group) {
  const TraceNode& n = trace.nodes[group.anchor_node];
  const ops::Attrs& a = *n.attrs;
  std::string name = ops::op_name(n.op);
  switch (n.op) {
    case ops::OpKind::AllReduce:
    case ops::OpKind::ReduceScatter:
      absl::StrAppend(&name, "_", comm::reduction_name(static_cast<comm::Reduction>(a.reduction)));
      break;
    case ops::OpKind::Broadcast:
      absl::StrAppend(&name, "_from_", a.peer);
      break;
    case ops::OpKind::Send:
      absl::StrAppend(&name, "_to_", a.peer);
      break;
    case ops::OpKind::Recv:
      absl::StrAppend(&name, "_from_", a.peer);
      break;
    default:
      break;
  }
  absl::StrAppend(&name, "_", dtype_name(n.type->dtype));
  LoweredKernel out = lower_whole_buffer_op(trace, group, AnchorKind::kCollective, name);
  out.program.anchor_attrs = a;
  return out;
}

}  // namespace

LoweringResult lower_group(const Trace& trace, const FusionPlan& plan, const KernelGroup& group) {
  if (group.anchor == AnchorKind::kCustomKernel) return {lower_custom_kernel(trace, group)};
  if (group.anchor == AnchorKind::kCollective) return {lower_collective(trace, group)};
  try {
    return {Lowerer(trace, plan, group).run()};
  } catch (const NeedsMaterialization& need) {
    LoweringResult result;
    result.node_to_store = need.node;
    return result;
  }
}

}  // namespace kiln::jit
