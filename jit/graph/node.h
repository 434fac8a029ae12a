// The lazy graph: a Node is one recorded op application, or a realized value.
//
// A Tensor is a refcounted handle to a Node. Until a sync point computes it, a Node holds its
// recipe (op, attrs, inputs). Once realized it holds a Buffer and drops its inputs, so the
// memory of an eager program is freed as it runs.
#ifndef KILN_JIT_GRAPH_NODE_H_
#define KILN_JIT_GRAPH_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/buffer.h"
#include "kiln/dtype.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::detail {

struct Node {
  ops::OpKind op = ops::OpKind::Input;
  ops::Attrs attrs;
  ops::ValueType type;
  Device device;
  std::vector<std::shared_ptr<Node>> inputs;
  std::shared_ptr<base::Buffer> buffer;  // set once realized; read only after realized()
  // Upper bound on the unrealized nodes reachable from here (this one included); shared
  // subgraphs are counted once per path, so it may overcount, never undercount. Atomic: a
  // thread recording on top of a node reads it while another thread's sync realizes the node.
  std::atomic<int64_t> pending_bound{1};
  // Scratch for a walk over a pending graph (building a trace, finding held values): the
  // walk that last saw this node, by its epoch (new_walk_epoch), and the node's index there.
  uint64_t trace_epoch = 0;
  int trace_index = -1;
  // A number no earlier walk used, so a walk needs no node-to-index map (one sync at a time
  // per graph: the claim's, jit/graph/sync_claims.h).
  static uint64_t new_walk_epoch();

  // The sync that is computing this node now, if any (jit/graph/sync_claims.h); guarded by
  // that file's lock.
  const void* claimed_by = nullptr;
  // Set when a sync computed this node without storing it while something outside that
  // sync held it: the next sync that reaches it still held stores it
  // (jit/graph/held_values.h). Read and written only by the sync that claims the node.
  bool computed_while_held = false;

  // Acquire: a thread that sees the node realized also sees its buffer.
  bool realized() const { return realized_.load(std::memory_order_acquire); }
  // Becomes a leaf holding `data`: the recipe and the references to inputs are dropped.
  void realize(std::shared_ptr<base::Buffer> data);

  Node() {
    live_nodes().fetch_add(1, std::memory_order_relaxed);
    pending_nodes().fetch_add(1, std::memory_order_relaxed);
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Releases long input chains iteratively, so dropping a million-node trace cannot
  // overflow the stack.
  ~Node();

  // How many nodes exist right now, in the whole process (for leak and growth checks).
  static std::atomic<int64_t>& live_nodes();
  // How many nodes are pending (not realized) right now, in the whole process. No pending
  // graph is larger, so while this stays under the trace cap no graph needs counting.
  static std::atomic<int64_t>& pending_nodes();

 private:
  std::atomic<bool> realized_{false};
};

}  // namespace kiln::detail

#endif  // KILN_JIT_GRAPH_NODE_H_
