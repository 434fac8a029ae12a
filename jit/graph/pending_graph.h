// Collecting the pending (not yet realized) part of the graph behind some tensors.
#ifndef KILN_JIT_GRAPH_PENDING_GRAPH_H_
#define KILN_JIT_GRAPH_PENDING_GRAPH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "jit/graph/node.h"

namespace kiln::jit {

// Every unrealized node reachable from `roots`, each once, inputs before users. Iterative,
// so a million-node chain is fine.
std::vector<detail::Node*> collect_pending(const std::vector<detail::Node*>& roots);

// Every node reachable from `roots` (realized leaves included), inputs before users.
std::vector<detail::Node*> collect_all(const std::vector<detail::Node*>& roots);

}  // namespace kiln::jit

#endif  // KILN_JIT_GRAPH_PENDING_GRAPH_H_
