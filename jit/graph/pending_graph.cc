#include "jit/graph/pending_graph.h"

#include <utility>

#include "absl/container/flat_hash_set.h"

namespace kiln::jit {
namespace {

// Post-order DFS with an explicit stack; `include_realized` decides whether realized nodes
// are listed (they never have inputs, so the walk stops at them either way).
std::vector<detail::Node*> topological_order(const std::vector<detail::Node*>& roots,
                                             bool include_realized) {
  std::vector<detail::Node*> order;
  absl::flat_hash_set<detail::Node*> visited;
  std::vector<std::pair<detail::Node*, size_t>> stack;
  for (detail::Node* root : roots) {
    if (!visited.insert(root).second) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        detail::Node* input = node->inputs[next++].get();
        if (visited.insert(input).second) stack.emplace_back(input, 0);
        continue;
      }
      if (include_realized || !node->realized()) order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

std::vector<detail::Node*> collect_pending(const std::vector<detail::Node*>& roots) {
  return topological_order(roots, /*include_realized=*/false);
}

std::vector<detail::Node*> collect_all(const std::vector<detail::Node*>& roots) {
  return topological_order(roots, /*include_realized=*/true);
}

}  // namespace kiln::jit
