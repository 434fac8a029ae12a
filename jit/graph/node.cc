#include "jit/graph/node.h"

#include <utility>

namespace kiln::detail {

void Node::realize(std::shared_ptr<base::Buffer> data) {
  buffer = std::move(data);
  pending_bound.store(0, std::memory_order_relaxed);
  // Published with its buffer; a node is realized once, and stops being pending then.
  if (!realized_.exchange(true, std::memory_order_acq_rel)) {
    pending_nodes().fetch_sub(1, std::memory_order_relaxed);
  }
  std::vector<std::shared_ptr<Node>> dropped;
  dropped.swap(inputs);
  // `dropped` is released here, through the iterative destructor below.
}

uint64_t Node::new_walk_epoch() {
  static std::atomic<uint64_t> epoch{0};
  return ++epoch;
}

std::atomic<int64_t>& Node::live_nodes() {
  static std::atomic<int64_t> count{0};
  return count;
}

std::atomic<int64_t>& Node::pending_nodes() {
  static std::atomic<int64_t> count{0};
  return count;
}

Node::~Node() {
  live_nodes().fetch_sub(1, std::memory_order_relaxed);
  if (!realized()) pending_nodes().fetch_sub(1, std::memory_order_relaxed);
  std::vector<std::shared_ptr<Node>> stack;
  stack.swap(inputs);
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    // Only a node we hold the last reference to would recurse on destruction: take its
    // inputs first so its destructor finds nothing to release.
    if (node.use_count() == 1) {
      for (std::shared_ptr<Node>& input : node->inputs) stack.push_back(std::move(input));
      node->inputs.clear();
    }
  }
}

}  // namespace kiln::detail
