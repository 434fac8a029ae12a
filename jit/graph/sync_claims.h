// Syncs on several threads whose pending graphs overlap.
//
// A sync claims every pending node its outputs reach before it plans, and gives them back
// when its outputs are realized. A second sync that reaches a node claimed by the first
// waits until the first is done, then walks again: what the first realized is now a leaf it
// reads, never a node it computes too. Syncs whose pending graphs are disjoint (they may
// share realized weights) claim disjoint nodes and run side by side.
//
// While a sync holds a node, only its thread reads the node's recipe or writes its trace
// marks and its buffer; other threads see it only through realized(), which is atomic.
#ifndef KILN_JIT_GRAPH_SYNC_CLAIMS_H_
#define KILN_JIT_GRAPH_SYNC_CLAIMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "jit/graph/node.h"

namespace kiln::jit {

class ClaimedGraph {
 public:
  // The references a claim holds to each pending node its roots reach, other than a root
  // (find_held_values discounts it).
  static constexpr long kClaimReferences = 1;

  // Blocks until no other sync holds a pending node that `roots` reach, then claims them
  // all. Throws kiln::Error when the calling thread's own sync holds one (a sync started
  // from inside a sync, which would wait for itself forever).
  explicit ClaimedGraph(const std::vector<detail::Node*>& roots);
  ~ClaimedGraph();  // gives the nodes back and wakes the syncs waiting for them

  ClaimedGraph(const ClaimedGraph&) = delete;
  ClaimedGraph& operator=(const ClaimedGraph&) = delete;

 private:
  // Kept alive until released: realizing the outputs drops their inputs, which may be the
  // last other reference to a claimed node. Exactly one reference to each claimed node but
  // the roots (kClaimReferences).
  std::vector<std::shared_ptr<detail::Node>> held_;
  std::vector<detail::Node*> claimed_;
};

// The pending nodes reachable from `root`, counted up to just past `limit`. Nodes another
// sync holds count as one each: their inputs are that sync's to read.
int64_t count_pending_nodes(detail::Node* root, int64_t limit);

}  // namespace kiln::jit

#endif  // KILN_JIT_GRAPH_SYNC_CLAIMS_H_
