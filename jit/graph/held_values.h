// Kiln's rule for the values a program still holds when a sync runs (docs/contracts.md,
// "Laziness and sync points").
//
// A sync computes what it was asked for. A pending value on its way that something outside
// the sync still references (a Tensor the program holds, or an op recorded on the value that
// this sync does not compute) is computed inside the sync's kernels as usual, and marked.
// When a later sync reaches that value again and it is still held, it is stored there, as
// an extra output of the kernel that computes it, and no sync computes it again. So a value
// is computed at most twice, however many syncs read it: `r = x * 2; sum(r * r).item();
// sum(r).item();` computes r in both syncs and stores it in the second, and a loop that
// reads a scalar every iteration (conjugate gradient) runs the same kernels every iteration
// instead of recomputing its history.
//
// Why not store a held value the first time: C++ keeps a full expression's temporaries alive
// until its end, so in `sum(exp(x * 2)).item()` the temporaries x * 2 and exp(...) are held
// while the sync runs, and storing them would cost every one-line reduction its fusion.
// A matrix-vector product is the exception, stored by the first sync that computes it while
// held: computing it again reads a whole matrix, storing it writes one vector (conjugate
// gradient's A p is read by the sync after the one that computes it).
//
// The trace cap's sync (KILN_MAX_TRACE) stores every held value at once: it runs to cut a
// pending graph, and what the program holds is what its next ops read.
//
// Two kinds are never stored: generators (zeros, arange, rand: cheaper to compute again than
// to read back, and they fuse into their readers) and views (index math). A held view
// stores the value it reads through its chain of views instead.
#ifndef KILN_JIT_GRAPH_HELD_VALUES_H_
#define KILN_JIT_GRAPH_HELD_VALUES_H_

#include <memory>
#include <vector>

#include "jit/graph/node.h"

namespace kiln::jit {

// What the rule says for one sync.
struct HeldValues {
  // Stored by this sync (extra targets), each once and never a target, in the order a walk
  // from the targets finds them, so a plan is the same from run to run.
  std::vector<std::shared_ptr<detail::Node>> store;
  // Held and computed without storing: marked by mark_computed_while_held once the sync
  // has succeeded (a sync that throws changes nothing).
  std::vector<std::shared_ptr<detail::Node>> computed;
};

// The rule applied to the pending nodes that `targets` reach; with `store_at_once` (the
// trace cap's sync, jit/eval/sync.h) every held value is stored now. Call it under the
// sync's ClaimedGraph for `targets`, before anything else takes a reference to them: a
// reference count says whether a node is held outside the sync, and the claim's own
// references are discounted.
HeldValues find_held_values(const std::vector<detail::Node*>& targets, bool store_at_once);

// After the sync succeeded: the next sync that reaches these nodes still held stores them.
void mark_computed_while_held(const HeldValues& held);

}  // namespace kiln::jit

#endif  // KILN_JIT_GRAPH_HELD_VALUES_H_
