// A launch plan: everything a sync point needs to run a trace again without planning —
// its kernels in order, their launch parameters and the buffer plan.
#ifndef KILN_JIT_FUSION_LAUNCH_PLAN_H_
#define KILN_JIT_FUSION_LAUNCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"

// Declared only: the devices that run launch plans never see traces or graph nodes, so
// these stay out of their view of the jit layer (KILN_DEVICE_VIEW_OF_JIT in CMakeLists.txt).
namespace kiln::detail {
struct Node;
}  // namespace kiln::detail

namespace kiln::jit {

struct Trace;

struct PlannedKernel {
  std::shared_ptr<const KernelProgram> program;  // shared through the kernel cache
  KernelLaunch launch;
  bool compiled_here = false;  // generated for this plan (else found in the kernel cache)
};

struct LaunchPlan {
  std::vector<PlannedKernel> kernels;
  // Plan buffers are named by trace node ids; intermediates are released after their last
  // reader so their memory is reused by later kernels.
  std::vector<std::vector<int>> release_after;  // per kernel
  std::vector<int> outputs;                     // per requested output, its trace node
  std::vector<int> input_nodes;                 // per trace input slot, its trace node
  std::vector<int64_t> node_bytes;              // per trace node, the bytes of its value
  std::string description;                      // the plan dump (KILN_DUMP=plan)
};

// What one run of a plan reads: the buffers bound to the trace's input slots and the values of
// its parameters. A plan plus its arguments is all a backend needs, so a compiled function
// replays a plan without any trace.
struct PlanArguments {
  std::vector<std::shared_ptr<base::Buffer>> inputs;  // per trace input slot
  std::vector<double> params;                         // per trace parameter slot
  // Per input slot (empty: none): nothing outside this run can see the buffer any more, so
  // an update_slice may write it in place (donatable_inputs).
  std::vector<bool> donated;
  // This run is the first of a plan built by this sync (KILN_LOG=2 then says which kernels
  // were compiled for it; a plan-cache hit or a replay compiled nothing).
  bool plan_built_now = false;
};

// The arguments of `trace` as recorded: its realized inputs' buffers and its scalars.
PlanArguments arguments_of(const Trace& trace);

// Which input slots of `trace` the run computing `targets` may overwrite: the x of an
// update_slice target when that update_slice is the only holder of x (the caller's handle
// was replaced, as in `cache = update_slice(cache, ...)`), x's buffer is x's alone, and the
// update does not read x. After the sync x is gone, so nobody can see the difference.
std::vector<bool> donatable_inputs(const Trace& trace, const std::vector<detail::Node*>& targets);

// The plan input slot whose buffer update_slice kernel `launch` may write in place (its x,
// input 0, marked in `donated`: PlanArguments::donated), or -1: then its output starts as
// a copy of x.
int donated_slot(const LaunchPlan& plan, const std::vector<bool>& donated,
                 const KernelLaunch& launch);

// Where output 0 of kernel k starts.
enum class OutputStart {
  kNew,       // a new buffer: the kernel writes all of it
  kXInPlace,  // x's own buffer (input 0), which nobody reads after this kernel
  kCopyOfX,   // a copy of x
};
// kXInPlace for an update_slice or index_add kernel whose prologue reads nothing of x, when
// x is donated (donated_slot) or an intermediate of this plan whose last reader is this
// kernel (the backend then hands x's buffer over rather than releasing it); kCopyOfX for
// the others; kNew for kernels whose output does not start as x.
OutputStart output_start(const LaunchPlan& plan, const std::vector<bool>& donated, size_t k);

// Called with each program a plan build adds to the kernel cache (its first use in the
// process). Fusion cannot reach the devices' renderers, so jit/eval/sync_dump.cc installs the
// KILN_RECORD_CUDA_DIR recorder here when the program starts.
using NewKernelObserver = void (*)(const KernelProgram& program);
void set_new_kernel_observer(NewKernelObserver observer);

// `program` shared through the kernel cache, as plans share it, without counting it as a
// kernel compiled (Stats::kernels_compiled): how a bundle's programs join this process.
std::shared_ptr<const KernelProgram> share_program(KernelProgram program);

// Plans `trace`: fusion, lowering, the kernel cache, the buffer plan.
std::shared_ptr<const LaunchPlan> build_plan(const Trace& trace);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_LAUNCH_PLAN_H_
