// The CPU device's kernel executor: runs a Kernel IR program over tiles of its iteration
// spaces, each instruction over a whole tile at a time (so fused values stay in cache), on
// all cores.
#ifndef KILN_RUNTIME_CPU_KERNEL_EXECUTOR_H_
#define KILN_RUNTIME_CPU_KERNEL_EXECUTOR_H_

#include <functional>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cpu {

// Runs `program` with `launch`'s sizes. `inputs`/`outputs` are per slot; `params` per
// parameter slot. Output buffers are allocated by the caller.
void execute_kernel(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                    const std::vector<const base::Buffer*>& inputs,
                    const std::vector<base::Buffer*>& outputs, const std::vector<double>& params);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_KERNEL_EXECUTOR_H_
