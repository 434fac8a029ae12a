// Lowering: one kernel group of a fusion plan becomes a KernelProgram (size-free) and its
// KernelLaunch (sizes, strides, scalars, buffers).
#ifndef KILN_JIT_FUSION_LOWERING_H_
#define KILN_JIT_FUSION_LOWERING_H_

#include <variant>

#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/planner.h"
#include "jit/fusion/trace.h"

namespace kiln::jit {

struct LoweredKernel {
  KernelProgram program;
  KernelLaunch launch;
};

// Lowers `group`. Plan buffers are named by trace node ids. When a view cannot be expressed
// as strides (a permute, slice or broadcast of a reshaped non-contiguous value), returns the
// id of the node that must be materialized instead.
std::variant<LoweredKernel, int> lower_group(const Trace& trace, const FusionPlan& plan,
                                             const KernelGroup& group);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_LOWERING_H_
