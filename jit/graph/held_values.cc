#include "jit/graph/held_values.h"

#include "absl/container/flat_hash_set.h"
#include "jit/graph/sync_claims.h"
#include "ops/op_catalog.h"

namespace kiln::jit {
namespace {

// A pending node the walk reached through an input, and what its references say.
struct Reached {
  const std::shared_ptr<detail::Node>* edge;  // the input that first reached it
  long references = 0;                        // its use count then, before anyone held it
  long in_sync = 0;  // inputs of the sync's pending nodes that are this node
};

// The value a held node stands for: itself, or for a view the first node its chain of views
// reads, if that is pending, not a generator and not a target of the walk of `walk_epoch`;
// null otherwise (nothing needs storing: a view costs no arithmetic).
std::shared_ptr<detail::Node> value_to_store(std::shared_ptr<detail::Node> node,
                                             uint64_t walk_epoch) {
  // A realized node, views included, has dropped its inputs.
  while (!node->realized() && ops::op_class(node->op) == ops::OpClass::kView) {
    node = node->inputs.front();
  }
  const bool target = node->trace_epoch == walk_epoch && node->trace_index < 0;
  if (node->realized() || target || ops::op_class(node->op) == ops::OpClass::kLeaf) {
    return nullptr;
  }
  return node;
}

// Whether computing `node` again costs far more than storing it, and storing it costs
// nothing else: a matrix-vector product (conjugate gradient's A p, read by the sync after the
// one that computes it) reads a whole matrix to give one vector. A matmul with a matrix
// result is not: storing it would take its epilogue out of its kernel (the planner fuses
// nothing into a stored anchor), and a hand-written attention's scores out of the attention.
bool costly_to_compute_again(const detail::Node& node) {
  return ops::op_class(node.op) == ops::OpClass::kMatmul && node.type.shape.size() == 1;
}

}  // namespace

HeldValues find_held_values(const std::vector<detail::Node*>& targets, bool store_at_once) {
  // Targets and reached nodes carry this walk's epoch; a target's index is -1.
  const uint64_t epoch = detail::Node::new_walk_epoch();
  for (detail::Node* t : targets) {
    t->trace_epoch = epoch;
    t->trace_index = -1;
  }
  std::vector<Reached> reached;
  std::vector<detail::Node*> stack(targets.begin(), targets.end());
  while (!stack.empty()) {
    detail::Node* n = stack.back();
    stack.pop_back();
    for (const std::shared_ptr<detail::Node>& in : n->inputs) {
      if (in->realized()) continue;
      if (in->trace_epoch != epoch) {
        in->trace_epoch = epoch;
        in->trace_index = static_cast<int>(reached.size());
        reached.push_back({&in, in.use_count()});
        stack.push_back(in.get());
      }
      if (in->trace_index >= 0) reached[in->trace_index].in_sync += 1;
    }
  }
  // Only now are references taken: every count above was read before any of them.
  HeldValues held;
  absl::flat_hash_set<detail::Node*> chosen;
  for (const Reached& r : reached) {
    if (r.references <= r.in_sync + ClaimedGraph::kClaimReferences) continue;
    std::shared_ptr<detail::Node> value = value_to_store(*r.edge, epoch);
    if (value == nullptr || !chosen.insert(value.get()).second) continue;
    const bool now = store_at_once || value->computed_while_held || costly_to_compute_again(*value);
    (now ? held.store : held.computed).push_back(std::move(value));
  }
  return held;
}

void mark_computed_while_held(const HeldValues& held) {
  for (const std::shared_ptr<detail::Node>& n : held.computed) n->computed_while_held = true;
}

}  // namespace kiln::jit
