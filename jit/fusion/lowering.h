// Lowering: one kernel group of a fusion plan becomes a KernelProgram (size-free) and its
// KernelLaunch (sizes, strides, scalars, buffers).
#ifndef KILN_JIT_FUSION_LOWERING_H_
#define KILN_JIT_FUSION_LOWERING_H_

#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/planner.h"
#include "jit/fusion/trace.h"

namespace kiln::jit {

struct LoweredKernel {
  KernelProgram program;
  KernelLaunch launch;
};

// What lowering a group gives: its kernel, or, when a view cannot be expressed as strides
// (a permute, slice or broadcast of a reshaped non-contiguous value), the trace node that
// must be materialized first (the planner then plans again with it stored).
struct LoweringResult {
  LoweredKernel kernel;  // valid when node_to_store < 0
  int node_to_store = -1;
};

// Lowers `group`. Plan buffers are named by trace node ids.
LoweringResult lower_group(const Trace& trace, const FusionPlan& plan, const KernelGroup& group);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_LOWERING_H_
