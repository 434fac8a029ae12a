// build_plan (launch_plan.h): plans a trace, lowers its kernel groups, looks each program up
// in the kernel cache and lays out when buffers are released; also the run-time arguments
// and the inputs an update_slice may write in place.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/env_options.h"
#include "base/stats_counters.h"
#include "jit/fusion/attention_fusion.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/lowering.h"
#include "jit/fusion/planner.h"
#include "jit/fusion/trace.h"

namespace kiln::jit {
namespace {

// Programs by their printed form (which holds no sizes): a new batch size finds them here.
class KernelCache {
 public:
  std::shared_ptr<const KernelProgram> find_or_add(KernelProgram program, bool* added) {
    std::string key = program.to_string();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(key);
    *added = it == programs_.end();
    if (!*added) return it->second;
    if (programs_.size() >= kCapacity) programs_.clear();  // bounded; rebuilt on demand
    auto shared = std::make_shared<const KernelProgram>(std::move(program));
    programs_.emplace(std::move(key), shared);
    return shared;
  }

 private:
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const KernelProgram>> programs_;
};

KernelCache& kernel_cache() {
  static KernelCache cache;
  return cache;
}

std::string describe(const Trace& trace, const FusionPlan& fusion, const LaunchPlan& plan) {
  std::string out =
      absl::StrCat("plan: ", trace.nodes.size(), " nodes, ", plan.kernels.size(), " kernels\n");
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const PlannedKernel& pk = plan.kernels[k];
    std::vector<std::string> reads, writes, nodes;
    for (int n : pk.launch.inputs) reads.push_back(absl::StrCat("%", n));
    for (int n : pk.launch.outputs) writes.push_back(absl::StrCat("%", n));
    for (int n : pk.launch.nodes) nodes.push_back(absl::StrCat("%", n));
    absl::StrAppend(&out, "kernel ", k, ": ", pk.program->name, " (",
                    anchor_name(pk.program->anchor), ")\n  nodes: ", absl::StrJoin(nodes, " "),
                    "\n  reads: ", absl::StrJoin(reads, " "),
                    "\n  writes: ", absl::StrJoin(writes, " "), "\n");
  }
  std::string stored;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const std::string& why = fusion.reasons[i];
    if (!fusion.materialized[i] || why == "input" || why == "output") continue;
    absl::StrAppend(&stored, "  %", i, " (", ops::op_name(trace.nodes[i].op), "): ", why, "\n");
  }
  if (!stored.empty()) absl::StrAppend(&out, "stored intermediates, and why:\n", stored);
  return out;
}

std::atomic<NewKernelObserver> new_kernel_observer{nullptr};

void notify_new_kernel(const KernelProgram& program) {
  if (NewKernelObserver observer = new_kernel_observer.load(std::memory_order_acquire)) {
    observer(program);
  }
}

}  // namespace

void set_new_kernel_observer(NewKernelObserver observer) {
  new_kernel_observer.store(observer, std::memory_order_release);
}

PlanArguments arguments_of(const Trace& trace) {
  PlanArguments args;
  args.inputs.reserve(trace.inputs.size());
  for (const detail::Node* input : trace.inputs) args.inputs.push_back(input->buffer);
  args.params = trace.params;
  return args;
}

std::vector<bool> donatable_inputs(const Trace& trace, const std::vector<detail::Node*>& targets) {
  std::vector<bool> donated(trace.inputs.size(), false);
  for (const detail::Node* target : targets) {
    if (target->op != ops::OpKind::UpdateSlice || target->realized()) continue;
    const std::shared_ptr<detail::Node>& x = target->inputs[0];
    if (!x->realized() || x.use_count() != 1 || target->inputs[1] == x ||
        x->buffer.use_count() != 1) {
      continue;
    }
    const auto slot = std::find(trace.inputs.begin(), trace.inputs.end(), x.get());
    if (slot != trace.inputs.end()) donated[slot - trace.inputs.begin()] = true;
  }
  return donated;
}

int donated_slot(const LaunchPlan& plan, const std::vector<bool>& donated,
                 const KernelLaunch& launch) {
  for (size_t slot = 0; slot < donated.size(); ++slot) {
    if (donated[slot] && plan.input_nodes[slot] == launch.inputs[0]) {
      return static_cast<int>(slot);
    }
  }
  return -1;
}

namespace {

// Whether `program` reads input `slot`: through a load or a gather, or as its anchor's index
// or start tensor (index_add(x, 0, x, ...) reads x's values as positions).
bool reads_input(const KernelProgram& program, int slot) {
  if (program.anchor_index_input == slot || program.anchor_start_input == slot) return true;
  return std::any_of(program.instrs.begin(), program.instrs.end(), [slot](const Instr& in) {
    return (in.kind == InstrKind::kLoad || in.kind == InstrKind::kGather) && in.input == slot;
  });
}

}  // namespace

OutputStart output_start(const LaunchPlan& plan, const std::vector<bool>& donated, size_t k) {
  const PlannedKernel& pk = plan.kernels[k];
  if (!output_starts_as_input(*pk.program)) return OutputStart::kNew;
  // Written in place, x must not be read where the kernel may already have written.
  if (reads_input(*pk.program, 0)) return OutputStart::kCopyOfX;
  if (donated_slot(plan, donated, pk.launch) >= 0) return OutputStart::kXInPlace;
  const std::vector<int>& released = plan.release_after[k];
  const bool last_read_here =
      std::find(released.begin(), released.end(), pk.launch.inputs[0]) != released.end();
  return last_read_here ? OutputStart::kXInPlace : OutputStart::kCopyOfX;
}

std::shared_ptr<const KernelProgram> share_program(KernelProgram program) {
  bool added = false;
  return kernel_cache().find_or_add(std::move(program), &added);
}

std::shared_ptr<const LaunchPlan> build_plan(const Trace& user_trace) {
  // Hand-written attention becomes attention nodes first (same node ids, same inputs and
  // parameters), so the plan runs with the user's trace's arguments.
  const AttentionRewrite attention = base::env_options().fuse_attention
                                         ? fuse_hand_written_attention(user_trace)
                                         : AttentionRewrite{};
  const Trace& trace = attention.fused.empty() ? user_trace : attention.trace;
  std::vector<int> forced;
  FusionPlan fusion;
  std::vector<LoweredKernel> lowered;
  while (true) {  // lowering may ask for one more node to be stored; plan again then
    fusion = plan_fusion(trace, forced, attention.fused);
    lowered.clear();
    int need = -1;
    for (const KernelGroup& group : fusion.groups) {
      LoweringResult result = lower_group(trace, fusion, group);
      if (result.node_to_store >= 0) {
        need = result.node_to_store;
        break;
      }
      lowered.push_back(std::move(result.kernel));
    }
    if (need < 0) break;
    forced.push_back(need);
  }
  auto plan = std::make_shared<LaunchPlan>();
  for (LoweredKernel& k : lowered) {
    PlannedKernel pk;
    bool added = false;
    pk.program = kernel_cache().find_or_add(std::move(k.program), &added);
    pk.compiled_here = added;
    if (added) notify_new_kernel(*pk.program);
    (added ? base::counters().kernels_compiled : base::counters().kernel_cache_hits) += 1;
    pk.launch = std::move(k.launch);
    plan->kernels.push_back(std::move(pk));
  }
  // Release each intermediate after its last reader.
  std::vector<bool> keep(trace.nodes.size(), false);
  for (int o : trace.outputs) keep[o] = true;
  absl::flat_hash_map<int, size_t> last_reader;
  for (size_t k = 0; k < plan->kernels.size(); ++k) {
    for (int n : plan->kernels[k].launch.inputs) last_reader[n] = k;
  }
  plan->release_after.resize(plan->kernels.size());
  for (const auto& [node, k] : last_reader) {
    if (!keep[node] && trace.nodes[node].op != ops::OpKind::Input) {
      plan->release_after[k].push_back(node);
    }
  }
  plan->outputs = trace.outputs;
  plan->input_nodes.resize(trace.inputs.size());
  plan->node_bytes.resize(trace.nodes.size());
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const TraceNode& n = trace.nodes[i];
    if (n.input_slot >= 0) plan->input_nodes[n.input_slot] = static_cast<int>(i);
    // storage_bytes: a block-quantized node's blocks (its dtype has no element size).
    plan->node_bytes[i] = storage_bytes(n.type->dtype, ops::numel(n.type->shape));
  }
  plan->description = describe(trace, fusion, *plan);
  if (!attention.notes.empty()) {
    absl::StrAppend(&plan->description, "attention:\n");
    for (const std::string& note : attention.notes) {
      absl::StrAppend(&plan->description, "  ", note, "\n");
    }
  }
  return plan;
}

}  // namespace kiln::jit
