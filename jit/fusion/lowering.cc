#include "jit/fusion/lowering.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/host_collective.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/gather.h"
#include "ops/infer.h"

namespace kiln::jit {
namespace {

using ops::OpClass;
using ops::OpKind;
using ops::Shape;

// How the current space indexes a node: either its multi-index, each dim an affine function
// of at most one space dim (src < 0: constant), or directly its flat index.
struct IndexMap {
  bool flat = false;
  std::vector<int> src;
  std::vector<int64_t> scale, base;  // multi form, per node dim
  std::vector<int64_t> strides;      // flat form, per space dim
  int64_t offset = 0;

  static IndexMap identity(size_t rank) {
    IndexMap m;
    for (size_t j = 0; j < rank; ++j) {
      m.src.push_back(static_cast<int>(j));
      m.scale.push_back(1);
      m.base.push_back(0);
    }
    return m;
  }
  // The flat index into a contiguous value of `shape`, over a space of rank `space_rank`.
  ViewParams to_view(const Shape& shape, size_t space_rank) const {
    ViewParams v;
    if (flat) {
      v.strides = strides;
      v.offset = offset;
      return v;
    }
    std::vector<int64_t> contiguous = ops::contiguous_strides(shape);
    v.strides.assign(space_rank, 0);
    for (size_t j = 0; j < src.size(); ++j) {
      if (src[j] >= 0) v.strides[src[j]] += contiguous[j] * scale[j];
      v.offset += contiguous[j] * base[j];
    }
    return v;
  }
  std::vector<int64_t> key() const {
    std::vector<int64_t> k{flat};
    if (flat) {
      k.insert(k.end(), strides.begin(), strides.end());
      k.push_back(offset);
    } else {
      k.insert(k.end(), src.begin(), src.end());
      k.insert(k.end(), scale.begin(), scale.end());
      k.insert(k.end(), base.begin(), base.end());
    }
    return k;
  }
};

struct NeedsMaterialization {
  int node;
};

class Lowerer {
 public:
  Lowerer(const Trace& t, const FusionPlan& p, const KernelGroup& g)
      : trace_(t), plan_(p), group_(g) {}

  LoweredKernel run() {
    KernelProgram& prog = out_.program;
    KernelLaunch& launch = out_.launch;
    const int anchor = group_.anchor_node;
    prog.anchor = group_.anchor;
    const Shape& domain = trace_.nodes[anchor >= 0 ? anchor : group_.stores[0]].type->shape;
    launch.spaces.push_back(domain);
    if (anchor >= 0) {
      const TraceNode& a = trace_.nodes[anchor];
      prog.anchor_op = a.op;
      prog.anchor_attrs.axes = a.attrs->axes;
      prog.anchor_attrs.keepdims = a.attrs->keepdims;
      prog.anchor_attrs.axis = a.attrs->axis;
      prog.anchor_attrs.largest = a.attrs->largest;
      prog.anchor_attrs.causal = a.attrs->causal;
      prog.anchor_attrs.bottom_right = a.attrs->bottom_right;
      prog.anchor_attrs.exclusive = a.attrs->exclusive;
      prog.anchor_attrs.reverse = a.attrs->reverse;
      prog.anchor_dtype = a.type->dtype;
      if (a.param_slot >= 0) prog.anchor_param = param_slot(a.param_slot);
      record_computed_node(anchor);
      std::vector<int> operands(a.args.begin(), a.args.end());
      if (a.op == OpKind::Attention) operands.resize(3);  // the score (space 4) comes below
      if (a.op == OpKind::UpdateSlice) {
        input_slot(a.args[0]);  // x: input 0, the buffer output 0 starts as
        if (a.args.size() == 3) prog.anchor_start_input = input_slot(a.args[2]);
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
            group_.anchor == AnchorKind::kArgReduce || a.op == OpKind::TopkIndices;
        prog.anchor_operands.push_back(compares ? v : cast(v, a.type->dtype));
      }
      if (a.op == OpKind::Attention && a.args.size() == 4) lower_attention_score(a);
    }
    for (int store : group_.stores) {
      int v = value(store, 0, IndexMap::identity(domain.size()), /*computing=*/true);
      int slot = static_cast<int>(launch.outputs.size());
      launch.outputs.push_back(store);
      prog.output_dtypes.push_back(trace_.nodes[store].type->dtype);
      prog.stores.push_back({cast(v, trace_.nodes[store].type->dtype), slot});
      record_computed_node(store);
    }
    for (const Shape& s : launch.spaces) prog.space_ranks.push_back(static_cast<int>(s.size()));
    prog.num_params = static_cast<int>(launch.params.size());
    prog.name = name();
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
    in.dtype = trace_.nodes[node].type->dtype;
    in.space = space;
    in.input = input_slot(node);
    in.view = view_slot(map, trace_.nodes[node].type->shape, space);
    return emit(in);
  }

  // Gather `node` (take, take_along_axis, dynamic_slice; ops/gather.h) in `space`. Its
  // indices are computed here like any operand; x is read from its buffer (the planner
  // stores every gather's x) through a view that leaves the gathered axis to the index.
  int gather(const TraceNode& n, int node, int space, const IndexMap& map) {
    if (map.flat) throw NeedsMaterialization{node};
    const int x = n.args[0], indices = n.args[1];
    const Shape& x_shape = trace_.nodes[x].type->shape;
    const Shape& index_shape = trace_.nodes[indices].type->shape;
    const int axis = n.attrs->axis;
    const int rank = static_cast<int>(x_shape.size());
    IndexMap x_map, index_map;
    auto follow = [&](IndexMap& r, int j) {  // r's next dim follows the node's dim j
      r.src.push_back(map.src[j]);
      r.scale.push_back(map.scale[j]);
      r.base.push_back(map.base[j]);
    };
    auto fixed = [](IndexMap& r) {  // r's next dim stays at 0 (the gathered axis, a broadcast)
      r.src.push_back(-1);
      r.scale.push_back(0);
      r.base.push_back(0);
    };
    if (n.op == OpKind::DynamicSlice) {
      // One start for every element (a broadcast scalar); x's view walks the slice itself,
      // so the start's position moves the whole window.
      for (size_t i = 0; i < index_shape.size(); ++i) fixed(index_map);
      for (int d = 0; d < rank; ++d) follow(x_map, d);
    } else if (n.op == OpKind::Take) {
      const int index_rank = static_cast<int>(index_shape.size());
      for (int i = 0; i < index_rank; ++i) follow(index_map, axis + i);
      for (int d = 0; d < rank; ++d) {
        if (d == axis) {
          fixed(x_map);
        } else {
          follow(x_map, d < axis ? d : d - 1 + index_rank);
        }
      }
    } else {
      index_map = broadcast(map, index_shape, n.type->shape, node);
      for (int d = 0; d < rank; ++d) {
        if (d == axis || (x_shape[d] == 1 && n.type->shape[d] != 1)) {
          fixed(x_map);
        } else {
          follow(x_map, d);
        }
      }
    }
    if (!plan_.materialized[x]) {
      throw std::logic_error(
          absl::StrCat("internal error: the x of gather node ", node, " is not stored"));
    }
    Instr in;
    in.kind = InstrKind::kGather;
    in.op = n.op;
    in.dtype = n.type->dtype;
    in.space = space;
    in.operands[0] = cast(value(indices, space, index_map), DType::I64);
    in.input = input_slot(x);
    in.view = view_slot(x_map, x_shape, space);
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

  // The map for argument `arg` (of shape `from`) broadcast to the node's `to` shape.
  static IndexMap broadcast(const IndexMap& m, const Shape& from, const Shape& to, int node) {
    if (from == to) return m;
    if (m.flat) throw NeedsMaterialization{node};
    IndexMap r;
    size_t offset = to.size() - from.size();
    for (size_t i = 0; i < from.size(); ++i) {
      size_t j = offset + i;
      bool stretched = from[i] == 1 && to[j] != 1;
      r.src.push_back(stretched ? -1 : m.src[j]);
      r.scale.push_back(stretched ? 0 : m.scale[j]);
      r.base.push_back(stretched ? 0 : m.base[j]);
    }
    return r;
  }

  IndexMap view_arg_map(const TraceNode& n, int node, int space, const IndexMap& m) {
    const Shape& from = trace_.nodes[n.args[0]].type->shape;
    switch (n.op) {
      case OpKind::Reshape: {
        if (m.flat) return m;
        // Inserting or removing size-1 dims (unsqueeze, squeeze) keeps the multi-index form.
        std::vector<size_t> out_dims, in_dims;
        for (size_t j = 0; j < n.type->shape.size(); ++j) {
          if (n.type->shape[j] != 1) out_dims.push_back(j);
        }
        for (size_t j = 0; j < from.size(); ++j) {
          if (from[j] != 1) in_dims.push_back(j);
        }
        bool unit_dims_only = in_dims.size() == out_dims.size();
        for (size_t k = 0; unit_dims_only && k < in_dims.size(); ++k) {
          unit_dims_only = from[in_dims[k]] == n.type->shape[out_dims[k]];
        }
        if (unit_dims_only) {
          IndexMap r;
          r.src.assign(from.size(), -1);
          r.scale.assign(from.size(), 0);
          r.base.assign(from.size(), 0);
          for (size_t k = 0; k < in_dims.size(); ++k) {
            r.src[in_dims[k]] = m.src[out_dims[k]];
            r.scale[in_dims[k]] = m.scale[out_dims[k]];
            r.base[in_dims[k]] = m.base[out_dims[k]];
          }
          return r;
        }
        ViewParams v = m.to_view(n.type->shape, out_.launch.spaces[space].size());
        IndexMap f;
        f.flat = true;
        f.strides = v.strides;
        f.offset = v.offset;
        return f;
      }
      case OpKind::BroadcastTo:
        return broadcast(m, from, n.type->shape, node);
      case OpKind::Permute: {
        bool identity = true;
        for (size_t j = 0; j < n.attrs->axes.size(); ++j)
          identity &= n.attrs->axes[j] == static_cast<int>(j);
        if (identity) return m;
        if (m.flat) throw NeedsMaterialization{node};
        IndexMap r = m;
        for (size_t j = 0; j < n.attrs->axes.size(); ++j) {
          int axis = n.attrs->axes[j];
          r.src[axis] = m.src[j];
          r.scale[axis] = m.scale[j];
          r.base[axis] = m.base[j];
        }
        return r;
      }
      case OpKind::Contiguous:
        return m;
      case OpKind::Slice: {
        int axis = n.attrs->axis;
        if (n.attrs->step == 1 && n.attrs->start == 0 && n.attrs->stop == from[axis]) return m;
        if (m.flat) {
          // A unit-step slice with only size-1 dims before it is a contiguous sub-range.
          bool leading = n.attrs->step == 1;
          for (int d = 0; d < axis; ++d) leading &= from[d] == 1;
          if (!leading) throw NeedsMaterialization{node};
          IndexMap r = m;
          r.offset += n.attrs->start * ops::contiguous_strides(from)[axis];
          return r;
        }
        IndexMap r = m;
        r.scale[axis] = m.scale[axis] * n.attrs->step;
        r.base[axis] = m.base[axis] * n.attrs->step + n.attrs->start;
        return r;
      }
        KILN_LEAF_OPS(KILN_OP_CASE)
        KILN_UNARY_OPS(KILN_OP_CASE)
        KILN_BINARY_OPS(KILN_OP_CASE)
        KILN_STRUCTURED_OPS(KILN_OP_CASE)
        break;
    }
    throw std::logic_error(absl::StrCat("internal error: ", ops::op_name(n.op), " is not a view"));
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
        return value(n.args[0], space, view_arg_map(n, node, space, map));
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
      int v = value(a, space, broadcast(map, trace_.nodes[a].type->shape, n.type->shape, node));
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
  KernelProgram& prog = out.program;
  KernelLaunch& launch = out.launch;
  prog.anchor = anchor;
  prog.anchor_op = n.op;
  prog.anchor_dtype = n.type->dtype;
  prog.name = name;
  launch.spaces.push_back(n.type->shape);
  for (int a : n.args) {
    launch.spaces.push_back(trace.nodes[a].type->shape);
    if (n.op == ops::OpKind::Recv) continue;  // its operand gives only its type
    launch.inputs.push_back(a);
    prog.input_dtypes.push_back(trace.nodes[a].type->dtype);
  }
  launch.outputs.push_back(node);
  prog.output_dtypes.push_back(n.type->dtype);
  for (const Shape& s : launch.spaces) prog.space_ranks.push_back(static_cast<int>(s.size()));
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
