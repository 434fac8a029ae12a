// Running a whole pending graph through the reference evaluator, op by op: the oracle that
// differential tests compare every device against.
#ifndef KILN_JIT_GRAPH_REFERENCE_GRAPH_H_
#define KILN_JIT_GRAPH_REFERENCE_GRAPH_H_

#include <memory>
#include <vector>

#include "base/buffer.h"
#include "jit/graph/node.h"

namespace kiln::ops {

// Computes `outputs` (and the pending nodes behind them) without changing any node.
std::vector<std::shared_ptr<base::Buffer>> reference_run(const std::vector<detail::Node*>& outputs);

}  // namespace kiln::ops

#endif  // KILN_JIT_GRAPH_REFERENCE_GRAPH_H_
