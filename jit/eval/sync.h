// Sync points: computing pending nodes and making them realized.
#ifndef KILN_JIT_EVAL_SYNC_H_
#define KILN_JIT_EVAL_SYNC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "jit/fusion/launch_plan.h"
#include "jit/graph/node.h"

namespace kiln::jit {

// Why a sync runs: the program reads data (or asked for eval), or the trace cap
// (KILN_MAX_TRACE) cuts a pending graph that grew too large. A cap sync stores every held
// value it reaches at once, not at the second sync that reaches it (held_values.h): it runs
// to cut the graph, and what the program holds is what its next ops read.
enum class SyncReason { kRead, kTraceCap };

// Computes every output that is not realized yet, in one plan, and realizes them. Nothing
// changes when it throws: every node keeps its recipe and every tensor stays valid.
void sync(const std::vector<detail::Node*>& outputs, SyncReason reason = SyncReason::kRead);

// What a sync ran, kept so that kiln::compile can run it again without recording: the plan,
// the realized nodes bound to its input slots (identities only; valid while the graph lives)
// with their buffers, and its parameters.
struct SyncCapture {
  std::shared_ptr<const LaunchPlan> plan;
  std::vector<const detail::Node*> input_nodes;  // per trace input slot
  PlanArguments args;
};

// sync() for `outputs` that are distinct and all unrealized, also returning what it ran.
SyncCapture sync_and_capture(const std::vector<detail::Node*>& outputs);

// How many sync points with work to do ran on the calling thread so far (kiln::compile uses
// it to see whether a function read data while it was being recorded).
uint64_t syncs_on_this_thread();

}  // namespace kiln::jit

#endif  // KILN_JIT_EVAL_SYNC_H_
