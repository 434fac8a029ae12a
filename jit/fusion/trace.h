// The canonical trace of one sync point: the pending DAG behind the outputs with common
// subexpressions merged, in a canonical topological order, with scalars pulled out as
// parameters and a structural key that identifies its launch plan.
//
// A trace is built on every sync point, so it is cheap: its nodes point at the graph's own
// attributes and types (the graph outlives the trace, which lives for one sync).
#ifndef KILN_JIT_FUSION_TRACE_H_
#define KILN_JIT_FUSION_TRACE_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "jit/graph/node.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::jit {

struct TraceNode {
  ops::OpKind op = ops::OpKind::Input;  // Input for realized values (bound at run time)
  const ops::Attrs* attrs = nullptr;
  const ops::ValueType* type = nullptr;
  absl::InlinedVector<int, 3> args;  // indices of earlier nodes
  int input_slot = -1;               // Input: index into Trace::inputs
  int param_slot = -1;               // this node's scalar parameter, if it has one
};

// A trace's scalars: constant values, random seeds, norm epsilons, update_slice starts and
// attention scales. They are kernel parameters, never part of the plan key, so a value that
// changes every step reuses the plan.
struct Trace {
  std::vector<TraceNode> nodes;
  std::vector<int> outputs;           // per requested output, its node
  std::vector<detail::Node*> inputs;  // per input slot, the realized node to read
  std::vector<double> params;         // per param slot, its value
  std::vector<int64_t> key;           // structural key: equal key => same plan
  size_t key_hash = 0;
};

// Builds the canonical trace behind `outputs` (which must not all be realized).
Trace build_trace(const std::vector<detail::Node*>& outputs);

// How many parameters an op's node carries: constant 1 (value), rand/randn 1 (seed, as a
// double holding the 64 bits), layer_norm/rms_norm 1 (eps), update_slice 1 (start), attention 1
// (scale), others 0.
int param_count(ops::OpKind op);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_TRACE_H_
