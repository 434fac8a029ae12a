#include "jit/eval/sync.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/env_options.h"
#include "base/stats_counters.h"
#include "jit/backend/backend.h"
#include "jit/eval/sync_dump.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/plan_cache.h"
#include "jit/fusion/trace.h"
#include "jit/graph/held_values.h"
#include "jit/graph/record.h"
#include "jit/graph/sync_claims.h"
#include "kiln/error.h"

namespace kiln::jit {

namespace {

thread_local uint64_t thread_syncs = 0;

// Plans (or finds the plan for) and runs `targets`, distinct unrealized nodes, and realizes
// them; fills `capture` when given.
void run_targets(const std::vector<detail::Node*>& targets, SyncCapture* capture) {
  thread_syncs += 1;
  const auto start = std::chrono::steady_clock::now();
  const base::EnvOptions& options = base::env_options();
  std::string dump_folder;
  if (options.dump_trace) dump_folder = dump_sync_trace(targets);

  Trace trace = build_trace(targets);
  const Device device = targets.front()->device;
  bool hit = false;
  std::shared_ptr<const LaunchPlan> plan = find_or_build_plan(trace, device, &hit);
  if (hit) base::counters().plan_cache_hits += 1;
  if (options.dump_plan || options.dump_kernels) dump_sync_plan(&dump_folder, *plan, device);

  // Decided before arguments_of holds the input buffers too.
  std::vector<bool> donated = donatable_inputs(trace, targets);
  PlanArguments args = arguments_of(trace);
  args.donated = std::move(donated);
  args.plan_built_now = !hit;
  // KILN_LOG=2: the sync's line first, so the kernel lines that follow are seen as its own.
  if (options.log_level >= 2) {
    std::fprintf(stderr, "kiln: sync on %s: %zu nodes, %zu kernels, plan %s\n",
                 device_name(device).c_str(), trace.nodes.size(), plan->kernels.size(),
                 hit ? "hit" : "miss (built)");
  }
  std::vector<std::shared_ptr<base::Buffer>> buffers;
  try {
    buffers = jit::backend_for(device).run(*plan, args);
  } catch (const std::bad_alloc&) {
    throw Error(absl::StrCat("out of memory while computing ", trace.nodes.size(), " nodes on ",
                             device_name(device)));
  }
  base::counters().syncs += 1;
  // Only now, with every result in hand, does any node change.
  for (size_t i = 0; i < targets.size(); ++i) targets[i]->realize(std::move(buffers[i]));
  if (capture != nullptr) {
    args.donated.clear();  // a replay's inputs are the caller's: never donated
    args.plan_built_now = false;
    capture->plan = plan;
    capture->input_nodes.assign(trace.inputs.begin(), trace.inputs.end());
    capture->args = std::move(args);
  }

  if (options.dump_trace) dump_sync_outputs(dump_folder, targets);
  if (options.log_level >= 1) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (options.log_level >= 2) {
      std::fprintf(stderr, "kiln: sync on %s done: %.3f ms\n", device_name(device).c_str(), ms);
    } else {
      std::fprintf(stderr, "kiln: sync on %s: %zu nodes, %zu kernels, plan %s, %.3f ms\n",
                   device_name(device).c_str(), trace.nodes.size(), plan->kernels.size(),
                   hit ? "hit" : "miss (built)", ms);
    }
  }
}

// Adds to `targets` every unrealized collective they depend on. A collective's result is
// kept once computed: running it again at a later sync, on this rank alone, would leave the
// other ranks' matching calls unanswered. Returns references to the added nodes: a target
// that reaches one drops its inputs when realized, which may be the added node's only other
// reference, before the added node itself is realized.
std::vector<std::shared_ptr<detail::Node>> add_pending_collectives(
    std::vector<detail::Node*>& targets) {
  std::vector<std::shared_ptr<detail::Node>> added;
  std::vector<detail::Node*> stack(targets.begin(), targets.end());
  absl::flat_hash_set<detail::Node*> seen(targets.begin(), targets.end());
  while (!stack.empty()) {
    detail::Node* n = stack.back();
    stack.pop_back();
    for (const std::shared_ptr<detail::Node>& in : n->inputs) {
      if (in->realized() || !seen.insert(in.get()).second) continue;
      if (ops::op_class(in->op) == ops::OpClass::kCollective) {
        targets.push_back(in.get());
        added.push_back(in);
      }
      stack.push_back(in.get());
    }
  }
  return added;
}

}  // namespace

void sync(const std::vector<detail::Node*>& outputs, SyncReason reason) {
  if (std::all_of(outputs.begin(), outputs.end(),
                  [](const detail::Node* n) { return n->realized(); })) {
    return;  // everything is already computed
  }
  // Waits while another thread's sync computes part of this graph; what it realized is
  // then read here as a leaf.
  const ClaimedGraph claim(outputs);
  // Outputs that still need computing, each once.
  std::vector<detail::Node*> targets;
  for (detail::Node* out : outputs) {
    if (!out->realized() && std::find(targets.begin(), targets.end(), out) == targets.end()) {
      targets.push_back(out);
    }
  }
  if (targets.empty()) return;  // everything is already computed
  // Values the program still holds are stored the second time a sync reaches them, or at
  // once by the trace cap (held_values.h); counted before anything here takes a reference.
  HeldValues held;
  if (base::env_options().store_held) {
    held = find_held_values(targets, /*store_at_once=*/reason == SyncReason::kTraceCap);
    for (const std::shared_ptr<detail::Node>& n : held.store) targets.push_back(n.get());
  }
  std::vector<std::shared_ptr<detail::Node>> kept_alive;
  if (any_collective_recorded()) kept_alive = add_pending_collectives(targets);
  run_targets(targets, nullptr);
  mark_computed_while_held(held);
}

SyncCapture sync_and_capture(const std::vector<detail::Node*>& outputs) {
  const ClaimedGraph claim(outputs);
  SyncCapture capture;
  run_targets(outputs, &capture);
  return capture;
}

uint64_t syncs_on_this_thread() { return thread_syncs; }

namespace {

// Recording cuts a pending graph that grew past the trace cap with this sync
// (jit/graph/record.h). Installed during static initialization: this file is in every
// program that records, because reading a tensor's data calls sync().
void sync_at_trace_cap(detail::Node* node) { sync({node}, SyncReason::kTraceCap); }
[[maybe_unused]] const bool trace_cap_sync_installed =
    (set_trace_cap_sync(&sync_at_trace_cap), true);

}  // namespace

}  // namespace kiln::jit
