// Recording: the only way nodes enter the lazy graph.
#ifndef KILN_JIT_GRAPH_RECORD_H_
#define KILN_JIT_GRAPH_RECORD_H_

#include <memory>
#include <vector>

#include "base/buffer.h"
#include "kiln/tensor.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::detail {
struct Node;
}  // namespace kiln::detail

namespace kiln::jit {

// Validates `op` over `inputs` (shape and dtype inference) and records a node for it. Throws
// kiln::Error, recording nothing, when the application is not legal. When the pending graph
// behind the new node grows past KILN_MAX_TRACE nodes it is evaluated at once.
Tensor record(ops::OpKind op, const std::vector<Tensor>& inputs, ops::Attrs attrs);

// The checks of record() alone: the output type of `op` over `inputs`, or kiln::Error.
// Canonicalizes `attrs` as record() does.
ops::ValueType check_op(ops::OpKind op, const std::vector<Tensor>& inputs, ops::Attrs& attrs);

// Throws kiln::Error when `op` cannot run on `device`: a CPU-only custom kernel elsewhere.
void check_runs_on(ops::OpKind op, const ops::Attrs& attrs, Device device);

// A tensor that is already computed: a realized "input" node holding `data`, which must be
// in `device`'s memory already (jit::place_on puts it there).
Tensor make_realized(const ops::ValueType& type, const std::shared_ptr<base::Buffer>& data,
                     Device device);

// An input node with no data yet: a placeholder for checking a trace file without running
// it. Evaluating anything that depends on it throws.
Tensor make_placeholder(const ops::ValueType& type, const std::string& name);

// Whether this process has recorded a collective op (sync then keeps their results).
bool any_collective_recorded();

// The cap on pending nodes (KILN_MAX_TRACE, default 4096).
int64_t max_trace_nodes();

// How record() evaluates a pending graph that grew past the cap. The graph layer cannot call
// up into evaluation, so jit/eval/sync.cc installs its sync here when the program starts.
using TraceCapSync = void (*)(detail::Node* node);
void set_trace_cap_sync(TraceCapSync sync);

}  // namespace kiln::jit

#endif  // KILN_JIT_GRAPH_RECORD_H_
